"""The identity of a task: one partition of one sub-topology.

At the bottom of the layers because every layer names tasks (state directories, changelog
offsets, work units, the assignor). Text comes in as ``"0_3"`` from JSON records, file names
and Kafka ids: ``TaskId.parse`` it there, and ``str()`` writes the same text back."""

from __future__ import annotations

import re
from dataclasses import dataclass

_TEXT = re.compile(r"(0|[1-9][0-9]*)_(0|[1-9][0-9]*)")


@dataclass(frozen=True, order=True)
class TaskId:
    """Task ``partition`` of sub-topology ``subtopology``, written ``"0_3"``.

    Ordered by (subtopology, partition); the assignor walks tasks in this order, so it is part
    of the assignment's determinism.
    """

    subtopology: int
    partition: int

    def __post_init__(self) -> None:
        for name in ("subtopology", "partition"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"TaskId {name} must be an int, got {value!r}")
            if value < 0:
                raise ValueError(f"TaskId {name} must be >= 0, got {value}")
        # hashed once: the assignor looks task ids up in sets and dicts many times over
        object.__setattr__(self, "_hash", hash((self.subtopology, self.partition)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined,no-any-return]  # set in __post_init__

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """Read back the ``"<subtopology>_<partition>"`` form that ``str()`` writes."""
        found = _PARSED.get(text) if isinstance(text, str) else None
        if found is not None and type(found) is cls:
            return found
        match = _TEXT.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(f"not a task id: {text!r} (expected '<subtopology>_<partition>')")
        task = cls(int(match.group(1)), int(match.group(2)))
        if len(_PARSED) < _PARSED_LIMIT:
            _PARSED[text] = task
        return task


#: Task ids read back from text (a driver parses every task's id in every batch).
_PARSED: dict[str, TaskId] = {}
_PARSED_LIMIT = 1 << 20
