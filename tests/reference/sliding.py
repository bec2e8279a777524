"""Sliding windows (KIP-450): windows ``[start, start + d]``, both ends inclusive, kept per
key as (aggregate, largest record timestamp).

A record at ``t`` (Kafka's algorithm, which keeps windows, not records):

1. is dropped whole when even the window starting just after it has closed
   (``t + 1 + d <= stream_time - grace``);
2. updates every existing window that contains it, newest first, and notes on the way the
   newest window starting just after it (if any), the aggregate of the newest window
   containing it before the update (its right window's content), and the previous record's
   time (the largest timestamp of the newest window ending before it, or of its own left
   window);
3. creates, if missing: the previous record's right window ``[prev + 1, prev + 1 + d]``
   when it contains ``t``; its own left window ``[t - d, t]`` (starting from the previous
   record's left window's aggregate when that record is within ``d``); its own right window
   ``[t + 1, t + 1 + d]`` when a later record lies within ``d`` (with the aggregate noted
   in 2).

A window accepts records (and is created) only while ``end >= stream_time - grace``; each
update is emitted with the window's largest record timestamp. Records earlier than ``d``
after the epoch (Kafka's early-record windows) are outside this model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamtide.window import Window, Windowed
from tests.reference.aggregate import Aggregator
from tests.reference.cache import RecordCache
from tests.reference.node import Node
from tests.reference.plan import SlidingWindowSpec
from tests.reference.records import Change, Rec
from tests.reference.serdes import key_bytes

if TYPE_CHECKING:
    from tests.reference.task import Task


class SlidingWindowAggregate(Node):
    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.spec: SlidingWindowSpec = args["windows"]
        self.fold = Aggregator(args["kind"], args)
        self.windows: dict[tuple[Any, int], tuple[Any, int]] = {}  # (key, start) -> (agg, ts)
        self.emitted: set[tuple[Any, int]] = set()
        self.cache = RecordCache(args["caching"] and not args["final"])

    def process(self, rec: Rec, task: Task, port: int) -> None:
        if rec.key is None or rec.value is None:
            task.count("dropped-records")
            return
        d, t = self.spec.difference, rec.ts
        if t < d:
            raise ValueError(f"record at {t} is earlier than the difference {d} after the epoch")
        close = task.stream_time - self.spec.grace
        if t + 1 + d <= close:
            task.count("dropped-records")
        else:
            self.add(rec, task, close)
        if self.args["final"]:
            self.emit_closed(rec, task)

    def add(self, rec: Rec, task: Task, close: int) -> None:
        d, t, key = self.spec.difference, rec.ts, rec.key
        starts = sorted(
            (s for (k, s) in self.windows if k == key and max(0, t - 2 * d) <= s <= t + 1),
            reverse=True,
        )
        left_agg = right_agg = previous = None
        left_exists = right_exists = False
        for start in starts:
            agg, ts = self.windows[(key, start)]
            end = start + d
            if start == t + 1:
                right_exists = True
            elif end > t:
                if right_agg is None:
                    right_agg = (agg, ts)
                self.update(rec, task, close, start, agg, ts)
            elif end == t:
                left_exists = True
                if ts < t:
                    previous = ts
                self.update(rec, task, close, start, agg, ts)
                break
            else:
                left_agg, previous = agg, ts
                break
        if previous is not None and previous + 1 not in starts and previous + 1 + d >= t:
            self.update(rec, task, close, previous + 1, None, t)  # previous record's right window
        if not left_exists:
            within = previous is not None and t - d <= previous
            self.update(rec, task, close, t - d, left_agg if within else None, t)
        if not right_exists and right_agg is not None and right_agg[1] > t:
            self.put(rec, task, t + 1, right_agg[0], right_agg[1])

    def update(self, rec: Rec, task: Task, close: int, start: int, agg: Any, ts: int) -> None:
        """Add the record to window ``start`` (aggregate ``agg``, None: a new window)."""
        if start + self.spec.difference < close:
            task.count("dropped-records")
            return
        if agg is None and self.fold.kind != "reduce":
            agg = self.fold.initial()
        self.put(rec, task, start, self.fold.add(rec.key, rec.value, agg), max(ts, rec.ts))

    def put(self, rec: Rec, task: Task, start: int, agg: Any, ts: int) -> None:
        agg = self.fold.stored(agg)
        self.windows[(rec.key, start)] = (agg, ts)
        if not self.args["final"]:
            windowed = Windowed(rec.key, Window(start, start + self.spec.difference))
            self.cache.update(self, task, rec.but(key=windowed, value=agg, ts=ts))

    def emit_closed(self, rec: Rec, task: Task) -> None:
        """Windows with ``stream_time > end + grace`` not yet emitted, by start then key."""
        d, limit = self.spec.difference, task.stream_time - self.spec.grace
        due = [(s, k) for (k, s) in self.windows if s + d < limit and (k, s) not in self.emitted]
        for start, key in sorted(due, key=lambda sk: (sk[0], key_bytes(sk[1]))):
            self.emitted.add((key, start))
            agg, ts = self.windows[(key, start)]
            windowed = Windowed(key, Window(start, start + d))
            self.forward(rec.but(key=windowed, value=Change(agg), ts=ts), task)

    def flush(self, task: Task) -> None:
        self.cache.flush(self, task)

    def state(self, task: Task) -> dict[Any, Any]:
        return {ks: agg for ks, (agg, _) in self.windows.items()}
