"""Tables against the reference: a source table (materialized), ``filter``/``filter_not``
with and without old values (a ``group_by`` below switches them on), ``map_values``,
``to_stream``, and ``group_by`` with ``count``/``reduce``/``aggregate`` (adder and
subtractor, through a repartition topic)."""

from __future__ import annotations

import pytest

from tests.against_reference.harness import Event
from tests.against_reference.inputs import (
    check_driver,
    events,
    on_driver_and_engine,
)
from tests.reference import Plan


def table_plan() -> Plan:
    plan = Plan()
    t = plan.table("profiles", store="profiles")
    t.to_stream().to("updates")
    t.filter(lambda k, v: v["n"] % 2 == 0).to_stream().to("even")
    t.filter_not(lambda k, v: v["n"] > 6, store="small").to_stream().to("small")
    t.map_values(lambda v: {"m": v["n"] * 10}).to_stream().to("mapped")
    kept = t.filter(lambda k, v: v["n"] != 3)
    kept.to_stream().to("kept")
    kept.group_by(lambda k, v: (f"g{v['n'] % 3}", v["n"]), "by-rest", value="long").aggregate(
        lambda: 0, lambda k, v, a: a + v, lambda k, v, a: a - v, "sums", value="long"
    ).to_stream().to("sums", value="long")
    t.group_by(lambda k, v: None if v["n"] == 5 else (f"p{v['n'] % 2}", v), "by-parity").count(
        "counts"
    ).to_stream().to("counts", value="long")
    t.map_values(lambda v: v["i"]).group_by(lambda k, v: ("all", v), "all", value="long").reduce(
        lambda a, v: a + v, lambda a, v: a - v, "totals", value="long"
    ).to_stream().to("totals", value="long")
    return plan


TABLE_EVENTS = events(topics=("profiles",), tombstones=("profiles",))


test_tables_on_the_test_driver, test_tables_on_the_engine = on_driver_and_engine(
    "tables", table_plan, TABLE_EVENTS
)


def filtered_aggregation_plan() -> Plan:
    plan = Plan()
    g = plan.stream("in").group_by_key()
    g.count("counts").filter(lambda k, v: v % 2 == 0).to_stream().to("even-counts", value="long")
    return plan


@pytest.mark.xfail(
    strict=True,
    reason="a filter over a stream aggregation forwards a tombstone for every failing update, "
    "also for keys that never passed; in Kafka the filter asks its parent for old values when "
    "it is built (KTableFilter, KAFKA-10077) and a stream aggregation always has them, so only "
    "a key that passed before gets a tombstone",
)
def test_a_filter_over_a_stream_aggregation_forwards_no_spurious_tombstones() -> None:
    found = [Event("in", "a", {"n": 1, "i": i}, i * 1000) for i in range(3)]
    check_driver(filtered_aggregation_plan, found)
