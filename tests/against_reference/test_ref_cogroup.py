"""``cogroup`` (KIP-150) against the reference: three grouped streams with their own
aggregators in one store, one of them after a key change (through the store's repartition
topic), two of them from one source topic (their paths converge on the aggregation), with
and without the record cache, and a table operation below; the engine runs on 4 partitions,
with restarts and wiped state between batches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.against_reference.inputs import S, events, on_driver_and_engine
from tests.reference import Plan
from tests.reference.plan import SessionWindowSpec, SlidingWindowSpec, TimeWindowSpec


def add_n(key: Any, value: Any, agg: Any) -> Any:
    return {"sum": agg["sum"] + value["n"], "seen": agg["seen"] + [value["i"]]}


def minus_n(key: Any, value: Any, agg: Any) -> Any:
    return {"sum": agg["sum"] - value["n"], "seen": agg["seen"]}


def count_rekeyed(key: Any, value: Any, agg: Any) -> Any:
    return {"sum": agg["sum"], "seen": agg["seen"] + [f"r{value['i']}"]}


def cogrouped(plan: Plan, windows: Any = None, final: bool = False) -> Any:
    """Three grouped streams into one aggregation: small and large clicks by key (from one
    topic), views re-keyed; per key, or per window of ``windows``."""
    clicks, views = plan.stream("clicks"), plan.stream("views")
    small = clicks.filter(lambda k, v: v["n"] < 5).group_by_key()
    large = clicks.filter(lambda k, v: v["n"] >= 5).group_by_key()
    rekeyed = views.select_key(lambda k, v: "abcd"[v["n"] % 4]).group_by_key()
    return small.cogroup(
        [(large, minus_n), (rekeyed, count_rekeyed)],
        add_n,
        lambda: {"sum": 0, "seen": []},
        "cogrouped",
        windows=windows,
        merger=merge_sums if isinstance(windows, SessionWindowSpec) else None,
        final=final,
    )


def merge_sums(key: Any, left: Any, right: Any) -> Any:
    return {"sum": left["sum"] + right["sum"], "seen": left["seen"] + right["seen"]}


def cogroup_plan() -> Plan:
    plan = Plan()
    table = cogrouped(plan)
    table.to_stream().to("cogrouped")
    table.filter(lambda k, v: v["sum"] > 3).to_stream().to("positive")
    return plan


test_cogroup_on_the_test_driver, test_cogroup_on_the_engine = on_driver_and_engine(
    "cogroup", cogroup_plan, events(topics=("clicks", "views")), partitions=(4,)
)


def windowed_cogroup_plan(windows: Any, final: bool = False) -> Callable[[], Plan]:
    """The cogroup above cut into ``windows`` (KIP-150's windowed cogroups): per window, each
    input folds with its own aggregator into the one window store."""

    def plan_of() -> Plan:
        plan = Plan()
        cogrouped(plan, windows, final).to_stream().to("cogrouped", "windowed")
        return plan

    return plan_of


test_hopping_cogroup_on_the_test_driver, test_hopping_cogroup_on_the_engine = on_driver_and_engine(
    "hopping cogroup",
    windowed_cogroup_plan(TimeWindowSpec(10 * S, advance=5 * S, grace=2 * S)),
    events(topics=("clicks", "views")),
    partitions=(4,),
)
test_session_cogroup_on_the_test_driver, test_session_cogroup_on_the_engine = on_driver_and_engine(
    "session cogroup",
    windowed_cogroup_plan(SessionWindowSpec(4 * S, grace=3 * S)),
    events(topics=("clicks", "views")),
    partitions=(4,),
)
test_sliding_final_cogroup_on_the_test_driver, test_sliding_final_cogroup_on_the_engine = (
    on_driver_and_engine(
        "sliding final cogroup",
        windowed_cogroup_plan(SlidingWindowSpec(5 * S, grace=2 * S), final=True),
        events(topics=("clicks", "views")),
        partitions=(4,),
    )
)
