"""Grouped-stream aggregations against the reference: ``count``, ``reduce`` and
``aggregate`` by key, after ``group_by`` and after a key change (both repartitioned), with
None keys and values dropped; and the record cache collapsing updates per commit."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

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
from tests.reference import Plan, SessionWindowSpec, TimeWindowSpec


def aggregation_plan() -> Plan:
    plan = Plan()
    s = plan.stream("in")
    g = s.group_by_key()
    g.count("counts").to_stream().to("counts", value="long")
    g.reduce(lambda a, v: {"n": a["n"] + v["n"], "i": max(a["i"], v["i"])}, "sums").to_stream().to(
        "sums"
    )
    g.aggregate(lambda: [], lambda k, v, agg: ([*agg, v["n"]])[-4:], "lists").to_stream().to(
        "lists"
    )
    by_n = s.group_by(lambda k, v: None if v is None else f"n{v['n'] % 3}")
    by_n.count("by-n").to_stream().to("by-n", value="long")
    rekeyed = s.select_key(lambda k, v: None if v is None or v["n"] == 7 else f"m{v['n'] % 2}")
    rekeyed.group_by_key(value="json").aggregate(
        lambda: 0, lambda k, v, a: a + v["i"], "by-m", value="long"
    ).to_stream().to("by-m", value="long")
    return plan


def cached_plan() -> Plan:
    """Tables whose updates go through the record cache (SEMANTICS 5: collapsed per commit)."""
    plan = Plan()
    g = plan.stream("in").group_by_key()
    g.count("counts").to_stream().to("counts", value="long")
    g.windowed_by(TimeWindowSpec(10 * S, grace=5 * S)).count("windows").to_stream().to(
        "windows", "windowed", "long"
    )
    g.windowed_by(SessionWindowSpec(4 * S)).count("sessions").to_stream().to(
        "sessions", "windowed", "long"
    )
    return plan


test_aggregations_on_the_test_driver, test_aggregations_on_the_engine = on_driver_and_engine(
    "aggregations", aggregation_plan, events(none_values=True)
)


@ENGINE
@given(run=engine_runs(events(), caching=True))
def test_cached_tables_emit_once_per_key_and_commit_on_the_engine(run: Any) -> None:
    check_engine(cached_plan, run)


@st.composite
def committed_in_pieces(draw: Any) -> tuple[list, list[int]]:
    found = draw(events())
    return found, sorted(set(draw(st.lists(st.integers(1, len(found)), max_size=4))))


@DRIVER
@given(case=committed_in_pieces())
def test_cached_tables_emit_once_per_key_and_commit_on_the_test_driver(case: Any) -> None:
    """The order too: keys in the order of their last update before the commit."""
    found, commits = case
    check_driver(cached_plan, found, commits=commits)
