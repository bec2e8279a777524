"""Punctuation schedules and the per-type priority queue that fires them.

The rules are Kafka Streams' (README, "Processor API and punctuation"): a queue checked
with time ``T`` fires every schedule whose time is ``<= T`` (passing ``T``), skips missed
intervals, and lets a punctuator cancel itself. A schedule's next fire time is part of the
task's committed state: it is saved under a stable key (node, per-node sequence number, type,
interval) and restored when the processor schedules the same punctuation again after a
restart or a task move.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from streamtide.processor.api import PunctuationType
from streamtide.time import Duration, to_millis

MIN_INTERVAL_MS = 1
ALIGNMENTS = ("epoch", "first-record")


def validate_interval(interval: Duration) -> int:
    """Return the interval in ms, or raise ValueError below the 1 ms minimum."""
    ms = to_millis(interval, "interval")
    if ms < MIN_INTERVAL_MS:
        raise ValueError(f"the minimum supported scheduling interval is 1 millisecond, got {ms} ms")
    return ms


@dataclass(eq=False)
class PunctuationSchedule:
    """One scheduled punctuator: when it fires next, how often, and whether it is cancelled.

    ``time`` is None for a stream-time schedule aligned to its first record that has not
    been checked yet.
    """

    key: str
    node: str
    punctuation_type: PunctuationType
    interval: int
    punctuator: Callable[[int], None]
    time: int | None
    cancelled: bool = False

    def cancel(self) -> None:
        """Stop this schedule; safe to call from inside its own punctuator."""
        self.cancelled = True

    def next_time(self, now: int) -> int:
        """The next fire time after firing at ``now``; missed intervals are skipped."""
        assert self.time is not None
        nxt = self.time + self.interval
        if now >= nxt:
            missed = (now - self.time) // self.interval
            nxt = self.time + (missed + 1) * self.interval
        return nxt


@dataclass
class PunctuationQueue:
    """Schedules of one punctuation type, ordered by next fire time."""

    punctuation_type: PunctuationType
    _heap: list[tuple[int, int, PunctuationSchedule]] = field(default_factory=list)
    _pending: list[PunctuationSchedule] = field(default_factory=list)
    _seq: Iterator[int] = field(default_factory=itertools.count)

    def add(self, schedule: PunctuationSchedule) -> None:
        if schedule.time is None:
            self._pending.append(schedule)
        else:
            heapq.heappush(self._heap, (schedule.time, next(self._seq), schedule))

    def may_punctuate(
        self, now: int, run: Callable[[PunctuationSchedule, int], None] | None = None
    ) -> int:
        """Fire every due schedule at ``now``; return how many punctuators were called.

        ``run(schedule, now)`` calls the punctuator (the task wraps it to set the current
        node); by default the punctuator is called directly.
        """
        if self._pending:
            for schedule in self._pending:
                schedule.time = now
                if not schedule.cancelled:
                    heapq.heappush(self._heap, (now, next(self._seq), schedule))
            self._pending.clear()
        fired = 0
        while self._heap and self._heap[0][0] <= now:
            _, _, schedule = heapq.heappop(self._heap)
            if schedule.cancelled:
                continue
            if run is None:
                schedule.punctuator(now)
            else:
                run(schedule, now)
            fired += 1
            if not schedule.cancelled:
                schedule.time = schedule.next_time(now)
                heapq.heappush(self._heap, (schedule.time, next(self._seq), schedule))
        return fired

    def schedules(self) -> list[PunctuationSchedule]:
        """Live schedules, soonest first (pending first-record schedules last)."""
        # the heap holds scheduled punctuations only: their time is set
        live = sorted((s for _, _, s in self._heap if not s.cancelled), key=lambda s: s.time or 0)
        return live + [s for s in self._pending if not s.cancelled]

    def next_check_time(self) -> int | None:
        """The earliest time at which ``may_punctuate`` can fire anything (None: never); a
        schedule waiting for its first check makes it the smallest time there is."""
        if self._pending:
            return -(2**63)
        return self.next_fire_time()

    def next_fire_time(self) -> int | None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self.schedules())

    def __bool__(self) -> bool:
        """Cheap: whether any schedule may still fire (cancelled ones may linger)."""
        return bool(self._heap) or bool(self._pending)


def start_time(
    punctuation_type: PunctuationType, interval: int, align: str, wall_now: int
) -> int | None:
    """When a new schedule first fires (None: at the first stream-time check)."""
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, got {align!r}")
    if punctuation_type is PunctuationType.WALL_CLOCK_TIME:
        return wall_now + interval
    return 0 if align == "epoch" else None


def schedule_key(node: str, sequence: int, punctuation_type: PunctuationType, interval: int) -> str:
    """The stable identity under which a schedule's next time is committed."""
    return f"{node}#{sequence}:{punctuation_type.value}:{interval}"


def is_wall_clock_schedule(key: str) -> bool:
    """Whether a committed schedule key (``schedule_key``) names a wall-clock schedule."""
    return key.rsplit(":", 2)[-2:-1] == [PunctuationType.WALL_CLOCK_TIME.value]
