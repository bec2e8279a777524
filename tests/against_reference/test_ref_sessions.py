"""Session windows against the reference (SEMANTICS 4, 4b, 5): merging with tombstones,
count/reduce/aggregate with a merger, late records under ``until(retention)`` (emitted, not
stored), emit on window close, session ``distinct``, and the grace rule of windows built
with ``of_inactivity_gap_and_grace``."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given

from tests.against_reference.harness import Event
from tests.against_reference.inputs import (
    DRIVER,
    ENGINE,
    S,
    check_driver,
    check_engine,
    engine_runs,
    events,
    on_driver_and_engine,
)
from tests.reference import Plan, SessionWindowSpec


def session_plan() -> Plan:
    plan = Plan()
    g = plan.stream("in").group_by_key()
    seed = g.windowed_by(SessionWindowSpec(5 * S, retention=20 * S))
    seed.count("counts").to_stream().to("counts", "windowed", "long")
    seed.reduce(
        lambda a, v: {"n": a["n"] + v["n"], "i": max(a["i"], v["i"])}, "sums"
    ).to_stream().to("sums", "windowed")
    g.windowed_by(SessionWindowSpec(4 * S)).aggregate(
        lambda: [],
        lambda k, v, agg: [*agg, v["n"]],
        "lists",
        merger=lambda k, a, b: [*a, *b],
    ).to_stream().to("lists", "windowed")
    g.windowed_by(SessionWindowSpec(4 * S, retention=15 * S)).distinct("distinct").to_stream().to(
        "distinct", "windowed"
    )
    return plan


def final_session_plan() -> Plan:
    plan = Plan()
    g = plan.stream("in").group_by_key()
    g.windowed_by(SessionWindowSpec(3 * S, grace=2 * S)).emit_on_window_close().count(
        "grace-final"
    ).to_stream().to("grace-final", "windowed", "long")
    g.windowed_by(SessionWindowSpec(5 * S, retention=8 * S)).emit_on_window_close().aggregate(
        lambda: 0,
        lambda k, v, a: a + v["n"],
        "until-final",
        merger=lambda k, a, b: a + b,
        value="long",
    ).to_stream().to("until-final", "windowed", "long")
    return plan


def grace_rule_plan() -> Plan:
    plan = Plan()
    g = plan.stream("in").group_by_key()
    g.windowed_by(SessionWindowSpec(3 * S, grace=2 * S)).count("grace").to_stream().to(
        "grace", "windowed", "long"
    )
    g.windowed_by(SessionWindowSpec(2 * S, grace=0)).distinct("grace-distinct").to_stream().to(
        "grace-distinct", "windowed"
    )
    final = g.windowed_by(SessionWindowSpec(2 * S, retention=9 * S, grace=1 * S))
    final.emit_on_window_close().count("grace-final").to_stream().to(
        "grace-final", "windowed", "long"
    )
    return plan


test_sessions_on_the_test_driver, test_sessions_on_the_engine = on_driver_and_engine(
    "sessions", session_plan, events(none_values=True)
)
test_sessions_closing_on_the_test_driver, test_sessions_closing_on_the_engine = (
    on_driver_and_engine("sessions_closing", final_session_plan, events(none_values=True))
)


#: SEMANTICS 5's grace acceptance case: the last record is dropped
GRACE_CASE = [
    Event("in", key, {"n": 1, "i": i}, second * S)
    for i, (key, second) in enumerate([("a", 1_000), ("b", 1_300), ("a", 1_001)])
]


@DRIVER
@given(found=events())
@example(found=GRACE_CASE)
def test_the_session_grace_rule_on_the_test_driver(found: Any) -> None:
    check_driver(grace_rule_plan, found)


@ENGINE
@given(run=engine_runs(events()))
def test_the_session_grace_rule_on_the_engine(run: Any) -> None:
    check_engine(grace_rule_plan, run)
