"""Sink operators: a batch serialized, partitioned and sent to its topic, a column at a time.

The same sink serves ``to(...)`` and repartitions; ``TopicChoosingSink`` serves ``to`` with a
``TopicNameExtractor``: it names each row's topic, then hands each topic's rows, in batch
order, to a sink of that topic. A row whose topic does not exist fails with an error naming
the record and the topic (the task stops unless the handler continues; nothing is lost: the
input is not committed).

The sink for one topic (``log.encoder.TopicEncoder`` does the
serializing and partitioning, as for ``write_topic``). Each partition's rows go to the
collector in one call, in batch order, so every partition receives its records in the order
record-at-a-time processing would have sent them. A row whose serde or partitioner fails is
reported to the task (``ColumnOperator.fail``) and not sent; the other rows are.
"""

from __future__ import annotations

from itertools import groupby
from operator import itemgetter
from typing import Any

from streamtide.errors import SerdeError, StreamsProcessingError, UnknownTopicError
from streamtide.log.encoder import PartitionOutOfRangeError, TopicEncoder
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.nodes import SinkNodeDef
from streamtide.processor.operator import ColumnOperator, call_rows
from streamtide.processor.topic_name import RecordContext
from streamtide.runtime.collector import ColumnCollector, RecordCollector
from streamtide.serde import Serde


class SinkOperator(ColumnOperator):
    """Writes its batches to one topic through the task's collector."""

    def __init__(
        self,
        definition: SinkNodeDef,
        topic: str,
        key_serde: Serde[Any],
        value_serde: Serde[Any],
        collector: RecordCollector,
        uses_default_serdes: bool = False,
    ) -> None:
        self.topic = topic
        self.collector = collector
        self.uses_default_serdes = uses_default_serdes
        self.encoder = TopicEncoder(key_serde, value_serde, definition.partitioner)
        self._num_partitions: int | None = None

    def process_batch(self, batch: ColumnBatch) -> None:
        n = self._num_partitions
        if n is None:
            n = self._num_partitions = self.collector.partitions_for(self.topic)
        encoded = self.encoder.encode(batch.keys, batch.values, n)
        positions: list[int] | range = range(len(batch.rows))
        if encoded.errors:
            positions = self._report(batch, encoded.errors, encoded.serde_failed)
        self._send(batch, encoded.keys, encoded.values, encoded.partitions, positions)

    def _report(
        self, batch: ColumnBatch, errors: dict[int, Exception], serde_failed: set[int]
    ) -> list[int]:
        """Report the failed rows; the positions still to send (a failed row's later rows of
        the same input row are not: record at a time, its first failure ends the record)."""
        skipped: set[int] = set()
        resume = 0
        for position in sorted(errors):
            if position < resume:
                continue
            error = self._located(errors[position], position in serde_failed)
            resume = self.fail(batch, position, error)
            skipped.update(range(position, resume))
        return [p for p in range(len(batch.rows)) if p not in skipped]

    def _located(self, error: Exception, in_serde: bool) -> Exception:
        if in_serde and isinstance(error, SerdeError):
            hint = (
                "; this sink uses the default serdes: give serdes with Produced, Grouped or "
                "Repartitioned, or set StreamsConfig.default_key_serde/default_value_serde"
                if self.uses_default_serdes
                else ""
            )
            return StreamsProcessingError(
                f"sink {self.name!r} cannot serialize a record for topic {self.topic!r}: "
                f"{error}{hint}",
                node=self.name,
                topic=self.topic,
            )
        if isinstance(error, PartitionOutOfRangeError):
            return StreamsProcessingError(
                f"sink {self.name!r}: partitioner returned partition {error.partition}, "
                f"but topic {self.topic!r} has {error.partitions}",
                node=self.name,
                topic=self.topic,
            )
        return error

    def _send(
        self,
        batch: ColumnBatch,
        keys: list[bytes | None],
        values: list[bytes | None],
        partitions: list[int],
        positions: list[int] | range,
    ) -> None:
        """Each partition's rows in one call, in batch order."""
        timestamps, headers = batch.timestamps, batch.headers
        collector = self.collector
        send_many = collector.send_many if isinstance(collector, ColumnCollector) else None
        whole = len(positions) == len(keys)
        ordered = sorted(positions, key=partitions.__getitem__)  # stable: batch order kept
        for partition, group in groupby(ordered, key=partitions.__getitem__):
            rows: Any = list(group)
            if send_many is not None:
                if whole and len(rows) == len(keys):
                    send_many(self.topic, partition, keys, values, timestamps, headers)
                    continue
                # each column's rows picked in one C call (a tuple; for one row, a slice:
                # itemgetter of one index gives the item itself)
                first = rows[0]
                pick: Any = (
                    itemgetter(*rows) if len(rows) > 1 else itemgetter(slice(first, first + 1))
                )
                send_many(
                    self.topic,
                    partition,
                    pick(keys),
                    pick(values),
                    pick(timestamps),
                    pick(headers),
                )
                continue
            send = self.collector.send
            for i in rows:
                send(self.topic, partition, keys[i], values[i], timestamps[i], headers[i])


