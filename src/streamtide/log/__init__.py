"""Partitioned, offset-addressed topics: the ``Log`` interface, the embedded file log and
``open_log``. Readers see sealed records only; see ``api.Log`` for the contract."""

from streamtide.log.api import Headers, Log, LogRecord, Records, SegmentRef, TopicDescription
from streamtide.log.errors import (
    LogClosedError,
    LogError,
    OffsetOutOfRangeError,
    SealConflictError,
    SegmentError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from streamtide.log.factory import DEFAULT_LOG_URL, log_path, open_log
from streamtide.log.file_log import APPEND_WRITER, FileLog
from streamtide.log.partitioner import murmur2, partition_for_key
from streamtide.log.segments import READ_SCHEMA, SEGMENT_SCHEMA, records_of

__all__ = [
    "APPEND_WRITER",
    "DEFAULT_LOG_URL",
    "READ_SCHEMA",
    "SEGMENT_SCHEMA",
    "FileLog",
    "Headers",
    "Log",
    "LogClosedError",
    "LogError",
    "LogRecord",
    "OffsetOutOfRangeError",
    "Records",
    "SealConflictError",
    "SegmentError",
    "SegmentRef",
    "TopicDescription",
    "TopicExistsError",
    "UnknownPartitionError",
    "UnknownTopicError",
    "log_path",
    "murmur2",
    "open_log",
    "partition_for_key",
    "records_of",
]
