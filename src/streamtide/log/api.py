"""The log interface: partitioned, offset-addressed topics with sealed (visible) and unsealed
(pending) segments.

Records become visible in two ways. ``append`` writes and seals at once (producers, the CLI).
``write_segment`` + ``seal`` split the two so the engine can write a task attempt's output while
the batch runs and make exactly one attempt visible at stage commit. Offsets are assigned when a
segment is sealed, so concurrent writers never collide and offsets stay dense.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from streamtide.errors import LogError

if TYPE_CHECKING:
    import pyarrow as pa

Headers = tuple[tuple[str, bytes], ...]


#: A topic name as Kafka allows it: 1-249 of [A-Za-z0-9._-], not starting with '.'.
TOPIC_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,248}$")
MAX_PARTITIONS = 100_000


def check_new_topic(name: object, partitions: object) -> None:
    """Refuse a topic name or partition count that no log accepts (before creating it)."""
    if not isinstance(name, str) or not TOPIC_RE.match(name):
        raise LogError(
            f"invalid topic name {name!r}: use 1-249 of [A-Za-z0-9._-], not starting with '.'"
        )
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        raise LogError(f"partitions must be an int, got {type(partitions).__name__}")
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise LogError(f"partitions must be between 1 and {MAX_PARTITIONS}, got {partitions}")


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One stored record. ``offset`` is None when writing and filled in when read."""

    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: Headers = field(default=())
    offset: int | None = None


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """A topic's name and partition count."""

    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """Names one segment of a partition, sealed or not.

    Returned by ``write_segment`` and ``list_unsealed``; picklable and convertible to a dict
    (``as_dict``/``from_dict``) so the engine can ship it to the driver and name it in its
    prepare records.
    """

    topic: str
    partition: int
    name: str
    writer_id: str
    record_count: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "name": self.name,
            "writer_id": self.writer_id,
            "record_count": self.record_count,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SegmentRef:
        return cls(
            topic=str(data["topic"]),
            partition=int(data["partition"]),
            name=str(data["name"]),
            writer_id=str(data["writer_id"]),
            record_count=int(data["record_count"]),
        )


#: What ``append`` and ``write_segment`` accept: LogRecords, or a ``pyarrow.Table`` with the
#: columns key (binary), value (binary), timestamp (int64) and optionally headers.
Records = Union[Sequence[LogRecord], Iterable[LogRecord], "pa.Table"]


