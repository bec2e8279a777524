"""Per-task counters."""

from __future__ import annotations

from collections import Counter


class TaskMetrics:
    """Named counters of one task (``processed-records``, ``dropped-records``, ...)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()

    def increment(self, name: str, amount: int = 1) -> None:
        self._counts[name] += amount

    def get(self, name: str) -> int:
        return self._counts.get(name, 0)

    def as_dict(self) -> dict[str, int]:
        return dict(self._counts)
