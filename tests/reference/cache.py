"""The record cache in front of a table's store (Kafka's caching stores).

Off: every update is forwarded at once. On: updates are kept per key and forwarded at
commit, each key once with its latest value and timestamp, keys in the order of their last
update. A key whose latest value is a tombstone and that was never forwarded before (a
session created and merged away between two commits) forwards nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.reference.records import Change, Rec

if TYPE_CHECKING:
    from tests.reference.node import Node
    from tests.reference.task import Task


class RecordCache:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.dirty: dict[Any, Rec] = {}  # insertion order = order of last update
        self.forwarded: set[Any] = set()  # keys whose last forwarded value is not a tombstone

    def update(self, node: Node, task: Task, rec: Rec) -> None:
        """``rec`` carries the key's new value (not a Change)."""
        if not self.enabled:
            node.forward(rec.but(value=Change(rec.value)), task)
            return
        self.dirty.pop(rec.key, None)
        self.dirty[rec.key] = rec

    def flush(self, node: Node, task: Task) -> None:
        dirty, self.dirty = self.dirty, {}
        for key, rec in dirty.items():
            if rec.value is None and key not in self.forwarded:
                continue
            if rec.value is None:
                self.forwarded.discard(key)
            else:
                self.forwarded.add(key)
            node.forward(rec.but(value=Change(rec.value)), task)
