"""Deduplication within an interval (SEMANTICS section 3, KIP-655).

The store is a list of entries (dedup id, timestamp, origin) per task, one per forwarded
record; ``origin`` is (topic, partition, offset) of the record that made it, None for
records without offset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.reference.node import Node
from tests.reference.records import Rec
from tests.reference.serdes import key_bytes

if TYPE_CHECKING:
    from tests.reference.task import Task


def id_bytes(value: Any) -> bytes:
    """An id's serialized form without an id serde: str as UTF-8, int as an 8-byte long."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"the interpreter has no byte form for id {value!r}")
    return key_bytes(value, "string" if isinstance(value, str) else "long")  # type: ignore[return-value]


class Dedup(Node):
    """``mode``: ``"key"`` (the key), ``"key_value"`` ((key, id)) or ``"id"`` (the id)."""

    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.entries: list[tuple[Any, int, tuple | None]] = []

    def dedup_id(self, rec: Rec) -> Any:
        mode, key = self.args["mode"], rec.key
        if mode == "key":
            return None if key is None else key_bytes(key, self.args["key_serde"])
        ident = self.args["id_selector"](key, rec.value)
        if mode == "id":
            return None if ident is None else id_bytes(ident)
        if key is None or ident is None:
            return None
        return (key_bytes(key, self.args["key_serde"]), id_bytes(ident))

    def process(self, rec: Rec, task: Task, port: int) -> None:
        dedup_id = self.dedup_id(rec)
        if dedup_id is None:
            self.forward(rec, task)
            return
        interval, now, t = self.args["interval"], task.stream_time, rec.ts
        self.entries = [e for e in self.entries if not now - e[1] > interval]  # purge
        origin = None if rec.offset is None else (rec.topic, rec.partition, rec.offset)
        found = [e for e in self.entries if e[0] == dedup_id and abs(t - e[1]) <= interval]
        if not found:
            if not t < now - interval:  # a late record is forwarded, not stored
                self.entries.append((dedup_id, t, origin))
            self.forward(rec, task)
        elif origin is not None and any(e[2] == origin for e in found):
            self.forward(rec, task)  # the same record again (reprocessed after a crash)
        else:
            task.count("dropped-duplicates")

    def state(self, task: Task) -> dict[Any, Any]:
        return {(e[0], e[1]): e[2] for e in self.entries}
