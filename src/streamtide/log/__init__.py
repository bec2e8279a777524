"""Partitioned, offset-addressed topics: the ``Log`` interface, the embedded file log, the
Kafka log and ``open_log``. Readers see sealed records only; see ``api.Log`` for the contract."""

from typing import TYPE_CHECKING

from streamtide.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from streamtide.log.api import Headers, Log, LogRecord, Records, SegmentRef, TopicDescription
    from streamtide.log.errors import (
        LogClosedError,
        LogError,
        LogUnavailableError,
        OffsetOutOfRangeError,
        ProducerFencedError,
        SealConflictError,
        SegmentError,
        TopicExistsError,
        UnknownPartitionError,
        UnknownTopicError,
        UnsupportedOperationError,
    )
    from streamtide.log.factory import DEFAULT_LOG_URL, is_kafka_url, log_path, open_log
    from streamtide.log.file_log import APPEND_WRITER, FileLog
    from streamtide.log.kafka_client import CHANGELOG_CONFIGS, REPARTITION_CONFIGS
    from streamtide.log.kafka_log import KafkaLog
    from streamtide.log.partitioner import murmur2, partition_for_key
    from streamtide.log.segments import READ_SCHEMA, SEGMENT_SCHEMA, records_of

#: Each exported name and the module that defines it (imported when first asked for).
_EXPORTS = {
    "Headers": "streamtide.log.api",
    "Log": "streamtide.log.api",
    "LogRecord": "streamtide.log.api",
    "Records": "streamtide.log.api",
    "SegmentRef": "streamtide.log.api",
    "TopicDescription": "streamtide.log.api",
    "LogClosedError": "streamtide.log.errors",
    "LogError": "streamtide.log.errors",
    "LogUnavailableError": "streamtide.log.errors",
    "OffsetOutOfRangeError": "streamtide.log.errors",
    "ProducerFencedError": "streamtide.log.errors",
    "SealConflictError": "streamtide.log.errors",
    "SegmentError": "streamtide.log.errors",
    "TopicExistsError": "streamtide.log.errors",
    "UnknownPartitionError": "streamtide.log.errors",
    "UnknownTopicError": "streamtide.log.errors",
    "UnsupportedOperationError": "streamtide.log.errors",
    "DEFAULT_LOG_URL": "streamtide.log.factory",
    "is_kafka_url": "streamtide.log.factory",
    "log_path": "streamtide.log.factory",
    "open_log": "streamtide.log.factory",
    "APPEND_WRITER": "streamtide.log.file_log",
    "FileLog": "streamtide.log.file_log",
    "CHANGELOG_CONFIGS": "streamtide.log.kafka_client",
    "REPARTITION_CONFIGS": "streamtide.log.kafka_client",
    "KafkaLog": "streamtide.log.kafka_log",
    "murmur2": "streamtide.log.partitioner",
    "partition_for_key": "streamtide.log.partitioner",
    "READ_SCHEMA": "streamtide.log.segments",
    "SEGMENT_SCHEMA": "streamtide.log.segments",
    "records_of": "streamtide.log.segments",
}

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

__all__ = [
    "APPEND_WRITER",
    "CHANGELOG_CONFIGS",
    "DEFAULT_LOG_URL",
    "READ_SCHEMA",
    "REPARTITION_CONFIGS",
    "SEGMENT_SCHEMA",
    "FileLog",
    "Headers",
    "KafkaLog",
    "Log",
    "LogClosedError",
    "LogError",
    "LogRecord",
    "LogUnavailableError",
    "OffsetOutOfRangeError",
    "ProducerFencedError",
    "Records",
    "SealConflictError",
    "SegmentError",
    "SegmentRef",
    "TopicDescription",
    "TopicExistsError",
    "UnknownPartitionError",
    "UnknownTopicError",
    "UnsupportedOperationError",
    "is_kafka_url",
    "log_path",
    "murmur2",
    "open_log",
    "partition_for_key",
    "records_of",
]
