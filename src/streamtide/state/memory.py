"""In-memory bytes stores: a dict plus a sorted key list for ordered scans."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from streamtide.errors import StoreError
from streamtide.processor.api import StateStoreContext
from streamtide.state.api import KeyValueBytesStore, prefix_end


class InMemoryKeyValueBytesStore(KeyValueBytesStore):
    """Ordered in-memory map; point operations are O(1), ordered scans O(log n + k)."""

    persistent = False

    def __init__(self, name: str) -> None:
        self.name = name
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []
        self._open = False

    def init(self, context: StateStoreContext) -> None:
        self._open = True
        context.register(self)

    def open_standalone(self) -> InMemoryKeyValueBytesStore:
        """Open without a task (contract tests, tools)."""
        self._open = True
        return self

    @property
    def is_open(self) -> bool:
        return self._open

    def _check(self) -> None:
        if not self._open:
            raise StoreError(f"store {self.name!r} is not open")

    def get(self, key: bytes) -> bytes | None:
        self._check()
        return self._data.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self._check()
        if key is None:
            raise StoreError(f"store {self.name!r} does not accept a None key")
        if value is None:
            if self._data.pop(key, None) is not None:
                index = bisect.bisect_left(self._keys, key)
                del self._keys[index]
            return
        if key not in self._data:
            bisect.insort(self._keys, key)
        self._data[key] = value

    def range(
        self, from_key: bytes | None, to_key: bytes | None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        self._check()
        lo = 0 if from_key is None else bisect.bisect_left(self._keys, from_key)
        hi = len(self._keys) if to_key is None else bisect.bisect_right(self._keys, to_key)
        keys = self._keys[lo:hi]  # a snapshot: safe against writes during iteration
        if reverse:
            keys.reverse()
        data = self._data
        for key in keys:
            value = data.get(key)
            if value is not None:
                yield key, value

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Bounded by the first key after the prefix, so only matching keys are copied."""
        self._check()
        end = prefix_end(prefix)
        lo = bisect.bisect_left(self._keys, prefix)
        hi = len(self._keys) if end is None else bisect.bisect_left(self._keys, end)
        return self._entries(self._keys[lo:hi])

    def _entries(self, keys: list[bytes]) -> Iterator[tuple[bytes, bytes]]:
        data = self._data
        for key in keys:
            value = data.get(key)
            if value is not None:
                yield key, value

    def approximate_num_entries(self) -> int:
        self._check()
        return len(self._data)

    def delete_range(self, from_key: bytes | None, to_key: bytes | None) -> None:
        self._check()
        lo = 0 if from_key is None else bisect.bisect_left(self._keys, from_key)
        hi = len(self._keys) if to_key is None else bisect.bisect_left(self._keys, to_key)
        if lo >= hi:
            return
        data = self._data
        for key in self._keys[lo:hi]:
            del data[key]
        del self._keys[lo:hi]

    def clear(self) -> None:
        self._data.clear()
        self._keys.clear()

    def close(self) -> None:
        self._open = False
