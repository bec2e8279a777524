"""Runtime nodes: one instance of each topology node per task."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamtide.errors import SerdeError, StreamsProcessingError
from streamtide.log.partitioner import partition_for_key
from streamtide.processor.api import Processor
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.nodes import SinkNodeDef
from streamtide.record import Record
from streamtide.serde import (
    Serde,
    SessionWindowedSerde,
    TimeWindowedSerde,
    WindowedSerde,
    windowed_base_serde,
)
from streamtide.window import Windowed

if TYPE_CHECKING:
    from streamtide.runtime.collector import RecordCollector


#: Bytes of window bounds at the end of a windowed key, per built-in windowed serde.
_BOUNDS_LENGTH = {TimeWindowedSerde: 8, SessionWindowedSerde: 16, WindowedSerde: 16}

#: Distinct keys whose partition a sink remembers before it starts over.
_PARTITION_CACHE_SIZE = 100_000


class ProcessorNode:
    """A processor instance with its place in the graph."""

    def __init__(self, name: str, processor: Processor, stores: list[str]) -> None:
        self.name = name
        self.processor = processor
        self.stores = frozenset(stores)
        self.children: list[Any] = []
        self.children_by_name: dict[str, Any] = {}

    def add_child(self, node: Any) -> None:
        self.children.append(node)
        self.children_by_name[node.name] = node


class SourceNode:
    """Deserializes raw records of its topics and hands them to its children."""

    def __init__(self, name: str, key_serde: Serde, value_serde: Serde) -> None:
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.children: list[Any] = []
        self.children_by_name: dict[str, Any] = {}
        self.stores: frozenset[str] = frozenset()

    def add_child(self, node: Any) -> None:
        self.children.append(node)
        self.children_by_name[node.name] = node

    def deserialize_columns(
        self, keys: list[bytes | None], values: list[bytes | None]
    ) -> tuple[list[Any], list[Any], dict[int, SerdeError]]:
        """Deserialize whole key and value columns; rows that fail are reported by index
        (their entries in the returned columns are meaningless)."""
        errors: dict[int, SerdeError] = {}
        return (
            _column(self.key_serde, keys, errors),
            _column(self.value_serde, values, errors),
            errors,
        )

    def deserialize(self, raw: Any) -> Record:
        return Record(
            self.key_serde.deserialize(raw.key),
            self.value_serde.deserialize(raw.value),
            raw.timestamp,
            tuple(raw.headers or ()),
        )


def _column(serde: Serde, items: list[bytes | None], errors: dict[int, SerdeError]) -> list[Any]:
    """``serde.deserialize_many(items)``, or value by value noting each failure in ``errors``
    (the first failure of a row is the one reported)."""
    try:
        return serde.deserialize_many(items)
    except SerdeError:
        pass
    out: list[Any] = []
    deserialize = serde.deserialize
    for index, data in enumerate(items):
        try:
            out.append(deserialize(data))
        except SerdeError as exc:
            errors.setdefault(index, exc)
            out.append(None)
    return out


class SinkNode:
    """Serializes records and sends them to a topic partition through the collector."""

    def __init__(
        self,
        definition: SinkNodeDef,
        topic: str,
        key_serde: Serde,
        value_serde: Serde,
        collector: RecordCollector,
        uses_default_serdes: bool = False,
    ) -> None:
        self.name = definition.name
        self.uses_default_serdes = uses_default_serdes
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.partitioner = definition.partitioner
        self.collector = collector
        self.children: list[Any] = []
        self.children_by_name: dict[str, Any] = {}
        self.stores: frozenset[str] = frozenset()
        self.processor = self  # dispatch calls ``node.processor.process`` on every node
        self._keyless = 0
        self._partitions: dict[bytes, int] = {}  # keys repeat: hash each one once
        self._num_partitions: int | None = None
        #: windowed keys go to the partition of their base key (all windows of a key together)
        self._base_key_serde = windowed_base_serde(key_serde)
        #: the built-in windowed layouts end with the window's bounds: the base key's bytes
        #: are the key's bytes without them
        self._bounds_length = _BOUNDS_LENGTH.get(type(key_serde), 0)

    def send(self, record: Record) -> None:
        try:
            key = self.key_serde.serialize(record.key)
            value = self.value_serde.serialize(record.value)
        except SerdeError as exc:
            hint = (
                "; this sink uses the default serdes: give serdes with Produced, Grouped or "
                "Repartitioned, or set StreamsConfig.default_key_serde/default_value_serde"
                if self.uses_default_serdes
                else ""
            )
            raise StreamsProcessingError(
                f"sink {self.name!r} cannot serialize a record for topic {self.topic!r}: "
                f"{exc}{hint}",
                node=self.name,
                topic=self.topic,
            ) from exc
        if self._num_partitions is None:
            self._num_partitions = self.collector.partitions_for(self.topic)
        n = self._num_partitions
        partition = None
        if self.partitioner is not None:
            partition = self.partitioner(record.key, record.value, key, n)
            if partition is not None and not 0 <= partition < n:
                raise StreamsProcessingError(
                    f"sink {self.name!r}: partitioner returned partition {partition}, "
                    f"but topic {self.topic!r} has {n}",
                    node=self.name,
                    topic=self.topic,
                )
        if partition is None:
            if key is None:
                partition = self._keyless % n
                self._keyless += 1
            else:
                hashed = key
                if self._base_key_serde is not None and isinstance(record.key, Windowed):
                    hashed = (
                        key[: -self._bounds_length]
                        if self._bounds_length
                        else self._base_key_serde.serialize(record.key.key) or b""
                    )
                partition = self._partitions.get(hashed)
                if partition is None:
                    if len(self._partitions) >= _PARTITION_CACHE_SIZE:
                        self._partitions.clear()
                    partition = self._partitions[hashed] = partition_for_key(hashed, n)
        self.collector.send(self.topic, partition, key, value, record.timestamp, record.headers)

    process = send

    def send_columns(self, batch: ColumnBatch) -> bool:
        """Send a whole batch: each column serialized at once, one partition lookup per
        distinct key, one call to the collector per partition. False, having sent nothing,
        when the batch needs ``send`` row by row: a custom partitioner or a windowed key
        (their per-record logic), or a value a serde rejects (the error belongs to its row)."""
        if self.partitioner is not None or self._base_key_serde is not None:
            return False
        try:
            keys = self.key_serde.serialize_many(batch.keys)
            values = self.value_serde.serialize_many(batch.values)
        except Exception:  # a SerdeError, or anything a user's serde raises
            return False
        n = self._num_partitions
        if n is None:
            n = self._num_partitions = self.collector.partitions_for(self.topic)
        cache = self._partitions
        if len(cache) >= _PARTITION_CACHE_SIZE:
            cache.clear()
        by_partition: dict[int, list[int]] = {}
        for row, key in enumerate(keys):
            if key is None:
                partition = self._keyless % n
                self._keyless += 1
            else:
                partition = cache.get(key)
                if partition is None:
                    partition = cache[key] = partition_for_key(key, n)
            rows = by_partition.get(partition)
            if rows is None:
                by_partition[partition] = [row]
            else:
                rows.append(row)
        timestamps, headers = batch.timestamps, batch.headers
        send_many = getattr(self.collector, "send_many", None)
        for partition, rows in by_partition.items():
            if send_many is not None and len(rows) == len(keys):
                send_many(self.topic, partition, keys, values, timestamps, headers)
                continue
            if send_many is not None:
                send_many(
                    self.topic,
                    partition,
                    [keys[i] for i in rows],
                    [values[i] for i in rows],
                    [timestamps[i] for i in rows],
                    [headers[i] for i in rows],
                )
                continue
            for i in rows:
                self.collector.send(
                    self.topic, partition, keys[i], values[i], timestamps[i], headers[i]
                )
        return True
