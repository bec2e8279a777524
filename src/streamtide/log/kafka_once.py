"""Appending records to a Kafka topic at most once per *write id*, in one transaction.

One call of ``append_once`` is one attempt of a write (for example a Spark task of
``write_topic``). Its producer's ``transactional.id`` is ``streamtide-write-<write id>``, the
same for every attempt of the write, so ``init_transactions`` fences the attempts before it:
Kafka aborts a transaction an earlier attempt left open and refuses that attempt's later sends
and its commit. In the same transaction as its records, the attempt writes a *marker* (key: the
write id, value: the record count) to the topic ``_streamtide-writes``. Before it begins, it
reads that topic at read_committed from the offsets taken when the write began
(``marker_offsets``); if its marker is there, an earlier attempt committed (and its report was
lost), so this one writes nothing and returns the marker's count. After committing it reads its
marker back, because a broker restart can abort a transaction whose commit the client then
reports as successful.

Every call that waits for the cluster has an outer deadline, also the calls a client may block
in past its own timeout. ``fence`` initialises the transactional ids of a write: call it when a
write fails, because some brokers never time out a transaction whose attempt died, and
read_committed readers of its partitions would wait for it for good.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from streamtide.log.api import LogRecord
from streamtide.log.errors import (
    LogError,
    LogUnavailableError,
    ProducerFencedError,
    TopicExistsError,
    UnknownPartitionError,
)
from streamtide.log.kafka_client import (
    REQUIRED_PRODUCER,
    client_config,
    error_name,
    log_client_error,
    split_options,
    translate,
)
from streamtide.log.kafka_log import KafkaLog
from streamtide.log.partitioner import partition_for_key

#: The markers of committed writes. Markers matter only while their write runs, so the topic
#: keeps them for 7 days (compacted: a write id has one marker).
WRITES_TOPIC = "_streamtide-writes"
WRITES_CONFIGS = {"cleanup.policy": "compact,delete", "retention.ms": str(7 * 24 * 3600 * 1000)}
TRANSACTIONAL_PREFIX = "streamtide-write-"
#: How long the broker lets a transaction stay open (brokers that honour it abort it then).
TRANSACTION_TIMEOUT_MS = 120_000
_FENCED = frozenset({"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})
#: Added to the log's timeout for the outer deadline of a call with its own timeout.
_GRACE_S = 5.0
_POLL_S = 0.02

T = TypeVar("T")


def transactional_id(write_id: str) -> str:
    """The ``transactional.id`` every attempt of ``write_id`` produces with."""
    return TRANSACTIONAL_PREFIX + write_id


def marker_offsets(log: KafkaLog) -> dict[int, int]:
    """Create the marker topic if it is missing; the end offset of each of its partitions. Take
    them before a write begins: its markers will be found from there."""
    if not log.has_topic(WRITES_TOPIC):
        try:
            log.create_topic(WRITES_TOPIC, 1, configs=WRITES_CONFIGS)
        except TopicExistsError:
            pass  # created concurrently
    return {p: log.end_offset(WRITES_TOPIC, p) for p in range(log.partitions(WRITES_TOPIC))}


def append_once(
    log: KafkaLog,
    topic: str,
    records: Iterable[tuple[int, LogRecord]],
    *,
    write_id: str,
    since: Mapping[int, int],
) -> int:
    """Append ``records`` (``(partition, record)`` pairs, consumed in order) to ``topic`` in
    one transaction, unless an attempt of ``write_id`` already committed; return the number of
    records the write appended, by this attempt or by the earlier one. ``since`` is what
    ``marker_offsets`` returned before the write began."""
    partitions = log.describe_topic(topic).partitions  # fresh metadata: a missing topic fails
    key = write_id.encode()
    marker_partition = partition_for_key(key, len(since))
    with _Transaction(log, write_id, topic) as txn:  # fences the earlier attempts
        done = _committed_count(log, key, marker_partition, since[marker_partition])
        if done is not None:
            return done
        txn.begin()
        count = 0
        for partition, record in records:
            if not 0 <= partition < partitions:
                raise UnknownPartitionError(
                    f"topic {topic!r} has partitions 0..{partitions - 1}; there is no "
                    f"partition {partition}"
                )
            txn.send(topic, partition, record)
            count += 1
        value = json.dumps({"topic": topic, "records": count}).encode()
        marker = LogRecord(key, value, time.time_ns() // 1_000_000)
        offset = txn.commit_with(WRITES_TOPIC, marker_partition, marker)
    _confirm(log, key, marker_partition, offset, write_id)
    return count


def fence(log: KafkaLog, topic: str, write_ids: Iterable[str]) -> None:
    """Initialise the transactional id of each write to ``topic``: aborts what its attempts
    left open and fences any attempt still running."""
    for write_id in write_ids:
        with _Transaction(log, write_id, topic):
            pass


class _Transaction:
    """One attempt's transactional producer; every call that waits has an outer deadline.
    Created initialised (fencing earlier attempts); leaving the block aborts a transaction that
    was not committed and abandons the producer."""

    def __init__(self, log: KafkaLog, write_id: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.where = f"write {write_id!r} to topic {topic!r}"
        self.timeout_s = log.timeout_s
        client, _ = split_options(log.options)
        required = {**REQUIRED_PRODUCER, "transactional.id": transactional_id(write_id)}
        config = client_config(log.bootstrap, client, required)
        config.setdefault("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
        config["error_cb"] = self._on_error
        self._fatal: Any = None
        self._failures: list[tuple[str, int, Any]] = []
        self._last_offset = -1
        self._open = False
        self.producer = Producer(config)
        init = self.producer.init_transactions
        self._call(lambda: init(self.timeout_s), "initialising the transactions of")

    def __enter__(self) -> _Transaction:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._open:
            self._open = False
            try:
                self._call(lambda: self.producer.abort_transaction(self.timeout_s), "aborting")
            except LogError:
                pass  # fenced or unreachable: the next attempt or fence() aborts it
        self.producer.purge(in_queue=True, in_flight=True, blocking=False)

    def begin(self) -> None:
        self.producer.begin_transaction()
        self._open = True

    def send(self, topic: str, partition: int, record: LogRecord) -> None:
        """Queue one record of the transaction; fails early once a send has failed."""
        from confluent_kafka import KafkaException

        if record.timestamp < 1:
            raise LogError(
                f"the Kafka log stores timestamps from 1 ms on, got {record.timestamp} for "
                f"{topic}/{partition}"
            )
        while True:
            try:
                self.producer.produce(
                    topic,
                    value=record.value,
                    key=record.key,
                    partition=partition,
                    timestamp=record.timestamp,
                    headers=list(record.headers) or None,
                    on_delivery=self._delivered,
                )
                break
            except BufferError:  # the client's queue is full: let it send
                self.producer.poll(_POLL_S)
            except KafkaException as e:
                raise self._error(e, f"writing to {topic}/{partition} in") from None
        if self._fatal is not None or self._failures:
            self._raise_failure()

    def commit_with(self, topic: str, partition: int, marker: LogRecord) -> int:
        """Flush the records, send ``marker`` last (so its partition is in the transaction only
        briefly) and commit; the marker's offset."""
        self.flush()
        self.send(topic, partition, marker)
        self.flush()
        commit = self.producer.commit_transaction
        self._call(lambda: commit(self.timeout_s), "committing")
        self._open = False
        return self._last_offset

    def flush(self) -> None:
        """Wait until every queued record is acknowledged; fail on a failed send."""
        flush = self.producer.flush
        left = self._call(lambda: flush(self.timeout_s), "flushing")
        if self._fatal is not None or self._failures:
            self._raise_failure()
        if left:
            raise LogUnavailableError(
                f"{self.where}: {left} record(s) unacknowledged after {self.timeout_s:g} s"
            )

    def _call(self, call: Callable[[], T], what: str) -> T:
        from confluent_kafka import KafkaException

        try:
            return _bounded(call, self.timeout_s + _GRACE_S, f"{what} {self.where}")
        except (KafkaException, SystemError) as e:
            # SystemError: the client may fail a call on a fatal error without attaching it.
            raise self._error(e, what) from None

    def _error(self, exc: BaseException, what: str) -> LogError:
        cause = _kafka_error(exc)
        if _name(cause) in _FENCED or _name(self._fatal) in _FENCED:
            return ProducerFencedError(f"{what} {self.where}: a newer attempt fenced this one")
        if cause is None and self._fatal is not None:
            return LogError(f"{what} {self.where}: {self._fatal}")
        return translate(exc, f"{what} {self.where}")

    def _raise_failure(self) -> None:
        if self._failures:
            topic, partition, error = self._failures[0]
        else:
            topic, partition, error = "", -1, self._fatal
        where = f"writing to {topic}/{partition} in" if topic else "writing in"
        if _name(error) in _FENCED or _name(self._fatal) in _FENCED:
            raise ProducerFencedError(f"{where} {self.where}: a newer attempt fenced this one")
        raise LogError(f"{where} {self.where}: {error}")

    def _delivered(self, error: Any, message: Any) -> None:
        try:
            if error is not None:
                self._failures.append((message.topic(), message.partition(), error))
            else:
                self._last_offset = message.offset()
        except SystemError as e:  # the client calls back with its fatal error still pending
            self._fatal = self._fatal or _kafka_error(e) or error

    def _on_error(self, error: Any) -> None:
        if error.fatal():
            self._fatal = error
        log_client_error(error)


