"""Time windows against the reference (SEMANTICS 4, 4b): tumbling and hopping windows with
grace, result timestamps, emit on update and on window close, windowed ``distinct``, and
sliding windows."""

from __future__ import annotations

from typing import Any

from hypothesis import given

from tests.against_reference.inputs import (
    DRIVER,
    ENGINE,
    S,
    check_driver,
    check_engine,
    engine_runs,
    events,
)
from tests.reference import Plan, SlidingWindowSpec, TimeWindowSpec


def window_plan(final: bool) -> Plan:
    plan = Plan()
    g = plan.stream("in").group_by_key()

    def windowed(spec: TimeWindowSpec | SlidingWindowSpec) -> Any:
        w = g.windowed_by(spec)
        return w.emit_on_window_close() if final else w

    windowed(TimeWindowSpec(10 * S, grace=3 * S)).count("tumbling").to_stream().to(
        "tumbling", "windowed", "long"
    )
    windowed(TimeWindowSpec(10 * S, advance=4 * S, grace=2 * S)).aggregate(
        lambda: 0, lambda k, v, a: a + v["n"], "hopping", value="long"
    ).to_stream().to("hopping", "windowed", "long")
    windowed(SlidingWindowSpec(5 * S, grace=2 * S)).count("sliding").to_stream().to(
        "sliding", "windowed", "long"
    )
    windowed(SlidingWindowSpec(3 * S)).aggregate(
        lambda: 0, lambda k, v, a: a + v["n"], "sliding-sum", value="long"
    ).to_stream().to("sliding-sum", "windowed", "long")
    if not final:
        g.windowed_by(TimeWindowSpec(5 * S, grace=1 * S)).distinct("distinct").to_stream().to(
            "distinct", "windowed"
        )
    return plan


@DRIVER
@given(found=events(none_values=True))
def test_time_windows_on_the_test_driver(found: Any) -> None:
    check_driver(lambda: window_plan(final=False), found)


@DRIVER
@given(found=events(none_values=True))
def test_time_windows_emitting_on_close_on_the_test_driver(found: Any) -> None:
    check_driver(lambda: window_plan(final=True), found)


@ENGINE
@given(run=engine_runs(events(none_values=True)))
def test_time_windows_on_the_engine(run: Any) -> None:
    check_engine(lambda: window_plan(final=False), run)


@ENGINE
@given(run=engine_runs(events(none_values=True)))
def test_time_windows_emitting_on_close_on_the_engine(run: Any) -> None:
    check_engine(lambda: window_plan(final=True), run)
