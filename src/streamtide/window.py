"""Windows and windowed keys, shared by windowed aggregations, stores and serdes.

Both are small immutable classes with slots (built for every windowed update, so built
cheaply): equal, hashable and, for windows, ordered by (start, end).
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from functools import total_ordering
from typing import Any, Generic, TypeVar

K = TypeVar("K")


class _Frozen:
    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


@total_ordering
class Window(_Frozen):
    """A time window ``[start, end]`` in epoch ms; for time windows ``end`` is exclusive."""

    __slots__ = ("end", "start")

    start: int
    end: int

    def __init__(self, start: int, end: int) -> None:
        if end < start:
            raise ValueError(f"window end {end} is before its start {start}")
        _set_start(self, start)
        _set_end(self, end)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Window:
            return NotImplemented
        return self.start == other.start and self.end == other.end

    def __lt__(self, other: object) -> bool:
        if other.__class__ is not Window:
            return NotImplemented
        return (self.start, self.end) < (other.start, other.end)

    def __hash__(self) -> int:
        return hash((self.start, self.end))

    def __reduce__(self) -> tuple[type[Window], tuple[int, int]]:
        return Window, (self.start, self.end)

    def __repr__(self) -> str:
        return f"Window({self.start}, {self.end})"


# the slots' member descriptors: setting through them skips the frozen __setattr__
_set_start = vars(Window)["start"].__set__
_set_end = vars(Window)["end"].__set__


class Windowed(_Frozen, Generic[K]):
    """A key together with the window it was aggregated in."""

    __slots__ = ("_hash", "key", "window")

    key: Any
    window: Window
    _hash: int | None

    def __init__(self, key: Any, window: Window) -> None:
        _set_wkey(self, key)
        _set_window(self, window)
        _set_hash(self, None)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Windowed:
            return NotImplemented
        return self.key == other.key and self.window == other.window

    def __hash__(self) -> int:
        cached = self._hash
        if cached is None:  # computed once: windowed keys are hashed on every cache update
            window = self.window
            cached = hash((self.key, window.start, window.end))
            _set_hash(self, cached)
        return cached

    def __reduce__(self) -> tuple[type[Windowed], tuple[Any, Window]]:
        return Windowed, (self.key, self.window)

    def __repr__(self) -> str:
        return f"Windowed({self.key!r}, {self.window!r})"


_set_wkey = vars(Windowed)["key"].__set__
_set_window = vars(Windowed)["window"].__set__
_set_hash = vars(Windowed)["_hash"].__set__
