"""Punctuation schedules, cases P1 to P6 with their exact numbers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamtide import Processor, PunctuationType, Record, Serdes, Topology
from streamtide.processor.punctuation import (
    PunctuationQueue,
    PunctuationSchedule,
    start_time,
    validate_interval,
)
from streamtide.testing import TopologyTestDriver

S = 1000


def make_schedule(interval: int, time: int | None, fired: list[int]) -> PunctuationSchedule:
    return PunctuationSchedule(
        "n#0", "n", PunctuationType.STREAM_TIME, interval, fired.append, time
    )


def run_checks(schedule: PunctuationSchedule, checks: list[int]) -> list[int | None]:
    queue = PunctuationQueue(schedule.punctuation_type)
    queue.add(schedule)
    nexts = []
    for now in checks:
        queue.may_punctuate(now)
        nexts.append(schedule.time)
    return nexts


def test_P1_first_record_alignment_follows_the_seed_narrative() -> None:
    fired: list[int] = []
    schedule = make_schedule(
        5 * S, start_time(PunctuationType.STREAM_TIME, 5 * S, "first-record", 0), fired
    )
    nexts = run_checks(schedule, [1 * S, 4 * S, 8 * S, 10 * S])
    assert fired == [1 * S, 8 * S]
    assert nexts == [6 * S, 6 * S, 11 * S, 11 * S]


def test_P2_epoch_alignment_is_kafka_default() -> None:
    fired: list[int] = []
    schedule = make_schedule(
        5 * S, start_time(PunctuationType.STREAM_TIME, 5 * S, "epoch", 0), fired
    )
    nexts = run_checks(schedule, [1 * S, 4 * S, 8 * S, 10 * S])
    assert fired == [1 * S, 8 * S, 10 * S]
    assert nexts == [5 * S, 5 * S, 10 * S, 15 * S]


def test_P3_missed_intervals_are_skipped_not_replayed() -> None:
    fired: list[int] = []
    schedule = make_schedule(5 * S, 5 * S, fired)
    nexts = run_checks(schedule, [21 * S])
    assert fired == [21 * S]
    assert nexts == [25 * S]


class Recorder(Processor):
    """Schedules one punctuator and records the timestamps it is called with."""

    calls: list[int]

    def __init__(
        self,
        interval: int | timedelta,
        ptype: PunctuationType,
        align: str = "epoch",
        cancel_on_call: int | None = None,
    ) -> None:
        self.interval = interval
        self.ptype = ptype
        self.align = align
        self.cancel_on_call = cancel_on_call
        self.calls = []

    def init(self, context) -> None:
        super().init(context)
        self.handle = context.schedule(self.interval, self.ptype, self.punctuate, align=self.align)

    def punctuate(self, timestamp: int) -> None:
        self.calls.append(timestamp)
        if self.cancel_on_call is not None and len(self.calls) == self.cancel_on_call:
            self.handle.cancel()
        self.context.forward(Record("tick", timestamp, timestamp))

    def process(self, record: Record) -> None:
        pass


def driver_for(processor: Recorder, wall_ms: int = 0) -> TopologyTestDriver:
    topology = (
        Topology()
        .add_source("src", "in", key_serde=Serdes.string(), value_serde=Serdes.string())
        .add_processor("proc", lambda: processor, "src")
        .add_sink("sink", "ticks", "proc", key_serde=Serdes.string(), value_serde=Serdes.int())
    )
    return TopologyTestDriver(topology, initial_wall_clock_ms=wall_ms)


def test_P1_through_the_driver() -> None:
    processor = Recorder(timedelta(seconds=5), PunctuationType.STREAM_TIME, "first-record")
    with driver_for(processor) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        for t in (1 * S, 4 * S, 8 * S, 10 * S):
            inp.pipe_input("k", "v", timestamp=t)
        assert processor.calls == [1 * S, 8 * S]
        assert driver.committed_state("0_0").schedules == {"proc#0:stream_time:5000": 11 * S}


def test_P2_through_the_driver() -> None:
    processor = Recorder(5 * S, PunctuationType.STREAM_TIME)
    with driver_for(processor) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        for t in (1 * S, 4 * S, 8 * S, 10 * S):
            inp.pipe_input("k", "v", timestamp=t)
        out = driver.create_output_topic("ticks", Serdes.string(), Serdes.int())
        assert [r.timestamp for r in out.read_records()] == [1 * S, 8 * S, 10 * S]


def test_P4_stream_time_never_fires_without_records() -> None:
    processor = Recorder(1 * S, PunctuationType.STREAM_TIME)
    with driver_for(processor) as driver:
        driver.advance_wall_clock_time(timedelta(seconds=10))
        assert processor.calls == []


def test_P5_wall_clock_fires_without_records_once_with_the_current_time() -> None:
    processor = Recorder(1 * S, PunctuationType.WALL_CLOCK_TIME)
    with driver_for(processor, wall_ms=0) as driver:
        driver.advance_wall_clock_time(3500)
        assert processor.calls == [3500]
        (schedule,) = driver.tasks[0].schedules()
        assert schedule.time == 4 * S


def test_P6_a_punctuator_can_cancel_itself() -> None:
    processor = Recorder(1 * S, PunctuationType.STREAM_TIME, cancel_on_call=2)
    with driver_for(processor) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        for t in (0, 1 * S, 2 * S, 3 * S):
            inp.pipe_input("k", "v", timestamp=t)
        assert processor.calls == [0, 1 * S]
        assert driver.tasks[0].schedules() == []


def test_several_schedules_fire_in_one_check_in_time_order() -> None:
    fired: list[tuple[str, int]] = []
    queue = PunctuationQueue(PunctuationType.STREAM_TIME)
    for name, interval, time in (("b", 3, 3), ("a", 2, 2)):
        queue.add(
            PunctuationSchedule(
                name,
                name,
                PunctuationType.STREAM_TIME,
                interval,
                lambda t, n=name: fired.append((n, t)),
                time,
            )
        )
    assert queue.may_punctuate(10) == 2
    assert fired == [("a", 10), ("b", 10)]


@pytest.mark.parametrize("interval", [0, -5, timedelta(microseconds=500)])
def test_interval_below_one_millisecond_is_rejected(interval) -> None:
    with pytest.raises(ValueError, match="minimum supported scheduling interval is 1 millisecond"):
        validate_interval(interval)


def test_schedule_rejects_a_non_callable_punctuator_naming_the_node() -> None:
    class Bad(Processor):
        def init(self, context) -> None:
            context.schedule(10, PunctuationType.STREAM_TIME, "not callable")

        def process(self, record) -> None:
            pass

    topology = Topology().add_source("src", "in").add_processor("bad-node", Bad, "src")
    with pytest.raises(Exception, match="bad-node") as info:
        TopologyTestDriver(topology)
    assert "callable" in str(info.value)


def test_unknown_alignment_is_rejected() -> None:
    with pytest.raises(ValueError, match="align"):
        start_time(PunctuationType.STREAM_TIME, 10, "sideways", 0)


def test_schedules_resume_their_rhythm_after_a_restart() -> None:
    """Next fire times are committed task state: a new task with that state keeps them."""
    first = Recorder(5 * S, PunctuationType.STREAM_TIME)
    with driver_for(first) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        for t in (1 * S, 8 * S):
            inp.pipe_input("k", "v", timestamp=t)
        committed = driver.committed_state("0_0")
    assert committed.schedules == {"proc#0:stream_time:5000": 10 * S}
    assert committed.stream_time == 8 * S

    from streamtide.log.api import LogRecord
    from streamtide.runtime.stream_task import StreamTask

    second = Recorder(5 * S, PunctuationType.STREAM_TIME)
    topology = Topology().add_source("src", "in").add_processor("proc", lambda: second, "src")

    class Sink:
        def partitions_for(self, topic: str) -> int:
            return 1

        def send(self, *args) -> None:
            pass

    restored = StreamTask(topology, 0, 0, Sink(), committed=committed).initialize()
    # 9 s would fire a fresh epoch-aligned schedule (time 0); the restored one waits for 10 s
    restored.add_records("in", [LogRecord(b"k", b"v", 9 * S, (), 2)])
    restored.process()
    assert second.calls == []
    restored.add_records("in", [LogRecord(b"k", b"v", 10 * S, (), 3)])
    restored.process()
    assert second.calls == [10 * S]
    restored.close()