def _committed_count(log: KafkaLog, key: bytes, partition: int, since: int) -> int | None:
    """The record count in the committed marker of ``key``, or None if there is none. Waits
    until no transaction is open on the marker partition (other attempts hold it only while
    they commit), so that every marker written before this call is decided."""
    high = log.high_watermark(WRITES_TOPIC, partition)
    while not _await_stable(log, partition, high):  # aborted records vanished meanwhile
        high = log.high_watermark(WRITES_TOPIC, partition)
    start = max(since, log.begin_offset(WRITES_TOPIC, partition))
    if start >= high:
        return None
    for record in log.read(WRITES_TOPIC, partition, start, high):
        if record.key == key and record.value is not None:
            return int(json.loads(record.value)["records"])
    return None


def _confirm(log: KafkaLog, key: bytes, partition: int, offset: int, write_id: str) -> None:
    """Check that the marker at ``offset`` was committed (a broker may have aborted it)."""
    if _await_stable(log, partition, offset + 1):
        found = log.read(WRITES_TOPIC, partition, offset, offset + 1)
        if any(r.offset == offset and r.key == key for r in found):
            return
    raise LogError(
        f"the commit of write {write_id!r} was reported, but its marker at {WRITES_TOPIC}/"
        f"{partition} offset {offset} is not committed: the broker aborted the transaction"
    )


