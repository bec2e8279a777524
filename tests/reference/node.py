"""The interpreter's node: receives records on a port, forwards to its children in order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.reference.records import Rec

if TYPE_CHECKING:
    from tests.reference.task import Task


class Node:
    """One operator of one task. ``children`` are (node, port) pairs in creation order;
    a join's two inputs arrive on ports 0 (left) and 1 (right)."""

    def __init__(self, **args: Any) -> None:
        self.args = args
        self.children: list[tuple[Node, int]] = []

    def process(self, rec: Rec, task: Task, port: int) -> None:
        raise NotImplementedError(type(self).__name__)

    def forward(self, rec: Rec, task: Task) -> None:
        for child, port in self.children:
            child.process(rec, task, port)

    def state(self, task: Task) -> dict[Any, Any] | None:
        """What this node's store holds (what a lookup at the task's stream time would
        return), for final-state comparison; None: no store to compare."""
        return None

    def flush(self, task: Task) -> None:
        """The task commits (record caches emit here)."""
