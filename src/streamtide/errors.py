"""Exceptions raised by Streamtide, one family per kind of failure."""

from __future__ import annotations


class StreamtideError(Exception):
    """Base of every error Streamtide raises on purpose."""


class ConfigError(StreamtideError, ValueError):
    """A configuration value is missing, of the wrong type or out of range."""


class TopologyError(StreamtideError):
    """The topology is malformed: unknown store, duplicate name, missing source, ..."""


class SerdeError(StreamtideError):
    """A value could not be serialized or bytes could not be deserialized."""


class StoreError(StreamtideError):
    """A state store was used wrongly or failed (closed store, lock held, corrupt data)."""


class LogError(StreamtideError):
    """The partitioned log failed: missing topic, bad offset range, corrupt segment."""


class SegmentError(LogError):
    """A segment is missing, corrupt, or was used in a way its state forbids."""


class UnknownTopicError(LogError, KeyError):
    """A topic that does not exist was read or written."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "unknown topic"


class UnsupportedVersionError(StreamtideError):
    """Encoded metadata uses a version newer than this release can read."""


class StreamsProcessingError(StreamtideError):
    """A processor raised while handling a record; names where it happened."""

    def __init__(
        self,
        message: str,
        *,
        task_id: str | None = None,
        node: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.message = message
        self.task_id = task_id
        self.node = node
        self.topic = topic
        self.partition = partition
        self.offset = offset
        where = ", ".join(
            f"{label}={value}"
            for label, value in (
                ("task", task_id),
                ("node", node),
                ("topic", topic),
                ("partition", partition),
                ("offset", offset),
            )
            if value is not None
        )
        super().__init__(f"{message} ({where})" if where else message)


class UserCodeError(StreamsProcessingError):
    """User code raised (a ``Processor``, a DSL function, a serde, a partitioner, a timestamp
    extractor, a punctuator) and the processing exception handler did not skip it: the
    application stops at once, without retries, so that no record reaches user code a second
    time (user code may have effects outside the application). The cause is the exception
    user code raised."""


class HandlerFailedError(StreamsProcessingError):
    """A record error handler function answered ``FAIL`` (or raised itself): the application
    stops at once, without retries."""


class CorruptLogError(SegmentError):
    """Stored log data failed a check (checksum, manifest chain, missing entry): it is never
    read as records. Names the topic, partition and file."""


class CorruptRecordError(StreamtideError):
    """A durable record the engine reads (application directory, checkpoint) is unreadable;
    the message names its path."""


class FencedError(StreamtideError):
    """Another instance of the application took over (it holds a newer epoch): this driver
    must stop without writing anything more."""


class InputTopicChangedError(LogError):
    """An input topic no longer matches the committed offsets: it was deleted and re-created,
    or it is shorter than the committed offset. Set ``auto_offset_reset`` to continue."""


class BufferFullError(StreamsProcessingError):
    """A suppression buffer configured with ``shutdown_when_full()`` exceeded its limits: the
    application stops at once (no retry, no error handler), naming the node and the limits."""


class InvalidTimestampError(StreamsProcessingError):
    """A record's timestamp is negative and ``invalid_timestamp_handler`` is ``"fail"``."""


class StoreDamagedError(StoreError):
    """A read (or write) of a store's local files failed on an open database: its files are
    damaged. They are wiped when the store closes; the task rebuilds them from the changelog
    and its batch is run again."""


class InvalidStateStoreError(StoreError):
    """A store cannot be queried: unknown name, a kind that cannot be queried, an application
    that is not running, or its task unreachable for now (retry after the next batch)."""


def from_infrastructure(error: BaseException) -> bool:
    """Whether ``error``, caught where user code runs, came from what the application runs
    on rather than from user code: a store's damaged local files, the log, a newer driver, or
    memory. Such failures are retried; anything else user code raised is final."""
    return isinstance(error, (StoreDamagedError, LogError, FencedError, MemoryError))
