"""The reference interpreter computes every table of SEMANTICS with exactly its numbers.

These check the oracle, not the engine (the engine's own tests hold the same cases): an
oracle that got a table wrong would make the property tests compare against a wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from streamtide import PunctuationType, Record, Window, Windowed
from streamtide.processor import Processor
from tests.reference import (
    JoinWindowSpec,
    Plan,
    ReferenceRun,
    SessionWindowSpec,
    TimeWindowSpec,
)
from tests.reference.punctuation import PunctuationQueue

S = 1000


def outputs(run: ReferenceRun, topic: str = "out") -> list[tuple[Any, Any, int]]:
    return [(o.key, o.value, o.ts) for o in run.output(topic)]


def w(key: str, start_s: float, end_s: float) -> Windowed:
    return Windowed(key, Window(int(start_s * S), int(end_s * S)))


# ---- section 2: punctuation ---------------------------------------------------------------


class Recorder(Processor):
    """Schedules one punctuator; notes each call's timestamp; cancels itself after
    ``cancel_after`` calls when given."""

    fired: list[int]

    def __init__(self, interval: int, kind: PunctuationType, align: str, cancel_after: int | None):
        self.interval, self.kind, self.align, self.cancel_after = (
            interval,
            kind,
            align,
            cancel_after,
        )
        self.fired = []

    def init(self, context: Any) -> None:
        super().init(context)
        self.handle = context.schedule(self.interval, self.kind, self.punctuate, align=self.align)

    def process(self, record: Record) -> None:
        pass

    def punctuate(self, timestamp: int) -> None:
        self.fired.append(timestamp)
        if self.cancel_after is not None and len(self.fired) == self.cancel_after:
            self.handle.cancel()


def punctuation_run(
    interval: int,
    kind: PunctuationType = PunctuationType.STREAM_TIME,
    align: str = "epoch",
    cancel_after: int | None = None,
) -> tuple[ReferenceRun, Callable[[], Recorder], Callable[[], list[int | None]]]:
    made: list[Recorder] = []

    def supplier() -> Recorder:
        made.append(Recorder(interval, kind, align, cancel_after))
        return made[-1]

    plan = Plan()
    plan.stream("in").process(supplier)
    run = ReferenceRun(plan, wall_clock_per_record=True)
    task = run.tasks[(0, 0)]

    def next_times() -> list[int | None]:
        queue = task.wall_queue if kind is PunctuationType.WALL_CLOCK_TIME else task.stream_queue
        return [s.time for s in queue.schedules]

    return run, lambda: made[0], next_times


@pytest.mark.parametrize(
    "case, align, fires, next_after",
    [
        ("P1", "first-record", [1 * S, 8 * S], [6 * S, 6 * S, 11 * S, 11 * S]),
        ("P2", "epoch", [1 * S, 8 * S, 10 * S], [5 * S, 5 * S, 10 * S, 15 * S]),
    ],
)
def test_P1_P2_stream_time_punctuation(case, align, fires, next_after) -> None:
    run, recorder, next_times = punctuation_run(5 * S, align=align)
    seen = []
    for second in (1, 4, 8, 10):
        run.pipe("in", "a", {}, second * S)
        seen.append(next_times()[0])
    assert recorder().fired == fires
    assert seen == next_after


def test_P3_missed_intervals_are_skipped() -> None:
    queue = PunctuationQueue()
    fired: list[int] = []
    schedule = queue.add(5 * S, fired.append, 5 * S)
    queue.check(21 * S)
    assert fired == [21 * S]
    assert schedule.time == 25 * S


def test_P4_stream_time_never_fires_without_records() -> None:
    run, recorder, _ = punctuation_run(1 * S)
    run.advance_wall_clock(10 * S)
    assert recorder().fired == []


def test_P5_wall_clock_fires_once_for_one_big_step() -> None:
    run, recorder, next_times = punctuation_run(1 * S, PunctuationType.WALL_CLOCK_TIME)
    run.advance_wall_clock(3500)
    assert recorder().fired == [3500]
    assert next_times() == [4 * S]


def test_P6_a_punctuator_cancels_itself_on_its_second_call() -> None:
    run, recorder, next_times = punctuation_run(1 * S, cancel_after=2)
    for second in (0, 1, 2, 3):
        run.pipe("in", "a", {}, second * S)
    assert recorder().fired == [0, 1 * S]
    assert next_times() == []


# ---- section 3: deduplication ----------------------------------------------------------------

T = 100 * S


def dedup(records: list[tuple[Any, int]], interval: int = 10 * S, mode: str = "key") -> list:
    plan = Plan()
    stream = plan.stream("in")
    if mode == "key":
        stream.deduplicate_by_key(interval, "dedup").to("out")
    else:
        stream.deduplicate_by_key_value(lambda k, v: v["id"], interval, "dedup").to("out")
    run = ReferenceRun(plan)
    for key, ts in records:
        run.pipe("in", key, {"id": None} if mode != "key" else {}, ts)
    return [(o.key, o.ts) for o in run.output("out")]


@pytest.mark.parametrize(
    "case, times, forwarded",
    [
        ("D1", [T, T + 8 * S, T + 11 * S], [T, T + 11 * S]),
        ("D2", [T, T - 8 * S, T - 11 * S], [T, T - 11 * S]),
        ("D3", [5 * S, 15 * S, 16 * S], [5 * S, 16 * S]),
        ("D4", [15 * S, 5 * S, 4 * S], [15 * S, 4 * S]),
        ("D6", [20 * S, 25 * S, 11 * S, 9 * S], [20 * S, 9 * S]),
    ],
)
def test_D1_to_D6_one_id(case, times, forwarded) -> None:
    assert dedup([("a", t) for t in times]) == [("a", t) for t in forwarded]


def test_D5_interval_zero() -> None:
    assert dedup([("a", 5 * S), ("a", 5 * S), ("a", 6 * S)], interval=0) == [
        ("a", 5 * S),
        ("a", 6 * S),
    ]


def test_D7_D8_two_ids() -> None:
    assert dedup([("k1", 10 * S), ("k2", 20 * S), ("k1", 9 * S)]) == [
        ("k1", 10 * S),
        ("k2", 20 * S),
    ]
    assert dedup([("k1", 10 * S), ("k2", 21 * S), ("k1", 9 * S)]) == [
        ("k1", 10 * S),
        ("k2", 21 * S),
        ("k1", 9 * S),
    ]


def test_D9_D10_none_keys_and_ids_always_pass() -> None:
    assert dedup([(None, 1), (None, 1)]) == [(None, 1), (None, 1)]
    assert dedup([("k", 1), ("k", 1)], mode="key_value") == [("k", 1), ("k", 1)]


def test_D11_the_same_record_reprocessed_is_forwarded_again() -> None:
    plan = Plan()
    plan.stream("in").deduplicate_by_key(10 * S, "dedup").to("out")
    run = ReferenceRun(plan)
    run.append("in", "a", {}, 5 * S, partition=0)
    run.run_batch()
    task = run.tasks[(0, 0)]
    again = run.logs["in"][0][0]  # partition 0, offset 0, as read after a crash
    task.process(task.nodes[run.graph.sources(0)[0].id], again)
    assert [(o.key, o.ts) for o in run.output("out")] == [("a", 5 * S), ("a", 5 * S)]


# ---- sections 4 and 4b: windowed distinct, result timestamps --------------------------------

W_INPUT = [4, 5, 6, 23, 22, 24, 34, 33, 32, 7, 22, 35]


@pytest.mark.parametrize(
    "case, windows, emitted",
    [
        (
            "W1",
            TimeWindowSpec(10 * S),
            [(w("k", 0, 10), 4), (w("k", 20, 30), 23), (w("k", 30, 40), 34)],
        ),
        ("W2", SessionWindowSpec(10 * S), [(w("k", 4, 4), 4), (w("k", 23, 23), 23)]),
        (
            "W3",
            SessionWindowSpec(9 * S),
            [(w("k", 4, 4), 4), (w("k", 23, 23), 23), (w("k", 34, 34), 34)],
        ),
    ],
)
def test_W1_to_W3_windowed_distinct(case, windows, emitted) -> None:
    plan = Plan()
    plan.stream("in").group_by_key().windowed_by(windows).distinct("d").to_stream().to(
        "out", "windowed"
    )
    run = ReferenceRun(plan)
    for second in W_INPUT:
        run.pipe("in", "k", second, second * S)
    assert [(o.key, o.value) for o in run.output("out")] == emitted


def test_4b_a_window_result_carries_the_largest_timestamp_seen() -> None:
    plan = Plan()
    plan.stream("in").group_by_key().windowed_by(TimeWindowSpec(10 * S)).count("c").to_stream().to(
        "out", "windowed", "long"
    )
    run = ReferenceRun(plan)
    for second in (5, 2, 7):
        run.pipe("in", "a", {}, second * S)
    assert outputs(run) == [
        (w("a", 0, 10), 1, 5 * S),
        (w("a", 0, 10), 2, 5 * S),
        (w("a", 0, 10), 3, 7 * S),
    ]


def test_4b_non_windowed_results_keep_the_larger_timestamp() -> None:
    plan = Plan()
    plan.stream("in").group_by_key().count("c").to_stream().to("out", "string", "long")
    run = ReferenceRun(plan)
    for second in (5, 2, 7):
        run.pipe("in", "a", {}, second * S)
    assert outputs(run) == [("a", 1, 5 * S), ("a", 2, 5 * S), ("a", 3, 7 * S)]


def test_4b_emit_on_window_close_emits_once_at_end_plus_grace() -> None:
    plan = Plan()
    windows = TimeWindowSpec(10 * S, grace=2 * S)
    grouped = plan.stream("in").group_by_key().windowed_by(windows).emit_on_window_close()
    grouped.count("c").to_stream().to("out", "windowed", "long")
    run = ReferenceRun(plan)
    for second in (5, 2, 11, 12):
        run.pipe("in", "a", {}, second * S)
    assert outputs(run) == [(w("a", 0, 10), 2, 5 * S)]  # at stream time 12 = end + grace


# ---- section 5: session windows --------------------------------------------------------------


def sessions(
    records: list[tuple[str, float]], windows: SessionWindowSpec, **run_args: Any
) -> tuple:
    plan = Plan()
    plan.stream("in").group_by_key().windowed_by(windows).count("sessions").to_stream().to(
        "out", "windowed", "long"
    )
    run = ReferenceRun(plan, **run_args)
    for key, second in records:
        if run_args.get("caching"):
            run.append("in", key, {}, int(second * S))
        else:
            run.pipe("in", key, {}, int(second * S))
    if run_args.get("caching"):
        run.run_batch()
    return [(o.key, o.value) for o in run.output("out")], run


GAP5 = SessionWindowSpec(5 * S)


@pytest.mark.parametrize(
    "case, records, emitted",
    [
        ("S1", [("a", 0), ("a", 3)], [(w("a", 0, 0), 1), (w("a", 0, 0), None), (w("a", 0, 3), 2)]),
        (
            "S2",
            [("a", 0), ("a", 20), ("a", 10)],
            [(w("a", 0, 0), 1), (w("a", 20, 20), 1), (w("a", 10, 10), 1)],
        ),
        (
            "S3",
            [("a", 0), ("a", 10), ("a", 5)],
            [
                (w("a", 0, 0), 1),
                (w("a", 10, 10), 1),
                (w("a", 0, 0), None),
                (w("a", 10, 10), None),
                (w("a", 0, 10), 3),
            ],
        ),
        ("S4", [("a", 0), ("b", 2)], [(w("a", 0, 0), 1), (w("b", 2, 2), 1)]),
    ],
)
def test_S1_to_S4(case, records, emitted) -> None:
    assert sessions(records, GAP5)[0] == emitted


def test_S5_a_late_record_is_emitted_not_stored() -> None:
    emitted, run = sessions([("a", 100), ("a", 50)], SessionWindowSpec(5 * S, retention=10 * S))
    assert emitted == [(w("a", 100, 100), 1), (w("a", 50, 50), 1)]
    assert run.store("sessions") == {("a", 100 * S, 100 * S): 1}


def test_5_the_cache_emits_no_tombstone_for_a_session_never_emitted() -> None:
    emitted, _ = sessions([("a", 0), ("a", 10), ("a", 5)], GAP5, caching=True)
    assert emitted == [(w("a", 0, 10), 3)]


def test_5_grace_rule_drops_a_record_whose_session_ends_too_early() -> None:
    records = [("a", 1000), ("b", 1300), ("a", 1001)]
    emitted, run = sessions(records, SessionWindowSpec(30 * S, grace=0))
    assert emitted == [(w("a", 1000, 1000), 1), (w("b", 1300, 1300), 1)]
    assert run.metrics()["dropped-records"] == 1


# ---- section 9: tables and joins ------------------------------------------------------------


def test_9_a_regrouping_that_keeps_the_group_sends_one_update() -> None:
    plan = Plan()
    table = plan.table("t", store="t")
    table.group_by(lambda k, v: (v["g"], v["n"]), "g").reduce(
        lambda a, v: a + v, lambda a, v: a - v, "sums"
    ).to_stream().to("out")
    run = ReferenceRun(plan)
    run.pipe("t", "k", {"g": "x", "n": 1}, 1)
    run.pipe("t", "k", {"g": "x", "n": 5}, 2)
    run.pipe("t", "k", {"g": "y", "n": 5}, 3)
    assert outputs(run) == [("x", 1, 1), ("x", 5, 2), ("x", 0, 3), ("y", 5, 3)]


def test_9_stream_table_left_join_joins_a_none_key_with_none() -> None:
    for left, expected in ((True, [(None, ["v", None], 1)]), (False, [])):
        plan = Plan()
        table = plan.table("t")
        plan.stream("in").join_table(table, lambda v, t: [v, t], left=left).to("out")
        run = ReferenceRun(plan)
        run.pipe("in", None, "v", 1)
        assert outputs(run) == expected


def test_9_global_join_keys_on_the_selector_and_drops_a_none_lookup() -> None:
    plan = Plan()
    users = plan.global_table("users", "users")
    plan.stream("in").join_global(
        users, lambda k, v: v.get("u"), lambda v, u: [v["n"], u], left=True
    ).to("out")
    run = ReferenceRun(plan)
    run.pipe("users", "alice", "NZ", 0)
    run.pipe("in", None, {"u": "alice", "n": 1}, 5)
    run.pipe("in", "x", {"u": "bob", "n": 2}, 6)
    run.pipe("in", "x", {"n": 3}, 7)
    assert outputs(run) == [(None, [1, "NZ"], 5), ("x", [2, None], 6)]


def test_9_left_join_emits_unjoined_results_when_the_window_closes_right_side_first() -> None:
    plan = Plan()
    windows = JoinWindowSpec(before=10, after=10, grace=0)
    left, right = plan.stream("l"), plan.stream("r")
    left.join_stream(right, lambda a, b: [a, b], windows, "outer_join", "j").to("out")
    run = ReferenceRun(plan)
    run.pipe("l", "k", "L", 100)
    run.pipe("r", "q", "R", 100)
    assert outputs(run) == []  # both wait for their windows to close
    run.pipe("l", "z", "late?", 111)  # stream time 111 > 100 + 10: both close, right first
    assert outputs(run) == [("q", [None, "R"], 100), ("k", ["L", None], 100)]
    run.pipe("r", "k", "old", 50)  # its window closed long ago: emitted at once
    assert outputs(run)[2:] == [("k", [None, "old"], 50)]


def test_9_join_results_carry_the_larger_timestamp() -> None:
    plan = Plan()
    left, right = plan.stream("l"), plan.stream("r")
    left.join_stream(right, lambda a, b: [a, b], JoinWindowSpec(10, 10), "join", "j").to("out")
    a, b = plan.table("ta"), plan.table("tb")
    a.join(b, lambda x, y: [x, y]).to_stream().to("tt")
    run = ReferenceRun(plan)
    run.pipe("l", "k", "L", 100)
    run.pipe("r", "k", "R", 95)
    run.pipe("ta", "k", "A", 7)
    run.pipe("tb", "k", "B", 3)
    run.pipe("tb", "k", None, 2)
    assert outputs(run) == [("k", ["L", "R"], 100)]
    assert outputs(run, "tt") == [("k", ["A", "B"], 7), ("k", None, 7)]