class TopicChoosingSink(ColumnOperator):
    """Writes each row to the topic ``definition.topic_extractor`` names for it."""

    def __init__(
        self,
        definition: SinkNodeDef,
        key_serde: Serde[Any],
        value_serde: Serde[Any],
        collector: RecordCollector,
        uses_default_serdes: bool = False,
    ) -> None:
        self.definition = definition
        self.extract = definition.topic_extractor
        self.key_serde, self.value_serde = key_serde, value_serde
        self.collector = collector
        self.uses_default_serdes = uses_default_serdes
        self._sinks: dict[str, SinkOperator] = {}

    def process_batch(self, batch: ColumnBatch) -> None:
        extract, topic, partition = self.extract, batch.topic, batch.partition

        def topic_of(key: Any, value: Any, timestamp: int, headers: Any, offset: Any) -> str:
            context = RecordContext(topic, partition, offset, timestamp, headers)
            name = extract(key, value, context)  # type: ignore[misc]
            if not isinstance(name, str) or not name:
                raise StreamsProcessingError(
                    f"sink {self.name!r}: the topic name extractor returned {name!r} for the "
                    f"record {self._where(key, context)}; it must return a topic name",
                    node=self.name,
                )
            return name

        columns = (batch.keys, batch.values, batch.timestamps, batch.headers, batch.offsets)
        positions, topics = call_rows(self, batch, topic_of, *columns)
        kept = list(range(len(batch.rows))) if positions is None else positions
        by_topic: dict[str, list[int]] = {}
        skip_from = -1  # rows of a failed input row that come after the failure
        for p, name in zip(kept, topics, strict=True):
            if p < skip_from:
                continue
            sink = self._sink(name)
            if sink is None:
                skip_from = self.fail(batch, p, self._unknown(batch, p, name))
                continue
            by_topic.setdefault(name, []).append(p)
        for name, rows in by_topic.items():
            self._sinks[name].process_batch(batch.take(rows))

    def _sink(self, topic: str) -> SinkOperator | None:
        """The sink of ``topic`` (made on first use); None when the topic does not exist."""
        sink = self._sinks.get(topic)
        if sink is None:
            try:
                self.collector.partitions_for(topic)
            except UnknownTopicError:
                return None
            sink = SinkOperator(
                self.definition,
                topic,
                self.key_serde,
                self.value_serde,
                self.collector,
                self.uses_default_serdes,
            )
            sink.name, sink.fail = self.name, self.fail  # type: ignore[method-assign]
            self._sinks[topic] = sink
        return sink

    def _unknown(self, batch: ColumnBatch, p: int, topic: str) -> StreamsProcessingError:
        context = RecordContext(
            batch.topic, batch.partition, batch.offsets[p], batch.timestamps[p], batch.headers[p]
        )
        return StreamsProcessingError(
            f"sink {self.name!r}: topic {topic!r}, chosen for the record "
            f"{self._where(batch.keys[p], context)}, does not exist; create it first "
            f"(streamtide topics create {topic} --partitions N)",
            node=self.name,
            topic=topic,
        )

    @staticmethod
    def _where(key: Any, context: RecordContext) -> str:
        origin = ""
        if context.topic is not None and context.offset is not None:
            origin = f" from {context.topic}-{context.partition}@{context.offset}"
        return f"with key {key!r} and timestamp {context.timestamp}{origin}"
