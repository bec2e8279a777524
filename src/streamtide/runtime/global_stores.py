"""Global stores: the whole of a topic (every partition) in every task, read-only to them.

A global table's topic is its own changelog: a ``GlobalStores`` brings its stores to given
end offsets of their topics by applying the records in between (latest value per key; a None
value deletes the key; records without key are skipped). The test driver applies each record
as it is piped in; the engine brings a worker's copy to the end offsets the driver recorded
for the batch before any task of the batch runs, so every task, retried or not, sees the
same table. A copy that is ahead of the offsets asked for is rebuilt from the beginning.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from streamtide.errors import StoreError, TopologyError
from streamtide.log.api import Log
from streamtide.processor.api import StateStore
from streamtide.processor.topology import GlobalStoreSpec, Topology
from streamtide.serde import Serde
from streamtide.state.memory import InMemoryKeyValueBytesStore

#: Records of a global topic read and applied at once (a column each for keys and values).
_CHUNK_RECORDS = 65_536


class GlobalKeyValueStore(StateStore):
    """The typed, read-only view of one global store (``get``, ``range``, ``all``)."""

    kind = "key_value"
    persistent = False

    def __init__(
        self, spec: GlobalStoreSpec, key_serde: Serde[Any], value_serde: Serde[Any]
    ) -> None:
        self.name = spec.name
        self.spec = spec
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.inner = InMemoryKeyValueBytesStore(spec.name).open_standalone()
        self.positions: list[int] = []  # next offset to apply, per partition

    @property
    def is_open(self) -> bool:
        return True

    def init(self, context: Any) -> None:  # opened by ``GlobalStores``, not by a task
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of the topic: the key's new value, or its deletion."""
        self.apply_all((key,), (value,))

    def apply_all(self, keys: Sequence[bytes | None], values: Sequence[bytes | None]) -> None:
        """Apply records of the topic in order, given as a column of keys and one of values
        (what ``apply`` does for each, in one write)."""
        self.inner.put_all(
            [
                (bytes(key), None if value is None else bytes(value))
                for key, value in zip(keys, values)
                if key is not None
            ]
        )

    def get(self, key: Any) -> Any:
        if key is None:
            raise StoreError(f"global store {self.name!r} does not accept a None key")
        key_bytes = self.key_serde.serialize(key)
        if key_bytes is None:
            raise StoreError(f"global store {self.name!r}: the key serde wrote {key!r} as None")
        return self.value_serde.deserialize(self.inner.get(key_bytes))

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        low = None if from_key is None else self.key_serde.serialize(from_key)
        high = None if to_key is None else self.key_serde.serialize(to_key)
        for key, value in self.inner.range(low, high):
            yield self.key_serde.deserialize(key), self.value_serde.deserialize(value)

    def all(self) -> Iterator[tuple[Any, Any]]:
        return self.range(None, None)

    def approximate_num_entries(self) -> int:
        return self.inner.approximate_num_entries()

    def reset(self) -> None:
        self.inner = InMemoryKeyValueBytesStore(self.name).open_standalone()
        self.positions = []


class GlobalStores(Mapping[str, GlobalKeyValueStore]):
    """The global stores of a topology, by name, and the offsets each has applied."""

    def __init__(
        self,
        topology: Topology,
        application_id: str,
        default_key_serde: Serde[Any],
        default_value_serde: Serde[Any],
    ) -> None:
        self._stores = {
            name: GlobalKeyValueStore(
                spec,
                spec.key_serde or default_key_serde,
                spec.value_serde or default_value_serde,
            )
            for name, spec in topology.global_stores.items()
        }
        self._topics = {
            name: topology.resolve_topic(spec.topic, application_id)
            for name, spec in topology.global_stores.items()
        }

    def __getitem__(self, name: str) -> GlobalKeyValueStore:
        return self._stores[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._stores)

    def __len__(self) -> int:
        return len(self._stores)

    def topics(self) -> set[str]:
        """The (physical) topics of the global stores."""
        return set(self._topics.values())

    def apply(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of ``topic`` to the stores it feeds (the test driver's path)."""
        for name, store_topic in self._topics.items():
            if store_topic == topic:
                self._stores[name].apply(key, value)

    def update(self, log_: Log, ends: Mapping[str, Sequence[int]]) -> int:
        """Bring every store to ``ends`` (topic -> end offset per partition); the number of
        records applied. A store ahead of ``ends`` is rebuilt from the beginning."""
        applied = 0
        for name, store in self._stores.items():
            topic = self._topics[name]
            if topic not in ends:
                raise TopologyError(f"no end offsets given for global topic {topic!r}")
            targets = list(ends[topic])
            if len(store.positions) != len(targets) or any(
                have > want for have, want in zip(store.positions, targets)
            ):
                store.reset()
                store.positions = [log_.begin_offset(topic, p) for p in range(len(targets))]
            for partition, end in enumerate(targets):
                start = store.positions[partition]
                while start < end:
                    chunk = log_.read_table(topic, partition, start, end, _CHUNK_RECORDS)
                    if not chunk.num_rows:
                        break  # (the rest of the range holds no records, e.g. markers)
                    store.apply_all(
                        chunk.column("key").to_pylist(), chunk.column("value").to_pylist()
                    )
                    applied += chunk.num_rows
                    start = chunk.column("offset")[-1].as_py() + 1
                store.positions[partition] = end
        return applied
