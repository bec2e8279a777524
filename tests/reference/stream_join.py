"""Stream-stream joins (SEMANTICS 9, Kafka 3.x ``KStreamKStreamJoin``).

A left record at ``t`` joins the right records of its key in ``[t - before, t + after]``; a
right record at ``t`` the left ones in ``[t - after, t + before]``. Results: ``joiner(left,
right)`` with the larger timestamp, in the other side's timestamp order (then arrival).

Left and outer joins hold records that found no partner until their window closes (stream
time past ``t + after + grace`` for a left record, ``t + before + grace`` for a right one)
and then emit ``joiner(value, None)`` / ``joiner(None, value)`` with the record's own
timestamp. Held records are checked when a record that is not out of order arrives
(``t == stream time``), before it joins; they go out by timestamp, right side first, then
key. A record that joins removes the other side's held records of its key and timestamp. A
record already past its window (``t + after < stream time``) with no partner is emitted at
once.

Each side keeps its records while ``ts > newest - (before + after + grace)``, ``newest``
being the largest timestamp that side has stored; older ones neither join nor are stored.
A record with a None key or value is dropped, except that a left (and outer) join emits a
None-key record of its outer side(s) at once, unjoined.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.reference.node import Node
from tests.reference.plan import JoinWindowSpec
from tests.reference.records import Rec
from tests.reference.serdes import key_bytes

if TYPE_CHECKING:
    from tests.reference.task import Task

LEFT, RIGHT = 0, 1


class StreamStreamJoin(Node):
    """``args``: joiner, windows (JoinWindowSpec), kind. Port 0 is the left stream."""

    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.spec: JoinWindowSpec = args["windows"]
        self.kind = args["kind"]
        self.sides: list[list[tuple[Any, int, Any]]] = [[], []]  # (key, ts, value), arrival order
        self.newest = [-1, -1]
        self.held: list[tuple[int, int, Any, int, Any]] = []  # (ts, side, key, seq, value)
        self.seq = 0

    def outer(self, side: int) -> bool:
        return self.kind == "outer_join" or (self.kind == "left_join" and side == LEFT)

    def unjoined(self, side: int, value: Any) -> Any:
        joiner = self.args["joiner"]
        return joiner(value, None) if side == LEFT else joiner(None, value)

    def retention(self) -> int:
        return self.spec.before + self.spec.after + self.spec.grace

    def process(self, rec: Rec, task: Task, port: int) -> None:
        side, t = port, rec.ts
        if rec.key is None or rec.value is None:
            if rec.key is None and rec.value is not None and self.outer(side):
                self.forward(rec.but(value=self.unjoined(side, rec.value)), task)
            else:
                task.count("dropped-records")
            return
        before, after = (self.spec.before, self.spec.after)
        if side == RIGHT:
            before, after = after, before
        time_from, time_to = max(0, t - before), max(0, t + after)
        self.newest[side] = max(self.newest[side], t)
        if t > self.newest[side] - self.retention():
            self.sides[side].append((rec.key, t, rec.value))
        if self.kind != "join" and t == task.stream_time:
            self.emit_closed(rec, task)
        other = 1 - side
        oldest = self.newest[other] - self.retention()
        partners = [
            (ts, value)
            for key, ts, value in self.sides[other]
            if key == rec.key and time_from <= ts <= time_to and ts > oldest
        ]
        partners.sort(key=lambda p: p[0])  # stable: arrival order within one timestamp
        joiner = self.args["joiner"]
        for ts, value in partners:
            self.held = [
                h for h in self.held if not (h[1] == other and h[2] == rec.key and h[0] == ts)
            ]
            result = joiner(rec.value, value) if side == LEFT else joiner(value, rec.value)
            self.forward(rec.but(value=result, ts=max(t, ts)), task)
        if partners or not self.outer(side):
            return
        if time_to < task.stream_time:
            self.forward(rec.but(value=self.unjoined(side, rec.value)), task)
        else:
            self.held.append((t, side, rec.key, self.seq, rec.value))
            self.seq += 1

    def emit_closed(self, rec: Rec, task: Task) -> None:
        now, grace = task.stream_time, self.spec.grace
        closed = [
            h
            for h in self.held
            if h[0] + (self.spec.after if h[1] == LEFT else self.spec.before) + grace < now
        ]
        if not closed:
            return
        self.held = [h for h in self.held if h not in closed]
        # right side first at equal timestamps, then by serialized key, then arrival
        for ts, side, key, _, value in sorted(
            closed, key=lambda h: (h[0], 0 if h[1] == RIGHT else 1, key_bytes(h[2]), h[3])
        ):
            self.forward(rec.but(key=key, value=self.unjoined(side, value), ts=ts), task)
