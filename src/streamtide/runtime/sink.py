"""Sink operators: a batch serialized, partitioned and sent to its topic, a column at a time.

The same sink serves ``to(...)`` and repartitions (``log.encoder.TopicEncoder`` does the
serializing and partitioning, as for ``write_topic``). Each partition's rows go to the
collector in one call, in batch order, so every partition receives its records in the order
record-at-a-time processing would have sent them. A row whose serde or partitioner fails is
reported to the task (``ColumnOperator.fail``) and not sent; the other rows are.
"""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING, Any

from streamtide.errors import SerdeError, StreamsProcessingError
from streamtide.log.encoder import PartitionOutOfRangeError, TopicEncoder
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.nodes import SinkNodeDef
from streamtide.processor.operator import ColumnOperator
from streamtide.serde import Serde

if TYPE_CHECKING:
    from streamtide.runtime.collector import RecordCollector


class SinkOperator(ColumnOperator):
    """Writes its batches to one topic through the task's collector."""

    def __init__(
        self,
        definition: SinkNodeDef,
        topic: str,
        key_serde: Serde,
        value_serde: Serde,
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
        send_many = getattr(self.collector, "send_many", None)
        whole = len(positions) == len(keys)
        ordered = sorted(positions, key=partitions.__getitem__)  # stable: batch order kept
        for partition, group in groupby(ordered, key=partitions.__getitem__):
            rows: Any = list(group)
            if send_many is not None:
                if whole and len(rows) == len(keys):
                    send_many(self.topic, partition, keys, values, timestamps, headers)
                    continue
                send_many(
                    self.topic,
                    partition,
                    [keys[i] for i in rows],
                    [values[i] for i in rows],
                    [timestamps[i] for i in rows],
                    [headers[i] for i in rows],
                )
                continue
            send = self.collector.send
            for i in rows:
                send(self.topic, partition, keys[i], values[i], timestamps[i], headers[i])
