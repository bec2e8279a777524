"""The Processor API against the reference (SEMANTICS 1 and 2): a processor with a
key-value store, punctuators on stream time (epoch-aligned and first-record-aligned, one of
them cancelling itself) and on wall-clock time, the context's stream time and record
metadata, and a grouping after ``process`` (repartitioned)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streamtide import Processor, PunctuationType, Record
from tests.against_reference.harness import Event
from tests.against_reference.inputs import (
    DRIVER,
    ENGINE,
    S,
    check_driver,
    check_engine,
    engine_runs,
    events,
)
from tests.reference import Plan


class CountsAndTicks(Processor):
    """Counts records per key in ``counts``; forwards each record with its count, the stream
    time and where it came from; every 4 s of stream time forwards every count (epoch
    aligned); every 3 s (from the first record) a tick, five times, then cancels itself
    (the count of ticks is in a store, so a restarted task does not schedule it again);
    with ``wall``, every 2 s of wall-clock time the number of keys."""

    def __init__(self, wall: bool) -> None:
        self.wall = wall

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("counts")
        self.ticks = context.get_state_store("ticks")
        context.schedule(4 * S, PunctuationType.STREAM_TIME, self.emit_counts)
        if (self.ticks.get("ticks") or 0) < 5:
            self.ticker = context.schedule(
                3 * S, PunctuationType.STREAM_TIME, self.tick, align="first-record"
            )
        if self.wall:
            context.schedule(2 * S, PunctuationType.WALL_CLOCK_TIME, self.wall_tick)

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        meta = self.context.record_metadata()
        value = {
            "count": count,
            "stream_time": self.context.current_stream_time_ms(),
            "from": None if meta is None else [meta.partition, meta.offset],
        }
        self.context.forward(Record(record.key, value, record.timestamp))

    def emit_counts(self, timestamp: int) -> None:
        for key, count in self.store.all():
            self.context.forward(Record(key, {"total": count}, timestamp))

    def tick(self, timestamp: int) -> None:
        ticks = (self.ticks.get("ticks") or 0) + 1
        self.ticks.put("ticks", ticks)
        self.context.forward(Record("tick", {"tick": ticks}, timestamp))
        if ticks == 5:
            self.ticker.cancel()

    def wall_tick(self, timestamp: int) -> None:
        keys = sum(1 for _ in self.store.all())
        self.context.forward(Record("wall", {"keys": keys, "at": timestamp}, timestamp))


def processor_plan(wall: bool) -> Plan:
    plan = Plan()
    plan.add_store("counts", value="long")
    plan.add_store("ticks", value="long")
    processed = (
        plan.stream("in")
        .filter(lambda k, v: k is not None)
        .process(lambda: CountsAndTicks(wall), "counts", "ticks")
    )
    processed.to("processed")
    processed.group_by_key().count("per-key").to_stream().to("per-key", value="long")
    return plan


@st.composite
def with_wall_clock(draw: Any) -> list[Event]:
    found = draw(events())
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(found)))
        found.insert(at, Event(None, ts=draw(st.sampled_from([500, 1999, 2000, 4500, 7000]))))
    return found


@DRIVER
@given(found=with_wall_clock())
def test_processor_api_on_the_test_driver(found: Any) -> None:
    check_driver(lambda: processor_plan(wall=True), found, wall_clock=1_000)


@ENGINE
@given(run=engine_runs(events()))
def test_processor_api_on_the_engine(run: Any) -> None:
    """Stream-time punctuation only: the engine's wall clock is the machine's."""
    check_engine(lambda: processor_plan(wall=False), run)
