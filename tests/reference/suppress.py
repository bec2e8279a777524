"""``KTable.suppress`` (KIP-328): a buffer of the table's updates, emitted later.

The node's stream time is the largest timestamp of the updates it has seen. Each buffered
key has a buffer time; entries leave in (buffer time, serialized key) order.

- until the window closes: buffer time = the window's end; an entry leaves once stream time
  reaches end + grace (+ gap for sessions). Tombstones replace the entry but are not emitted.
- until a time limit: buffer time = the timestamp of the update that brought the key into
  the buffer (later updates replace the value and keep the time); an entry leaves once
  stream time reaches buffer time + limit; tombstones are emitted like values. Past
  ``max_records`` the oldest entries leave early.

An entry keeps the old value of the update that brought its key in (what was last emitted
for it); it leaves with that as its old value when a table below asks for old values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamtide.window import Windowed
from tests.reference.node import Node
from tests.reference.plan import SuppressSpec
from tests.reference.records import Change, Rec
from tests.reference.serdes import key_bytes

if TYPE_CHECKING:
    from tests.reference.task import Task


def order_key(key: Any) -> tuple:
    if isinstance(key, Windowed):
        return (key_bytes(key.key), key.window.start, key.window.end)
    return (key_bytes(key),)


class Suppress(Node):
    """``args``: spec (SuppressSpec), close_after (for windowed keys: how long after the
    window's end it closes)."""

    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.spec: SuppressSpec = args["spec"]
        self.observed = -1
        #: key -> (buffer time, latest update, prior value: the old value it entered with)
        self.buffer: dict[Any, tuple[int, Rec, Any]] = {}

    def process(self, rec: Rec, task: Task, port: int) -> None:
        self.observed = max(self.observed, rec.ts)
        held = self.buffer.get(rec.key)
        prior = rec.value.old if held is None else held[2]
        if self.spec.time_limit is None:
            time = rec.key.window.end
        else:
            time = rec.ts if held is None else held[0]
        self.buffer[rec.key] = (time, rec, prior)
        wait = self.args["close_after"] if self.spec.time_limit is None else self.spec.time_limit
        self.evict_while(task, lambda oldest: oldest <= self.observed - wait)
        if self.spec.max_records is not None:
            self.evict_while(task, lambda oldest: len(self.buffer) > self.spec.max_records)

    def evict_while(self, task: Task, condition: Any) -> None:
        while self.buffer:
            key = min(self.buffer, key=lambda k: (self.buffer[k][0], order_key(k)))
            time, update, prior = self.buffer[key]
            if not condition(time):
                return
            del self.buffer[key]
            if update.value.new is not None or self.spec.time_limit is not None:
                old = prior if self.args.get("send_old") else None
                self.forward(update.but(value=Change(update.value.new, old)), task)
