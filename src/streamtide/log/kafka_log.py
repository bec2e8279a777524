"""The Kafka log: the ``Log`` interface on a Kafka cluster, through confluent-kafka.

Topics are Kafka topics; offsets are Kafka offsets. Readers use ``isolation.level =
read_committed``, so they see committed records only (the Kafka counterpart of "sealed"), and
``end_offset`` is the last stable offset. Appends go through one idempotent producer per
handle. Offsets may have gaps (transaction markers, aborted records, compaction): a range
read returns the records that exist in the range.

Segment sealing (``write_segment``, ``seal``, ...) is the file log's commit protocol; on Kafka
writes commit with transactions instead (``kafka_once``), so those methods raise
``UnsupportedOperationError``.

Topic metadata is cached per handle. Writes and truncations re-read it first, because a
produce request to a topic that does not exist may create it on some brokers; reads trust
the cache and turn a broker's "unknown topic" into ``UnknownTopicError``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from streamtide.log.api import (
    Log,
    LogRecord,
    Records,
    SegmentRef,
    TopicDescription,
    check_new_topic,
)
from streamtide.log.errors import (
    LogClosedError,
    LogError,
    LogUnavailableError,
    OffsetOutOfRangeError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
    UnsupportedOperationError,
)
from streamtide.log.kafka_admin import KafkaAdmin
from streamtide.log.kafka_client import (
    READER_DEFAULTS,
    READER_GROUP_ID,
    REQUIRED_CONSUMER,
    REQUIRED_PRODUCER,
    client_config,
    connect_timeout_s,
    log_client_error,
    new_client,
    split_options,
    translate,
)
from streamtide.log.kafka_probe import Found, RecordProbe
from streamtide.log.kafka_read import PartitionReader, to_table
from streamtide.log.kafka_write import produce_all
from streamtide.log.segments import iter_records
from streamtide.log.segments import to_table as to_segment_table

#: The timestamps with which a ListOffsets request asks for the first and the next offset.
_EARLIEST, _LATEST = -2, -1
_CHUNK = 10_000


class KafkaLog(Log):
    """Topics of the Kafka cluster at ``bootstrap`` (``host:port[,host:port]``).

    ``options`` are confluent-kafka settings (security, SASL, TLS, timeouts) given to every
    client unchanged; ``topic.``-prefixed keys are configs of the topics this handle creates,
    ``streamtide.connect.timeout.ms`` how long the first call waits for the cluster to answer
    at all (see ``kafka_client``). ``timeout_s`` bounds each call that waits for the cluster.
    Thread-safe; clients are created on first use.
    """

    transactional = True

    def __init__(
        self, bootstrap: str, options: Mapping[str, Any] | None = None, *, timeout_s: float = 30.0
    ) -> None:
        self._bootstrap = bootstrap
        self._options = dict(options or {})
        self._client_options, self._topic_defaults = split_options(self._options)
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s(self._options)
        # Check option conflicts now, not at the first read or write.
        client_config(bootstrap, self._client_options, REQUIRED_CONSUMER)
        client_config(bootstrap, self._client_options, REQUIRED_PRODUCER)
        self._lock = threading.RLock()
        self._read_lock = threading.Lock()
        self._admin_client: KafkaAdmin | None = None
        self._no_topic_ids = False  # the brokers report no topic ids (all-zero ones)
        self._producer_client: Any = None
        self._consumer_client: Any = None
        self._reader: PartitionReader
        self._probe: RecordProbe | None = None
        self._watermarks_client: Any = None  # read_uncommitted: asks for high watermarks
        self._probe_lock = threading.Lock()
        self._fatal_error: Any = None
        self._counts: dict[str, int] = {}
        self._closed = False

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # Pickles as "connect to the same cluster" (e.g. in Spark closures); clients stay.
        return (KafkaLog._reopen, (self._bootstrap, self._options, self.timeout_s))

    @staticmethod
    def _reopen(bootstrap: str, options: dict[str, Any], timeout_s: float) -> KafkaLog:
        return KafkaLog(bootstrap, options, timeout_s=timeout_s)

    def __repr__(self) -> str:
        return f"KafkaLog({self._bootstrap!r})"

    @property
    def url(self) -> str:
        return f"kafka://{self._bootstrap}"

    @property
    def bootstrap(self) -> str:
        """The bootstrap servers, ``host:port[,host:port]``."""
        return self._bootstrap

    @property
    def options(self) -> dict[str, Any]:
        """The options this handle was opened with (a copy)."""
        return dict(self._options)

    # -- topics ------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        *,
        exist_ok: bool = False,
        configs: Mapping[str, str] | None = None,
    ) -> TopicDescription:
        self._check_open()
        check_new_topic(name, partitions)
        settings = {**self._topic_defaults, **{k: str(v) for k, v in (configs or {}).items()}}
        try:
            self._admin().create(name, partitions, settings)
        except TopicExistsError:
            existing = self._count(name, verify=True)
            if not exist_ok:
                raise TopicExistsError(f"topic {name!r} already exists in {self.url}") from None
            if existing != partitions:
                raise LogError(
                    f"topic {name!r} exists with {existing} partitions, not {partitions}"
                ) from None
        return TopicDescription(name, partitions)

    def delete_topic(self, name: str) -> None:
        self._check_open()
        try:
            self._admin().delete(name)
        finally:
            self._counts.pop(name, None)

    def list_topics(self) -> list[str]:
        """Names of all topics, sorted; Kafka's internal ``__``-prefixed topics are left out."""
        return sorted(t for t in self._metadata() if not t.startswith("__"))

    def has_topic(self, name: str) -> bool:
        return name in self._metadata()

    def describe_topic(self, name: str) -> TopicDescription:
        return TopicDescription(name, self._count(name, verify=True))

    def partitions(self, name: str) -> int:
        """The topic's partition count, from this handle's metadata (asked of the cluster the
        first time): a driver asks it for every task of every batch, and one metadata
        request names every partition of every topic. ``describe_topic`` asks anew."""
        return self._count(name)

    def topic_id(self, name: str) -> str | None:
        """The topic's id where the brokers report topic ids, else None (then a re-created
        topic is told by ``source_marks``). A cluster that reported none once is not asked
        again."""
        self._count(name, verify=True)
        if self._no_topic_ids:
            return None
        found = self._admin().topic_id(name)
        self._no_topic_ids = found is None
        return found

    def topic_ids(self, names: Iterable[str]) -> dict[str, str | None]:
        """``topic_id`` of many topics after one metadata request (on brokers that report
        no topic ids, nothing more is asked)."""
        wanted = list(names)
        if not wanted:
            return {}
        counts = self._metadata()
        for name in wanted:
            if name not in counts:
                raise UnknownTopicError(f"topic {name!r} does not exist in {self.url}")
        if self._no_topic_ids:
            return dict.fromkeys(wanted)
        return {name: self.topic_id(name) for name in wanted}

    def topic_configs(self, name: str) -> dict[str, str]:
        """The topic's effective configs as the broker reports them (``cleanup.policy``,
        ``retention.ms``, ...)."""
        self._count(name, verify=True)
        return self._admin().configs(name)

    # -- offsets -----------------------------------------------------------------------------

    def end_offset(self, topic: str, partition: int) -> int:
        return self._watermarks(topic, partition)[1]

    def begin_offset(self, topic: str, partition: int) -> int:
        return self._watermarks(topic, partition)[0]

    def end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Last stable offsets of many partitions in one request per broker."""
        return self._list_offsets(partitions, "end")

    def begin_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Low watermarks of many partitions in one request per broker."""
        return self._list_offsets(partitions, "begin")

    def high_watermarks(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """``high_watermark`` of many partitions in one request per broker."""
        return self._list_offsets(partitions, "high")

    def _list_offsets(
        self, partitions: Iterable[tuple[str, int]], which: str
    ) -> dict[tuple[str, int], int]:
        """One ListOffsets request per broker, through a consumer (``offsets_for_times`` with
        Kafka's "earliest" and "latest" timestamps), which costs a fraction of the admin
        client's future per partition: begin and end offsets through the read_committed one
        (the end is then the last stable offset), high watermarks through a read_uncommitted
        one that never reads a record."""
        from confluent_kafka import KafkaException, TopicPartition

        wanted = list(dict.fromkeys(partitions))
        for topic, partition in wanted:
            self._check_partition(topic, partition)
        if not wanted:
            return {}
        stamp = _EARLIEST if which == "begin" else _LATEST
        consumer = self._watermark_consumer() if which == "high" else self._consumer()
        try:
            found = consumer.offsets_for_times(
                [TopicPartition(t, p, stamp) for t, p in wanted], timeout=self.timeout_s
            )
        except Exception as e:
            raise translate(
                e, f"reading the {which} offsets of {len(wanted)} partition(s)"
            ) from None
        offsets = {}
        for tp in found:
            if tp.error is not None:
                raise self._read_error(
                    KafkaException(tp.error), tp.topic, tp.partition, "reading the offsets of"
                )
            offsets[(tp.topic, tp.partition)] = int(tp.offset)
        return offsets

    def offsets_for_times(
        self, times: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], int | None]:
        """For each partition, the first offset (below the last stable offset) whose record's
        timestamp is at or past the given one, or None if there is none: Kafka's time index,
        every partition in one request per broker (``engine.ranges`` cuts batches with it)."""
        from confluent_kafka import KafkaException, TopicPartition

        wanted = dict(times)
        for topic, partition in wanted:
            self._check_partition(topic, partition)
        if not wanted:
            return {}
        try:
            found = self._consumer().offsets_for_times(
                [TopicPartition(t, p, int(ts)) for (t, p), ts in wanted.items()],
                timeout=self.timeout_s,
            )
        except Exception as e:
            raise translate(
                e, f"looking up offsets by time in {len(wanted)} partition(s)"
            ) from None
        offsets: dict[tuple[str, int], int | None] = {}
        for tp in found:
            if tp.error is not None:
                raise self._read_error(
                    KafkaException(tp.error),
                    tp.topic,
                    tp.partition,
                    "looking up offsets by time in",
                )
            offsets[(tp.topic, tp.partition)] = int(tp.offset) if tp.offset >= 0 else None
        return offsets

    def high_watermark(self, topic: str, partition: int) -> int:
        """The offset after the last record written, committed or not; ``end_offset`` (the last
        stable offset) stays below it while a transaction is open on the partition."""
        self._check_partition(topic, partition)
        return self._admin().high_watermark(topic, partition)

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """Low watermark and last stable offset (the read_committed high watermark)."""
        from confluent_kafka import TopicPartition

        self._check_partition(topic, partition)
        consumer = self._consumer()
        try:
            with self._read_lock:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=self.timeout_s, cached=False
                )
        except Exception as e:
            raise self._read_error(e, topic, partition, "reading the offsets of") from None
        return int(low), int(high)

    # -- reading -----------------------------------------------------------------------------

    def read(
        self,
        topic: str,
        partition: int,
        start: int = 0,
        end: int | None = None,
        max_records: int | None = None,
    ) -> Iterator[LogRecord]:
        start, stop = self._plan(topic, partition, start, end, max_records)
        return self._iter(topic, partition, start, stop, max_records)

    def _iter(
        self, topic: str, partition: int, start: int, stop: int, limit: int | None
    ) -> Iterator[LogRecord]:
        for table in self._chunks(topic, partition, start, stop, limit):
            offsets = table.column("offset").to_pylist()
            for record, offset in zip(iter_records(table, 0), offsets):
                yield LogRecord(record.key, record.value, record.timestamp, record.headers, offset)

    def read_table(
        self,
        topic: str,
        partition: int,
        start: int = 0,
        end: int | None = None,
        max_records: int | None = None,
    ) -> pa.Table:
        start, stop = self._plan(topic, partition, start, end, max_records)
        tables = list(self._chunks(topic, partition, start, stop, max_records))
        return pa.concat_tables(tables) if tables else to_table([])

    def _chunks(
        self, topic: str, partition: int, start: int, stop: int, limit: int | None
    ) -> Iterator[pa.Table]:
        """The range in tables of at most ``_CHUNK`` records; the consumer is held only while
        one chunk is fetched, so interleaved readers each seek to their own position."""
        position, left = start, limit
        self._consumer()
        while position < stop and (left is None or left > 0):
            want = _CHUNK if left is None else min(_CHUNK, left)
            try:
                with self._read_lock:
                    messages, position = self._reader.fetch(
                        topic, partition, position, stop, want, self.timeout_s
                    )
            except LogError:
                raise
            except Exception as e:
                raise self._read_error(e, topic, partition, "reading") from None
            if messages:
                left = None if left is None else left - len(messages)
                yield to_table(messages)

    def _plan(
        self, topic: str, partition: int, start: int, end: int | None, max_records: int | None
    ) -> tuple[int, int]:
        """Check the range against the partition's offsets when called; the effective stop."""
        start = _offset(start, "start")
        end = None if end is None else _offset(end, "end")
        if max_records is not None and (
            isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 0
        ):
            raise LogError(f"max_records must be a non-negative int, got {max_records!r}")
        low, high = self._watermarks(topic, partition)
        stop = high if end is None else end
        where = f"{topic}/{partition}"
        if start < low:
            raise OffsetOutOfRangeError(
                f"offset {start} of {where} was truncated; the first readable offset is {low}"
            )
        if max(start, stop) > high:
            raise OffsetOutOfRangeError(
                f"offsets [{start}, {stop}) of {where} reach beyond its end offset {high}"
            )
        if stop < start:
            raise LogError(f"end offset {stop} is before start offset {start}")
        if max_records == 0:
            stop = start
        return start, stop

    def records_at(self, positions: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], Found]:
        """The record at each ``(topic, partition) -> offset``, read for all partitions at
        once (``kafka_probe``): ``(timestamp, key, value)`` where one was found exactly
        there; partitions left out have no answer (read them with ``read``)."""
        self._check_open()
        with self._probe_lock:
            if self._probe is None:
                self._probe = RecordProbe(self._bootstrap, self._client_options, READER_GROUP_ID)
            return self._probe.records_at(positions)

    # -- writing -----------------------------------------------------------------------------

    def append(self, topic: str, partition: int, records: Records) -> int:
        """Produce ``records`` to the partition and wait until all are acknowledged; returns
        the first one's offset. Records of concurrent appends to one partition may interleave.
        Invalid records are refused before anything is sent."""
        self._check_open()
        table = to_segment_table(records)
        self._check_partition(topic, partition, verify=True)
        if table.num_rows == 0:
            return self.end_offset(topic, partition)
        rows = list(iter_records(table, 0))
        if any(r.timestamp < 1 for r in rows):
            bad = next(r.timestamp for r in rows if r.timestamp < 1)
            raise LogError(
                f"the Kafka log stores timestamps from 1 ms on, got {bad}: Kafka has no negative "
                "timestamps, and its client sends 0 as 'now'"
            )
        send = (topic, partition, rows, self.timeout_s, self._producer_fatal)
        delivery = produce_all(self._producer(), *send)
        if delivery.fatal is not None:
            self._drop_producer()
            if delivery.untouched_by_sequence_error():  # e.g. the topic was re-created
                delivery = produce_all(self._producer(), *send)
        if len(delivery.offsets) < len(rows):
            if delivery.fatal is not None:
                self._drop_producer()
            cause = (delivery.errors or [delivery.fatal])[0]
            error = LogError
            if cause is None:
                cause, error = (
                    f"no acknowledgement within {self.timeout_s:g} s",
                    LogUnavailableError,
                )
            raise error(
                f"appending to {topic}/{partition} in {self.url}: {len(delivery.offsets)} of "
                f"{len(rows)} record(s) acknowledged, the others failed: {cause}"
            )
        return min(delivery.offsets)

    def write_segment(
        self, topic: str, partition: int, records: Records, *, writer_id: str
    ) -> SegmentRef:
        raise self._no_sealing("write_segment")

    def seal(self, topic: str, partition: int, segment: SegmentRef, *, seal_id: str) -> int:
        raise self._no_sealing("seal")

    def read_segment(self, segment: SegmentRef) -> pa.Table:
        raise self._no_sealing("read_segment")

    def list_unsealed(self, topic: str, partition: int) -> list[SegmentRef]:
        raise self._no_sealing("list_unsealed")

    def abort_unsealed(self, topic: str, partition: int, segment: SegmentRef) -> None:
        raise self._no_sealing("abort_unsealed")

    def abort_unsealed_by_prefix(
        self, writer_prefix: str, *, topics: Iterable[str] | None = None
    ) -> int:
        raise self._no_sealing("abort_unsealed_by_prefix")

    def _no_sealing(self, operation: str) -> UnsupportedOperationError:
        return UnsupportedOperationError(
            f"{operation} is part of the file log's segment commit protocol; the Kafka log "
            "has no unsealed segments (Kafka commits through transactions)"
        )

    def truncate_before(self, topic: str, partition: int, offset: int) -> int:
        """Purge the records below ``offset`` with Kafka's ``delete_records``; returns the new
        begin offset. Compacted topics refuse it (Kafka's own rule)."""
        offset = _offset(offset, "offset")
        self._check_open()
        self._check_partition(topic, partition, verify=True)
        low, high = self._watermarks(topic, partition)
        if offset > high:
            raise OffsetOutOfRangeError(
                f"cannot truncate {topic}/{partition} before {offset}: its end offset is {high}"
            )
        if offset <= low:
            return low
        return self._admin().delete_records(topic, partition, offset)

    def truncate_before_many(
        self, offsets: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """``truncate_before`` of many partitions, in three requests per broker whatever
        their number; returns each partition's new begin offset."""
        self._check_open()
        wanted = {key: _offset(offset, "offset") for key, offset in offsets.items()}
        if wanted:  # writes re-read the metadata first (see the module docstring): once
            self._metadata()
        for topic, partition in wanted:
            self._check_partition(topic, partition)
        begins = self._list_offsets(wanted, "begin")
        ends = self._list_offsets(wanted, "end")
        for (topic, partition), offset in wanted.items():
            if offset > ends[(topic, partition)]:
                raise OffsetOutOfRangeError(
                    f"cannot truncate {topic}/{partition} before {offset}: its end offset is "
                    f"{ends[(topic, partition)]}"
                )
        due = {key: offset for key, offset in wanted.items() if offset > begins[key]}
        return {**begins, **self._admin().delete_records_many(due)}

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            producer, consumer = self._producer_client, self._consumer_client
            watermarks, self._watermarks_client = self._watermarks_client, None
            self._producer_client = self._consumer_client = self._admin_client = None
        if watermarks is not None:
            watermarks.close()
        if producer is not None:
            producer.flush(self.timeout_s)
        if consumer is not None:
            with self._read_lock:
                consumer.close()
        with self._probe_lock:
            if self._probe is not None:
                self._probe.close()
                self._probe = None

    # -- internals ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"the log at {self.url} is closed")

    def _admin(self) -> KafkaAdmin:
        with self._lock:
            self._check_open()
            if self._admin_client is None:
                from confluent_kafka.admin import AdminClient

                config = client_config(self._bootstrap, self._client_options)
                client = new_client(AdminClient, config, f"connecting to {self.url}")
                admin = KafkaAdmin(client, self.url, self.timeout_s)
                # every first call asks for metadata through here: an unreachable cluster
                # fails now, within the connect timeout, not after each call's own timeout
                self._counts = admin.reach(self._bootstrap, self.connect_timeout_s)
                self._admin_client = admin
            return self._admin_client

    def _producer(self) -> Any:
        with self._lock:
            self._check_open()
            if self._producer_client is None:
                from confluent_kafka import Producer

                config = client_config(self._bootstrap, self._client_options, REQUIRED_PRODUCER)
                config["error_cb"] = self._on_producer_error
                self._fatal_error = None
                self._producer_client = new_client(Producer, config, f"producing to {self.url}")
            return self._producer_client

    def _on_producer_error(self, error: Any) -> None:
        if error.fatal():
            self._fatal_error = error
        log_client_error(error)

    def _producer_fatal(self) -> Any:
        return self._fatal_error

    def _drop_producer(self) -> None:
        """Forget a producer that hit a fatal error (it cannot send again)."""
        with self._lock:
            self._producer_client = None

    def _consumer(self) -> Any:
        with self._lock:
            self._check_open()
            if self._consumer_client is None:
                from confluent_kafka import Consumer

                options = {"group.id": READER_GROUP_ID, **self._client_options}
                config = client_config(self._bootstrap, options, REQUIRED_CONSUMER, READER_DEFAULTS)
                self._consumer_client = new_client(Consumer, config, f"reading {self.url}")
                self._reader = PartitionReader(self._consumer_client)
            return self._consumer_client

    def _watermark_consumer(self) -> Any:
        """A read_uncommitted consumer that only lists offsets (its "latest" is the high
        watermark); it never reads records, so it never shows uncommitted ones."""
        with self._lock:
            self._check_open()
            if self._watermarks_client is None:
                from confluent_kafka import Consumer

                options = {
                    "group.id": READER_GROUP_ID,
                    **self._client_options,
                    "isolation.level": "read_uncommitted",
                }
                required = {**REQUIRED_CONSUMER, "isolation.level": "read_uncommitted"}
                config = client_config(self._bootstrap, options, required)
                self._watermarks_client = new_client(Consumer, config, f"listing {self.url}")
            return self._watermarks_client

    def _metadata(self) -> dict[str, int]:
        """Partition counts of all topics, fresh from the cluster (and cached)."""
        counts = self._admin().partition_counts()
        with self._lock:
            self._counts = dict(counts)
        return counts

    def _count(self, topic: str, *, verify: bool = False) -> int:
        count = None if verify else self._counts.get(topic)
        if count is None:
            count = self._metadata().get(topic)
        if count is None:
            raise UnknownTopicError(f"topic {topic!r} does not exist in {self.url}")
        return count

    def _check_partition(self, topic: str, partition: int, *, verify: bool = False) -> None:
        self._check_open()
        count = self._count(topic, verify=verify)
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise UnknownPartitionError(f"partition must be an int, got {partition!r}")
        if not 0 <= partition < count:
            raise UnknownPartitionError(
                f"topic {topic!r} has partitions 0..{count - 1}; there is no partition {partition}"
            )

    def _read_error(self, exc: Exception, topic: str, partition: int, what: str) -> LogError:
        """A read failure; an unknown topic or partition is re-checked against fresh metadata
        (the topic may have been deleted since it was cached)."""
        error = translate(exc, f"{what} {topic}/{partition} in {self.url}")
        if isinstance(error, (UnknownTopicError, UnknownPartitionError)):
            self._check_partition(topic, partition, verify=True)
        return error


def _offset(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise LogError(f"{what} must be an int offset, got {value!r}")
    if value < 0:
        raise OffsetOutOfRangeError(f"{what} offset must not be negative, got {value}")
    return value