def _await_stable(log: KafkaLog, partition: int, offset: int) -> bool:
    """Wait until a read_committed reader sees the marker partition up to ``offset``; False if
    the partition ends below it (its records vanished: their transaction was aborted)."""
    deadline = time.monotonic() + log.timeout_s
    while log.end_offset(WRITES_TOPIC, partition) < offset:
        if log.high_watermark(WRITES_TOPIC, partition) < offset:
            return False
        if time.monotonic() > deadline:
            raise LogUnavailableError(
                f"a transaction stays open on {WRITES_TOPIC}/{partition} below offset {offset} "
                f"for more than {log.timeout_s:g} s; a write attempt died in its commit and "
                "nothing aborted it"
            )
        time.sleep(_POLL_S)
    return True


def _bounded(call: Callable[[], T], timeout_s: float, what: str) -> T:
    """``call()`` with an outer deadline: some client calls can block past their own timeout."""
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as e:  # handed to the caller
            outcome.append((False, e))

    thread = threading.Thread(target=run, name="streamtide-transaction-call", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not outcome:
        raise LogUnavailableError(f"{what}: no answer from Kafka within {timeout_s:g} s")
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


def _kafka_error(exc: BaseException | None) -> Any:
    """The KafkaError an exception carries, also as the cause of the ``SystemError`` the client
    raises when it calls back with an error pending; None if there is none."""
    for _ in range(8):
        if exc is None:
            return None
        if error_name(exc):
            return exc.args[0]
        exc = exc.__cause__ or exc.__context__
    return None


def _name(error: Any) -> str:
    name = getattr(error, "name", None)
    return name() if callable(name) else ""
