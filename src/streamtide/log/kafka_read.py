"""Reading an offset range of one Kafka partition: assign, seek, consume, stop at the range end.

Offsets in Kafka need not be dense: transaction markers take an offset each, aborted records
are skipped by a read_committed consumer, and compaction removes records. So a range read
stops at the first record at or past the range end, at the end-of-partition event, or when
the consumer's position has passed the range end, whichever comes first; it never waits for
an offset that will not come. (An end-of-partition event below the range end is an old one,
left queued by an earlier read: the range end was checked against the end offset.)

A read_committed read that starts past an aborted transaction's abort marker can come back
without the committed records that the same producer (the same ``transactional.id``) wrote
after it: the test broker can list that aborted transaction in the fetch response, and the
client then skips the producer's records until an abort marker it never sees (Apache Kafka
lists only aborted transactions that end at or after the fetch offset). A read from the
partition's beginning passes the markers and is complete. So a range of several offsets that
comes back without any record is read again from the partition's beginning; the records
before the range are passed over.

Records are turned into the Arrow layout of ``Log.read_table`` (``segments.READ_SCHEMA``)
column by column, without a ``LogRecord`` per record.
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from streamtide.log.errors import LogUnavailableError
from streamtide.log.kafka_client import translate
from streamtide.log.segments import READ_SCHEMA, headers_array

#: Messages asked of the client per consume() call.
CONSUME_BATCH = 10_000
_POLL_S = 0.05


class PartitionReader:
    """Reads ranges through one consumer, which it owns (callers serialise calls).

    Between calls the consumer stays assigned, so a read that continues where the previous one
    stopped (the next chunk of the same range) keeps the records the client has already
    fetched; any other read assigns and seeks anew.
    """

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self._cursor: tuple[str, int, int] | None = None  # what the next message follows

    def fetch(
        self, topic: str, partition: int, start: int, stop: int, limit: int, timeout_s: float
    ) -> tuple[list[Any], int]:
        """Up to ``limit`` records with offsets in ``[start, stop)`` and the offset to continue
        from (``stop`` once the range is exhausted)."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        if start >= stop or limit <= 0:
            return [], start if limit <= 0 else stop
        if self._cursor != (topic, partition, start):
            self._cursor = None
            self.consumer.assign([TopicPartition(topic, partition, start)])
        try:
            messages, position = self._consume(topic, partition, start, stop, limit, timeout_s)
            if not messages and stop - start > 1:
                # Nothing committed in a range of several offsets: only aborted records and
                # markers, or records a broker hid (see the module docstring); read it again
                # from the partition's beginning, past every abort marker before it
                self._cursor = None
                self.consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
                messages, position = self._consume(
                    topic, partition, start, stop, limit, timeout_s, from_beginning=True
                )
            return messages, position
        except BaseException:
            self._cursor = None
            raise

    def _consume(
        self,
        topic: str,
        partition: int,
        start: int,
        stop: int,
        limit: int,
        timeout_s: float,
        from_beginning: bool = False,
    ) -> tuple[list[Any], int]:
        """``fetch`` from where the consumer is assigned; ``from_beginning``: it is assigned at
        the partition's beginning, and records before ``start`` are passed over."""
        from confluent_kafka import TopicPartition

        where = f"reading {topic}/{partition} from offset {start}"
        messages: list[Any] = []
        position = start
        deadline = time.monotonic() + timeout_s
        while len(messages) < limit and position < stop:
            # consume() returns early only with as many messages as asked for; a dense range
            # has exactly stop - position of them.
            want = min(limit - len(messages), CONSUME_BATCH)
            if not from_beginning:
                want = min(want, stop - position)
            batch = self.consumer.consume(want, _POLL_S)
            if not batch:
                if time.monotonic() > deadline:
                    raise LogUnavailableError(
                        f"{where}: no answer from Kafka within {timeout_s:g} s (position "
                        f"{position}, range end {stop})"
                    )
                continue
            deadline = time.monotonic() + timeout_s
            last = batch[-1]
            # An end-of-partition event carries the position; a record is followed by offset+1.
            after = last.offset() if last.error() is not None else last.offset() + 1
            self._cursor = (topic, partition, after)
            if from_beginning or any([m.error() is not None for m in batch]):
                done, position = self._take_one_by_one(batch, messages, start, stop, limit, where)
                if done:
                    return messages, position
            else:  # records only, in offset order, from ``start`` on: cut at the range end
                taken = batch if last.offset() < stop else batch[: _first_at(batch, stop)]
                taken = taken[: limit - len(messages)]
                if taken:
                    messages.extend(taken)
                    position = taken[-1].offset() + 1
                if len(taken) < len(batch) or len(messages) == limit:
                    return messages, position if len(messages) == limit else stop
            (current,) = self.consumer.position([TopicPartition(topic, partition)])
            if current.offset >= stop:  # passed markers or aborted records up to the end
                return messages, stop
        return messages, max(position, start)

    @staticmethod
    def _take_one_by_one(
        batch: list[Any], messages: list[Any], start: int, stop: int, limit: int, where: str
    ) -> tuple[bool, int]:
        """Add ``batch``'s records in ``[start, stop)`` to ``messages`` one by one, passing
        over end-of-partition events of earlier reads; ``(done, position)``: done when the
        range or ``limit`` is reached (position: where to continue)."""
        from confluent_kafka import KafkaError

        position = start
        for message in batch:
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise translate(_KafkaErrorWrapper(error), where)
                end = message.offset()
                if end is not None and 0 <= end < stop:
                    continue  # an earlier read's end, queued before records were added
                return True, stop  # nothing readable before the range end
            offset = message.offset()
            if offset >= stop:
                return True, stop
            if offset < start:  # read from the beginning: not in the range yet
                continue
            messages.append(message)
            position = offset + 1
            if len(messages) == limit:
                return True, position
        return False, max(position, messages[-1].offset() + 1 if messages else start)


def _first_at(batch: list[Any], offset: int) -> int:
    """The index of the first record of ``batch`` (records in offset order) at or past
    ``offset``."""
    low, high = 0, len(batch)
    while low < high:
        middle = (low + high) // 2
        if batch[middle].offset() < offset:
            low = middle + 1
        else:
            high = middle
    return low


class _KafkaErrorWrapper(Exception):
    """A KafkaError as an exception, so ``translate`` classifies it like a raised one."""


def to_table(messages: list[Any]) -> pa.Table:
    """Consumed messages as a table with ``READ_SCHEMA`` (offset, key, value, timestamp,
    headers)."""
    if not messages:
        return READ_SCHEMA.empty_table()
    headers = [m.headers() for m in messages]
    columns = [
        pa.array([m.offset() for m in messages], pa.int64()),
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.array([m.timestamp()[1] for m in messages], pa.int64()),
        headers_array([tuple(h) if h else () for h in headers] if any(headers) else headers),
    ]
    return pa.Table.from_arrays(columns, schema=READ_SCHEMA)
