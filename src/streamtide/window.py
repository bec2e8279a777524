"""Windows and windowed keys, shared by windowed aggregations, stores and serdes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

K = TypeVar("K")


@dataclass(frozen=True, order=True)
class Window:
    """A time window ``[start, end]`` in epoch ms; for time windows ``end`` is exclusive."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"window end {self.end} is before its start {self.start}")

    def __repr__(self) -> str:
        return f"Window({self.start}, {self.end})"


@dataclass(frozen=True)
class Windowed(Generic[K]):
    """A key together with the window it was aggregated in."""

    key: Any
    window: Window

    def __repr__(self) -> str:
        return f"Windowed({self.key!r}, {self.window!r})"
