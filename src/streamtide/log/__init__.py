"""Partitioned, offset-addressed topics: the ``Log`` interface, the embedded file log, the
Kafka log and ``open_log``. Readers see sealed records only; see ``api.Log`` for the contract."""

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
