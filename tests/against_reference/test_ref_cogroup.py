"""``cogroup`` (KIP-150) against the reference: three grouped streams with their own
aggregators in one store, one of them after a key change (through the store's repartition
topic), two of them from one source topic (their paths converge on the aggregation), with
and without the record cache, and a table operation below; the engine runs on 4 partitions,
with restarts and wiped state between batches."""

from __future__ import annotations

from typing import Any

from tests.against_reference.inputs import events, on_driver_and_engine
from tests.reference import Plan


def add_n(key: Any, value: Any, agg: Any) -> Any:
    return {"sum": agg["sum"] + value["n"], "seen": agg["seen"] + [value["i"]]}


def minus_n(key: Any, value: Any, agg: Any) -> Any:
    return {"sum": agg["sum"] - value["n"], "seen": agg["seen"]}


def count_rekeyed(key: Any, value: Any, agg: Any) -> Any:
    return {"sum": agg["sum"], "seen": agg["seen"] + [f"r{value['i']}"]}


def cogroup_plan() -> Plan:
    plan = Plan()
    clicks, views = plan.stream("clicks"), plan.stream("views")
    small = clicks.filter(lambda k, v: v["n"] < 5).group_by_key()
    large = clicks.filter(lambda k, v: v["n"] >= 5).group_by_key()
    rekeyed = views.select_key(lambda k, v: "abcd"[v["n"] % 4]).group_by_key()
    table = small.cogroup(
        [(large, minus_n), (rekeyed, count_rekeyed)],
        add_n,
        lambda: {"sum": 0, "seen": []},
        "cogrouped",
    )
    table.to_stream().to("cogrouped")
    table.filter(lambda k, v: v["sum"] > 3).to_stream().to("positive")
    return plan


test_cogroup_on_the_test_driver, test_cogroup_on_the_engine = on_driver_and_engine(
    "cogroup", cogroup_plan, events(topics=("clicks", "views")), partitions=(4,)
)
