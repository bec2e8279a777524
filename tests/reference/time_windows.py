"""Tumbling and hopping time windows (SEMANTICS 4 and 4b): count/reduce/aggregate, emit on
update or on window close, and windowed ``distinct``.

Windows are ``[start, start + size)`` with ``start % step == 0`` and ``start >= 0``. A record
is added to a window only while ``end > stream_time - grace`` (else dropped for that window).
A result carries the largest record timestamp seen in its window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamtide.window import Window, Windowed
from tests.reference.aggregate import Aggregator
from tests.reference.cache import RecordCache
from tests.reference.node import Node
from tests.reference.plan import TimeWindowSpec
from tests.reference.records import Change, Rec
from tests.reference.serdes import key_bytes

if TYPE_CHECKING:
    from tests.reference.task import Task


def window_starts(spec: TimeWindowSpec, t: int) -> list[int]:
    """Starts of the windows containing ``t``, ascending."""
    first = max(0, t - spec.size + spec.step) // spec.step * spec.step
    return list(range(first, t + 1, spec.step))


class TimeWindowAggregate(Node):
    """``args``: windows, kind (+ its functions), final (emit on close), caching."""

    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.spec: TimeWindowSpec = args["windows"]
        self.fold = Aggregator(args["kind"], args)
        self.store: dict[tuple[Any, int], tuple[Any, int]] = {}  # (key, start) -> (agg, ts)
        self.emitted: set[tuple[Any, int]] = set()  # final results already sent
        self.cache = RecordCache(args["caching"] and not args["final"])

    def process(self, rec: Rec, task: Task, port: int) -> None:
        if rec.key is None or rec.value is None:
            task.count("dropped-records")
            return
        close = task.stream_time - self.spec.grace
        for start in window_starts(self.spec, rec.ts):
            if start + self.spec.size <= close:
                task.count("dropped-records")
                continue
            old = self.store.get((rec.key, start))
            agg = self.fold.stored(self.fold.add(rec.key, rec.value, old and old[0]))
            ts = rec.ts if old is None else max(rec.ts, old[1])
            self.store[(rec.key, start)] = (agg, ts)
            if not self.args["final"]:
                windowed = Windowed(rec.key, Window(start, start + self.spec.size))
                self.cache.update(self, task, rec.but(key=windowed, value=agg, ts=ts))
        if self.args["final"]:
            self.emit_closed(rec, task)

    def emit_closed(self, rec: Rec, task: Task) -> None:
        """Every window with ``stream_time >= end + grace`` not yet emitted, by start then
        serialized key."""
        close = task.stream_time - self.spec.grace
        due = [
            (start, key)
            for (key, start) in self.store
            if start + self.spec.size <= close and (key, start) not in self.emitted
        ]
        for start, key in sorted(due, key=lambda sk: (sk[0], key_bytes(sk[1]))):
            self.emitted.add((key, start))
            agg, ts = self.store[(key, start)]
            windowed = Windowed(key, Window(start, start + self.spec.size))
            self.forward(rec.but(key=windowed, value=Change(agg), ts=ts), task)

    def flush(self, task: Task) -> None:
        self.cache.flush(self, task)

    def state(self, task: Task) -> dict[Any, Any]:
        return {(key, start): agg for (key, start), (agg, _) in self.store.items()}


class TimeWindowDistinct(Node):
    """The first record of each key in each (tumbling) window, keyed by its window (a table
    update like any other: through the record cache when it is on)."""

    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.spec: TimeWindowSpec = args["windows"]
        self.store: dict[tuple[Any, int], Any] = {}
        self.cache = RecordCache(args["caching"])

    def process(self, rec: Rec, task: Task, port: int) -> None:
        if rec.key is None or rec.value is None:
            task.count("dropped-records")
            return
        (start,) = window_starts(self.spec, rec.ts)
        if start + self.spec.size <= task.stream_time - self.spec.grace:
            task.count("dropped-records")
            return
        if (rec.key, start) in self.store:
            return
        self.store[(rec.key, start)] = rec.value
        windowed = Windowed(rec.key, Window(start, start + self.spec.size))
        self.cache.update(self, task, rec.but(key=windowed))

    def flush(self, task: Task) -> None:
        self.cache.flush(self, task)

    def state(self, task: Task) -> dict[Any, Any]:
        return dict(self.store)
