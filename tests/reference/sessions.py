"""Session windows (SEMANTICS 4, 4b and 5): count/reduce/aggregate, emit on update or on
window close, and session ``distinct``.

A session is (key, start, end). A record at ``t`` merges every live session of its key with
``end >= t - gap`` and ``start <= t + gap`` into one ``[min start, max end]``. Two rules for
late data, by how the windows were built:

- seed rule (``with_inactivity_gap(gap)``, optionally ``.until(retention)``): a session is
  live while ``end >= stream_time - retention``; a record that merges with nothing and is
  older than ``stream_time - retention`` makes a session that is emitted but not stored.
- grace rule (``of_inactivity_gap_and_grace(gap, grace)``): a record whose merged session
  ends before ``stream_time - gap - grace`` is dropped; sessions live for ``gap + grace``
  (or ``until``, when longer).

With emit on window close, a session is final once ``stream_time > end + gap + grace``
(grace of seed-rule windows: ``retention - gap``), and a record whose merged session would
already be final is dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamtide.window import Window, Windowed
from tests.reference.aggregate import Aggregator
from tests.reference.cache import RecordCache
from tests.reference.node import Node
from tests.reference.plan import SessionWindowSpec
from tests.reference.records import Change, Rec
from tests.reference.serdes import key_bytes

if TYPE_CHECKING:
    from tests.reference.task import Task

DAY = 24 * 3600 * 1000


def retention_of(spec: SessionWindowSpec) -> int:
    if spec.grace is None:
        return DAY if spec.retention is None else spec.retention
    return max(spec.gap + spec.grace, spec.retention or 0)


def grace_of(spec: SessionWindowSpec) -> int:
    """The grace after ``end + gap`` before a session is final."""
    return retention_of(spec) - spec.gap if spec.grace is None else spec.grace


class SessionWindows(Node):
    """``args``: windows, kind (+ functions, incl. merger), final, caching, distinct."""

    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.spec: SessionWindowSpec = args["windows"]
        self.fold = Aggregator(args["kind"], args)
        self.sessions: dict[tuple[Any, int, int], Any] = {}  # (key, start, end) -> agg
        self.emitted: set[tuple[Any, int, int]] = set()
        self.cache = RecordCache(args["caching"] and not args["final"])

    def live(self, key: Any, now: int) -> list[tuple[int, int]]:
        """The key's sessions a lookup still returns, by end then start."""
        oldest = now - retention_of(self.spec)
        found = [(s, e) for (k, s, e) in self.sessions if k == key and e >= oldest]
        return sorted(found, key=lambda se: (se[1], se[0]))

    def process(self, rec: Rec, task: Task, port: int) -> None:
        if rec.key is None or rec.value is None:
            task.count("dropped-records")
            return
        key, t, now, gap = rec.key, rec.ts, task.stream_time, self.spec.gap
        merged = [(s, e) for s, e in self.live(key, now) if e >= t - gap and s <= t + gap]
        start = min([t] + [s for s, _ in merged])
        end = max([t] + [e for _, e in merged])
        final, grace_rule = self.args["final"], self.spec.grace is not None
        if (final or grace_rule) and end < now - gap - grace_of(self.spec):
            task.count("dropped-records")
        elif not merged and t < now - retention_of(self.spec):
            self.emit_unstored(rec, task)  # the seed rule: emitted, not stored
        else:
            self.update(rec, task, merged, start, end)
        if final:
            self.emit_closed(rec, task)

    def update(self, rec: Rec, task: Task, merged: list, start: int, end: int) -> None:
        key, distinct = rec.key, self.args.get("distinct")
        agg: Any = True  # distinct keeps no aggregate, only the session
        if not distinct:
            agg = None if self.fold.kind == "reduce" else self.fold.initial()
            for s, e in merged:
                old = self.sessions[(key, s, e)]
                agg = old if agg is None else self.fold.merge(key, agg, old)
            agg = self.fold.stored(self.fold.add(key, rec.value, agg))
        for s, e in merged:
            del self.sessions[(key, s, e)]
            self.emitted.discard((key, s, e))
        self.sessions[(key, start, end)] = agg
        if distinct:
            if not merged:  # a new session: its first record passes
                windowed = Windowed(key, Window(start, end))
                self.cache.update(self, task, rec.but(key=windowed))
            return
        if self.args["final"]:
            return
        for s, e in merged:
            if (s, e) != (start, end):
                tombstone = rec.but(key=Windowed(key, Window(s, e)), value=None, ts=e)
                self.cache.update(self, task, tombstone)
        result = rec.but(key=Windowed(key, Window(start, end)), value=agg, ts=end)
        self.cache.update(self, task, result)

    def emit_unstored(self, rec: Rec, task: Task) -> None:
        windowed = Windowed(rec.key, Window(rec.ts, rec.ts))
        if self.args.get("distinct"):
            self.cache.update(self, task, rec.but(key=windowed))
            return
        initial = None if self.fold.kind == "reduce" else self.fold.initial()
        value = self.fold.stored(self.fold.add(rec.key, rec.value, initial))
        self.cache.update(self, task, rec.but(key=windowed, value=value, ts=rec.ts))

    def emit_closed(self, rec: Rec, task: Task) -> None:
        """Sessions with ``stream_time > end + gap + grace`` not yet emitted, by end then key."""
        limit = task.stream_time - self.spec.gap - grace_of(self.spec)
        due = [k for k in self.sessions if k[2] < limit and k not in self.emitted]
        for key, start, end in sorted(due, key=lambda k: (k[2], key_bytes(k[0]), k[1])):
            self.emitted.add((key, start, end))
            windowed = Windowed(key, Window(start, end))
            self.forward(
                rec.but(key=windowed, value=Change(self.sessions[(key, start, end)]), ts=end), task
            )

    def flush(self, task: Task) -> None:
        self.cache.flush(self, task)

    def state(self, task: Task) -> dict[Any, Any] | None:
        if self.args.get("distinct"):
            return None
        oldest = task.stream_time - retention_of(self.spec)
        return {k: agg for k, agg in self.sessions.items() if k[2] >= oldest}
