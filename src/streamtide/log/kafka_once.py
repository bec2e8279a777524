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
import time
from collections.abc import Iterable, Mapping

from streamtide.log.api import LogRecord
from streamtide.log.errors import (
    LogError,
    LogUnavailableError,
    TopicExistsError,
    UnknownPartitionError,
)
from streamtide.log.kafka_log import KafkaLog
from streamtide.log.kafka_transaction import POLL_S, KafkaTransaction
from streamtide.log.partitioner import partition_for_key

#: The markers of committed writes. Markers matter only while their write runs, so the topic
#: keeps them for 7 days (compacted: a write id has one marker).
WRITES_TOPIC = "_streamtide-writes"
WRITES_CONFIGS = {"cleanup.policy": "compact,delete", "retention.ms": str(7 * 24 * 3600 * 1000)}
TRANSACTIONAL_PREFIX = "streamtide-write-"


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
    with _transaction(log, write_id, topic) as txn:  # fences the earlier attempts
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
        with _transaction(log, write_id, topic):
            pass


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
        time.sleep(POLL_S)
    return True


def _transaction(log: KafkaLog, write_id: str, topic: str) -> KafkaTransaction:
    """An initialised transactional producer for one attempt of ``write_id``."""
    return KafkaTransaction(
        log, transactional_id(write_id), f"write {write_id!r} to topic {topic!r}"
    )
