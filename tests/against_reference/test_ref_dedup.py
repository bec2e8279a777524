"""Deduplication (SEMANTICS 3) against the reference: by key, by key and id, by id across
partitions (repartitioned by the id), and by key after a key change (repartitioned)."""

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
from tests.reference import Plan


def dedup_plan(none_ids: bool) -> Plan:
    plan = Plan()
    s = plan.stream("in")
    s.deduplicate_by_key(4 * S, "by-key").to("by-key")
    s.deduplicate_by_key_value(
        lambda k, v: None if none_ids and v["n"] == 9 else v["n"] % 3, 6 * S, "by-kv"
    ).to("by-kv")
    s.deduplicate(lambda k, v: None if none_ids and v["n"] == 8 else v["n"], 5 * S, "by-id").to(
        "by-id"
    )
    s.select_key(lambda k, v: f"g{v['n'] % 2}").deduplicate_by_key(3 * S, "rekeyed").to("rekeyed")
    return plan


@DRIVER
@given(found=events())
def test_deduplication_on_the_test_driver(found: Any) -> None:
    check_driver(lambda: dedup_plan(none_ids=True), found)


@ENGINE
@given(run=engine_runs(events()))
def test_deduplication_on_the_engine(run: Any) -> None:
    """No None ids: where a record without id lands among 4 partitions is up to chance."""
    check_engine(lambda: dedup_plan(none_ids=run.partitions == 1), run)
