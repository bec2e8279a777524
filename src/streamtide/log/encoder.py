"""Serializing and partitioning records for one topic, a column at a time.

The one place where records bound for a topic get their bytes and their partition: the sinks
of ``to(...)`` and of repartitions (``runtime.sink``) and ``write_topic``
(``engine.dataframes``) all use ``TopicEncoder``. The rules are Kafka's:

- a custom partitioner decides first (``choose(key, value, key_bytes, partitions)``; None
  leaves the record to the default); a partition outside the topic is an error of that row;
- a keyed record goes to ``murmur2(serialized key)`` (``partition_for_key``), computed once
  per distinct key; a windowed key goes by its base key, so all windows of a key land
  together (Kafka's ``WindowedStreamPartitioner``);
- a keyless record goes round robin, counting only the records that are sent.

Columns are serialized whole (``Serde.serialize_many``); a column that fails is serialized
value by value so that each failing row is known, and the rows that fail are reported
instead of sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamtide.log.partitioner import partition_for_key
from streamtide.serde import (
    Serde,
    SessionWindowedSerde,
    TimeWindowedSerde,
    WindowedSerde,
    convert_each,
    windowed_base_serde,
)
from streamtide.window import Windowed

#: ``choose(key, value, key_bytes, partitions) -> partition or None`` (None: the default).
Chooser = Callable[[Any, Any, "bytes | None", int], "int | None"]

#: Bytes of window bounds at the end of a windowed key, per built-in windowed serde.
_BOUNDS_LENGTH = {TimeWindowedSerde: 8, SessionWindowedSerde: 16, WindowedSerde: 16}

#: Distinct keys whose partition an encoder remembers before it starts over.
_PARTITION_CACHE_SIZE = 100_000


class PartitionOutOfRangeError(ValueError):
    """A custom partitioner chose a partition the topic does not have."""

    def __init__(self, partition: Any, partitions: int) -> None:
        self.partition = partition
        self.partitions = partitions
        super().__init__(f"partition {partition!r} is not one of 0..{partitions - 1}")


@dataclass
class Encoded:
    """The rows of one batch, serialized and partitioned. ``errors`` maps a row that failed
    to its exception (its other entries are meaningless); ``serde_failed`` holds the rows
    whose serde raised (the others in ``errors`` failed in the partitioner)."""

    keys: list[bytes | None]
    values: list[bytes | None]
    partitions: list[int]
    errors: dict[int, Exception] = field(default_factory=dict)
    serde_failed: set[int] = field(default_factory=set)


class TopicEncoder:
    """Serializes and partitions records for one topic (see the module docstring)."""

    def __init__(
        self,
        key_serde: Serde[Any],
        value_serde: Serde[Any],
        choose: Chooser | None = None,
        first_keyless: int = 0,
    ) -> None:
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.choose = choose
        self._keyless = first_keyless
        # keys repeat: hash each one once (a None key is never stored; looking it up is fine)
        self._cache: dict[bytes | None, int] = {}
        #: windowed keys go to the partition of their base key
        self._base_key_serde = windowed_base_serde(key_serde)
        #: the built-in windowed layouts end with the window's bounds: the base key's bytes
        #: are the key's bytes without them
        self._bounds_length = _BOUNDS_LENGTH.get(type(key_serde), 0)

    def encode(self, keys: list[Any], values: list[Any], partitions: int) -> Encoded:
        """Bytes and partition of every row (see ``Encoded`` for rows that fail)."""
        errors: dict[int, Exception] = {}
        key_serde, value_serde = self.key_serde, self.value_serde
        key_bytes = convert_each(key_serde.serialize_many, key_serde.serialize, keys, errors)
        value_bytes = convert_each(
            value_serde.serialize_many, value_serde.serialize, values, errors
        )
        encoded = Encoded(key_bytes, value_bytes, [], errors, set(errors))
        if self.choose is None and self._base_key_serde is None and not errors:
            encoded.partitions = self._default_partitions(key_bytes, partitions)
        else:
            encoded.partitions = self._partitions(keys, values, key_bytes, partitions, errors)
        return encoded

    def _default_partitions(self, key_bytes: list[bytes | None], n: int) -> list[int]:
        """Every row's default partition (no partitioner, plain keys, no failed row): each
        distinct key hashed once, rows looked up in C loops, keyless rows round robin."""
        cache = self._cache
        if len(cache) >= _PARTITION_CACHE_SIZE:
            cache.clear()
        out: list[Any] = list(map(cache.get, key_bytes))
        if None not in out:
            return out
        for key in {key for key, found in zip(key_bytes, out) if found is None}:
            if key is not None:
                cache[key] = partition_for_key(key, n)
        out = list(map(cache.get, key_bytes))
        if None in out:
            for row, partition in enumerate(out):
                if partition is None:
                    out[row] = self._keyless % n
                    self._keyless += 1
        return out

    def _partitions(
        self,
        keys: list[Any],
        values: list[Any],
        key_bytes: list[bytes | None],
        n: int,
        errors: dict[int, Exception],
    ) -> list[int]:
        """Row by row: the partitioner, windowed base keys, failed rows left out."""
        choose = self.choose
        out = [0] * len(key_bytes)
        for row, data in enumerate(key_bytes):
            if row in errors:
                continue
            if choose is not None:
                try:
                    chosen = choose(keys[row], values[row], data, n)
                    if chosen is not None and not 0 <= chosen < n:
                        raise PartitionOutOfRangeError(chosen, n)
                except Exception as exc:
                    errors[row] = exc
                    continue
                if chosen is not None:
                    out[row] = chosen
                    continue
            out[row] = self.default_partition(keys[row], data, n)
        return out

    def default_partition(self, key: Any, data: bytes | None, n: int) -> int:
        """The partition of one record without a partitioner's choice."""
        if data is None:
            partition = self._keyless % n
            self._keyless += 1
            return partition
        if self._base_key_serde is not None and isinstance(key, Windowed):
            data = (
                data[: -self._bounds_length]
                if self._bounds_length
                else self._base_key_serde.serialize(key.key) or b""
            )
        cache = self._cache
        cached = cache.get(data)
        if cached is None:
            if len(cache) >= _PARTITION_CACHE_SIZE:
                cache.clear()
            cached = cache[data] = partition_for_key(data, n)
        return cached