class Log(ABC):
    """Partitioned, offset-addressed topics. Readers see sealed records only.

    Implementations must be safe to use from several processes at once: any of them may append,
    write segments and seal into the same partition concurrently.
    """

    # -- topics ------------------------------------------------------------------------------

    @property
    @abstractmethod
    def url(self) -> str:
        """A URL that ``open_log`` turns into an equivalent log (for other processes)."""

    @abstractmethod
    def create_topic(
        self,
        name: str,
        partitions: int,
        *,
        exist_ok: bool = False,
        configs: Mapping[str, str] | None = None,
    ) -> TopicDescription:
        """Create a topic. With ``exist_ok`` an existing topic with the same partition count is
        fine; a different count is always an error. ``configs`` are topic settings for logs
        that have them (Kafka: ``cleanup.policy``, ``retention.ms``, ...); the file log keeps
        every record until ``truncate_before`` and has no use for them."""

    @abstractmethod
    def delete_topic(self, name: str) -> None:
        """Delete a topic and all its data; UnknownTopicError if it does not exist."""

    @abstractmethod
    def list_topics(self) -> list[str]:
        """Names of all topics, sorted."""

    @abstractmethod
    def describe_topic(self, name: str) -> TopicDescription:
        """The topic's description; UnknownTopicError if it does not exist."""

    def has_topic(self, name: str) -> bool:
        """Whether the topic exists."""
        return name in self.list_topics()

    def partitions(self, name: str) -> int:
        """The topic's partition count."""
        return self.describe_topic(name).partitions

    def topic_id(self, name: str) -> str | None:
        """An id the topic got when it was created (a re-created topic gets a new one), or
        None where the log has no topic ids. UnknownTopicError if it does not exist."""
        self.describe_topic(name)
        return None

    def topic_ids(self, names: Iterable[str]) -> dict[str, str | None]:
        """``topic_id`` of many topics at once (a driver asks for every source topic of
        every batch, which a log may answer in one request)."""
        return {name: self.topic_id(name) for name in names}

    # -- offsets -----------------------------------------------------------------------------

    @abstractmethod
    def end_offset(self, topic: str, partition: int) -> int:
        """The offset the next sealed record will get (sealed data only)."""

    @abstractmethod
    def begin_offset(self, topic: str, partition: int) -> int:
        """The first offset still readable; above 0 after ``truncate_before``."""

    def end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """``end_offset`` of many ``(topic, partition)`` at once: a driver planning a batch
        asks for every partition of the application, which a log may answer in one request
        (Kafka does) instead of one per partition."""
        return {(t, p): self.end_offset(t, p) for t, p in partitions}

    def begin_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """``begin_offset`` of many ``(topic, partition)`` at once (see ``end_offsets``)."""
        return {(t, p): self.begin_offset(t, p) for t, p in partitions}

    # -- reading -----------------------------------------------------------------------------

    @abstractmethod
    def read(
        self,
        topic: str,
        partition: int,
        start: int = 0,
        end: int | None = None,
        max_records: int | None = None,
    ) -> Iterator[LogRecord]:
        """Sealed records with offsets in ``[start, end)`` (``end=None``: the current end),
        at most ``max_records`` of them. The range is checked when called, not when iterated:
        ``start`` below ``begin_offset`` or above ``end_offset``, or ``end`` above
        ``end_offset``, raise OffsetOutOfRangeError."""

    @abstractmethod
    def read_table(
        self,
        topic: str,
        partition: int,
        start: int = 0,
        end: int | None = None,
        max_records: int | None = None,
    ) -> pa.Table:
        """Bulk form of ``read``: one ``pyarrow.Table`` with the columns offset (int64), key,
        value (binary), timestamp (int64), headers (list<struct<key: string, value: binary>>),
        without building a Python object per record."""

    # -- writing -----------------------------------------------------------------------------

    @abstractmethod
    def append(self, topic: str, partition: int, records: Records) -> int:
        """Write and seal ``records`` as one segment; returns the base offset (the first
        record's offset, or the current end offset when ``records`` is empty)."""

    @abstractmethod
    def write_segment(
        self, topic: str, partition: int, records: Records, *, writer_id: str
    ) -> SegmentRef:
        """Write an unsealed segment, invisible to readers until ``seal``. ``writer_id`` names
        the writer (for example ``"batch-12/0_3/attempt-1"``) so that a failed writer's
        segments can be found and aborted by prefix."""

    def write_segments(
        self, parts: Sequence[tuple[str, int, Records, str]], *, writer_id: str
    ) -> list[SegmentRef]:
        """``write_segment`` of many partitions at once: ``parts`` are ``(topic, partition,
        records, writer id of that segment)``; returns their refs in order. A log may write
        them as one file (the file log does: one file and one fsync for all), which
        ``writer_id`` names; each ref is sealed, read and aborted like a segment of its own.
        """
        return [self.write_segment(t, p, records, writer_id=w) for t, p, records, w in parts]

    def abort_unsealed_shared(self, decided: Callable[[str], bool]) -> int:
        """Delete what ``write_segments`` wrote for writers that ``decided(writer_id)`` says
        are done (dead, or their batch decided), where none of it is sealed; returns how many
        segments went. Only for logs that share files between partitions (else 0)."""
        return 0

    @abstractmethod
    def seal(self, topic: str, partition: int, segment: SegmentRef, *, seal_id: str) -> int:
        """Make an unsealed segment visible and return the base offset it was given.

        Idempotent by ``seal_id`` (which names batch and task, e.g. ``"batch-12/0_3"``, and is
        unique within a partition): sealing the same segment with the same seal_id again is a
        no-op returning the first base offset. A seal_id already used for a different segment,
        or a segment already sealed under another seal_id, raises SealConflictError.
        """

    def seal_many(self, seals: Sequence[tuple[SegmentRef, str]]) -> list[int]:
        """Seal several segments, of any topics and partitions, each with its seal id (as
        ``seal``, in order); returns their base offsets. A log may make them durable
        together (the file log: one journal record instead of a manifest fsync each)."""
        return [self.seal(ref.topic, ref.partition, ref, seal_id=sid) for ref, sid in seals]

    @abstractmethod
    def read_segment(self, segment: SegmentRef) -> pa.Table:
        """The records of one segment, sealed or not, as a table with the columns key, value,
        timestamp and headers (no offsets: an unsealed segment has none yet). Lets the engine
        combine a stage's segments before it seals them."""

    @abstractmethod
    def list_unsealed(self, topic: str, partition: int) -> list[SegmentRef]:
        """Unsealed segments of one partition (written and not yet sealed or aborted)."""

    @abstractmethod
    def abort_unsealed(self, topic: str, partition: int, segment: SegmentRef) -> None:
        """Delete an unsealed segment; a no-op if it is already gone. Sealed segments cannot
        be aborted (SegmentError)."""

    @abstractmethod
    def abort_unsealed_by_prefix(
        self, writer_prefix: str, *, topics: Iterable[str] | None = None
    ) -> int:
        """Delete every unsealed segment whose writer_id starts with ``writer_prefix`` in the
        given topics (default: all); returns how many were deleted. Only call it for writers
        known to be dead: a live writer's segment would vanish under it."""

    @abstractmethod
    def truncate_before(self, topic: str, partition: int, offset: int) -> int:
        """Drop the sealed segments that lie entirely below ``offset`` and return the new
        ``begin_offset`` (the base of the first kept segment, or the end offset). Durable."""

    #: Whether the engine commits each task through a transaction of this log (Kafka) rather
    #: than by sealing segments; offsets may then have gaps (commit markers, aborted records).
    transactional = False

    # -- lifecycle ---------------------------------------------------------------------------

    @abstractmethod
    def close(self) -> None:
        """Release resources; later calls raise LogClosedError."""

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
