"""Time windows against the reference (SEMANTICS 4, 4b): tumbling and hopping windows with
grace, result timestamps, emit on update and on window close, windowed ``distinct``, and
sliding windows."""

from __future__ import annotations

from typing import Any

from tests.against_reference.inputs import (
    S,
    events,
    on_driver_and_engine,
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


test_time_windows_on_the_test_driver, test_time_windows_on_the_engine = on_driver_and_engine(
    "time_windows", lambda: window_plan(final=False), events(none_values=True)
)
test_time_windows_closing_on_the_test_driver, test_time_windows_closing_on_the_engine = (
    on_driver_and_engine(
        "time_windows_closing", lambda: window_plan(final=True), events(none_values=True)
    )
)
