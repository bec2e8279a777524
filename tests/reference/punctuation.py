"""Punctuation schedules of one task (SEMANTICS section 2), one queue per time type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Schedule:
    """One ``context.schedule(...)``: fires ``punctuator(T)`` when checked with ``T >= time``."""

    interval: int
    punctuator: Callable[[int], None]
    time: int | None  # None: aligned to the first check (``align="first-record"``)
    order: int  # when it was (re)queued: ties of ``time`` go to the earlier
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True

    def next_time(self, checked: int) -> int:
        """``next(T)``: one interval on, or past every missed interval (never replayed)."""
        assert self.time is not None
        n = self.time + self.interval
        if checked >= n:
            missed = (checked - self.time) // self.interval
            n = self.time + (missed + 1) * self.interval
        return n


class PunctuationQueue:
    """Schedules of one type, checked in order of next fire time. SEMANTICS leaves the order
    of schedules due at the same time open; this queue is stable: the one queued first (when
    created, or pushed back after firing) goes first."""

    def __init__(self) -> None:
        self.schedules: list[Schedule] = []
        self._queued = 0

    def add(self, interval: int, punctuator: Callable[[int], None], start: int | None) -> Schedule:
        if interval < 1:
            raise ValueError("the minimum supported scheduling interval is 1 millisecond")
        schedule = Schedule(interval, punctuator, start, self._queued)
        self._queued += 1
        self.schedules.append(schedule)
        return schedule

    def check(self, now: int) -> int:
        """Fire every schedule due at ``now``; returns how many fired."""
        for schedule in self.schedules:
            if schedule.time is None:  # first-record alignment: due at its first check
                schedule.time = now
        fired = 0
        while True:
            live = [s for s in self.schedules if not s.cancelled]
            self.schedules = live
            due = [s for s in live if s.time is not None and s.time <= now]
            if not due:
                return fired
            head = min(due, key=lambda s: (s.time, s.order))
            head.punctuator(now)
            fired += 1
            if not head.cancelled:
                head.time = head.next_time(now)
                head.order, self._queued = self._queued, self._queued + 1
