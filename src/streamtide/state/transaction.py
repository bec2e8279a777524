"""The transactional write buffer: a batch's writes, kept out of the local store until commit.

A ``WriteBuffer`` holds the latest value (or tombstone) of every key written in the batch,
plus the range deletes issued, and can lay itself over an ordered iterator of the store below
so that reads see the batch's own writes. Its contents replay as: every range delete (in the
order issued), then every buffered key. That replay is exact because a range delete drops the
buffered keys it covers; a key still buffered was therefore written after every range delete
covering it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

#: A range delete ``[from_key, to_key)``; ``to_key`` None means unbounded.
RangeDelete = tuple[bytes, "bytes | None"]


class WriteBuffer:
    """Pending writes; see the module docstring for the replay order.

    Writes land in a dict (one hash per put, whatever the batch size); the key order that
    replays and range reads need is brought up to date only when asked for: a few new keys
    are inserted into the sorted list, many are sorted in with it at once.
    """

    __slots__ = ("_new", "_ranges", "_sorted", "latest")

    def __init__(self) -> None:
        #: the latest value of every key written (None: a tombstone); read it, write with put
        self.latest: dict[bytes, bytes | None] = {}
        self._sorted: list[bytes] = []
        self._new: list[bytes] = []  # keys added since ``_sorted`` was last brought up to date
        self._ranges: list[RangeDelete] = []

    @property
    def _keys(self) -> list[bytes]:
        """Buffered keys in key order."""
        new = self._new
        if new:
            keys = self._sorted
            if len(new) <= 16:
                for key in new:
                    bisect.insort(keys, key)
            else:
                keys.extend(new)
                keys.sort()
            new.clear()
        return self._sorted

    def __len__(self) -> int:
        """How many changelog records replaying the buffer takes."""
        return len(self.latest) + len(self._ranges)

    def __bool__(self) -> bool:
        return bool(self.latest) or bool(self._ranges)

    @property
    def range_deletes(self) -> list[RangeDelete]:
        return list(self._ranges)

    def columns(self) -> tuple[list[bytes], list[bytes | None]]:
        """Buffered keys in key order and their values (None: tombstone), as two lists."""
        keys = list(self._keys)
        values = self.latest
        return keys, [values[key] for key in keys]

    def items(self) -> list[tuple[bytes, bytes | None]]:
        """Buffered keys in key order with their value (None: tombstone)."""
        values = self.latest
        return [(key, values[key]) for key in self._keys]

    # ---- writing -------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes | None) -> None:
        values = self.latest
        if key not in values:
            self._new.append(key)
        values[key] = value

    def put_many(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        """``put`` of every entry, in order."""
        values = self.latest
        # (in C loops: a write-back hands over a whole batch of entries at once)
        self._new.extend(
            [key for key in dict.fromkeys([key for key, _ in entries]) if key not in values]
        )
        values.update(entries)

    def delete_range(self, from_key: bytes | None, to_key: bytes | None) -> None:
        begin = from_key if from_key is not None else b""
        if to_key is not None and to_key <= begin:
            return
        keys = self._keys
        lo = bisect.bisect_left(keys, begin)
        hi = len(keys) if to_key is None else bisect.bisect_left(keys, to_key)
        for key in keys[lo:hi]:
            del self.latest[key]
        del keys[lo:hi]
        self._ranges.append((begin, to_key))

    def absorb(self, newer: WriteBuffer) -> None:
        """Lay ``newer``'s writes over this buffer's (as if they were issued here)."""
        for begin, end in newer._ranges:
            self.delete_range(begin, end)
        for key, value in newer.items():
            self.put(key, value)

    def clear(self) -> None:
        self.latest.clear()
        self._sorted.clear()
        self._new.clear()
        self._ranges.clear()

    # ---- reading -------------------------------------------------------------------------

    def covered(self, key: bytes) -> bool:
        """Whether a buffered range delete hides ``key`` in the store below."""
        return _in_ranges(key, self._ranges)

    def lookup(self, key: bytes) -> tuple[bool, bytes | None]:
        """``(True, value)`` if the buffer decides what ``key`` reads (value None: deleted),
        ``(False, None)`` if the store below does."""
        values = self.latest
        if key in values:
            return True, values[key]
        if self._ranges and self.covered(key):
            return True, None
        return False, None

    def overlay(
        self,
        below: Iterator[tuple[bytes, bytes]],
        from_key: bytes | None,
        to_key: bytes | None,
        reverse: bool = False,
    ) -> Iterator[tuple[bytes, bytes]]:
        """Entries of ``below`` (a scan of the same bounds, in the same direction) with this
        buffer's writes laid over them. The buffer's part is copied now, so writes made while
        the result is consumed do not disturb it."""
        keys = self._keys
        lo = 0 if from_key is None else bisect.bisect_left(keys, from_key)
        hi = len(keys) if to_key is None else bisect.bisect_right(keys, to_key)
        if lo >= hi and not self._ranges:
            return below
        values = self.latest
        mine = [(key, values[key]) for key in keys[lo:hi]]
        if reverse:
            mine.reverse()
        return _merge(below, mine, set(keys[lo:hi]), list(self._ranges), reverse)


def _in_ranges(key: bytes, ranges: list[RangeDelete]) -> bool:
    return any(begin <= key and (end is None or key < end) for begin, end in ranges)


def _merge(
    below: Iterator[tuple[bytes, bytes]],
    mine: list[tuple[bytes, bytes | None]],
    shadowed: set[bytes],
    ranges: list[RangeDelete],
    reverse: bool,
) -> Iterator[tuple[bytes, bytes]]:
    index, count = 0, len(mine)
    for key, value in below:
        if key in shadowed or (ranges and _in_ranges(key, ranges)):
            continue
        while index < count:
            own_key, own_value = mine[index]
            if (own_key > key) if reverse else (own_key < key):
                index += 1
                if own_value is not None:
                    yield own_key, own_value
            else:
                break
        yield key, value
    for own_key, own_value in mine[index:]:
        if own_value is not None:
            yield own_key, own_value
