"""Joins against the reference (SEMANTICS 1 and 9): stream-table (inner, left, a filtered
table, after a key change), stream-global table (inner, left), table-table (inner, left,
outer) and stream-stream (inner, left, outer; symmetric and one-sided windows with grace,
and a stream joined with a filtered copy of itself). Records of both sides reach a task in
the order of SEMANTICS 1, which the engine runs exercise across batches."""

from __future__ import annotations

from typing import Any

from tests.against_reference.harness import EngineRun, Event
from tests.against_reference.inputs import (
    S,
    check_engine,
    events,
    on_driver_and_engine,
)
from tests.reference import JoinWindowSpec, Plan


def pair(left: Any, right: Any) -> list:
    return [left and left["i"], right and right["i"]]


def stream_table_plan(rekeyed: bool = True) -> Plan:
    """With ``rekeyed``, a join after a key change too: its repartition topic is then read
    by the sub-topology that writes it (the table's)."""
    plan = Plan()
    clicks, users = plan.stream("clicks"), plan.table("users", store="users")
    clicks.join_table(users, pair).to("inner")
    clicks.join_table(users, pair, left=True).to("left")
    clicks.join_table(users.filter(lambda k, v: v["n"] % 2 == 0), pair).to("even")
    if rekeyed:
        clicks.select_key(lambda k, v: "abcd"[v["n"] % 4]).join_table(users, pair, left=True).to(
            "rekeyed"
        )
    countries = plan.global_table("countries", "countries")
    lookup = lambda k, v: None if v["n"] == 9 else "abcd"[v["n"] % 4]  # noqa: E731
    clicks.join_global(countries, lookup, pair).to("global")
    clicks.join_global(countries, lookup, pair, left=True).to("global-left")
    return plan


def rekeyed_join_plan() -> Plan:
    """A stream-table join after a key change, alone: the repartitioned stream meets the
    table in a sub-topology of its own."""
    plan = Plan()
    clicks, users = plan.stream("clicks"), plan.table("users", store="users")
    clicks.select_key(lambda k, v: "abcd"[v["n"] % 4]).join_table(users, pair, left=True).to(
        "rekeyed"
    )
    return plan


def table_table_plan() -> Plan:
    plan = Plan()
    a, b = plan.table("ta", store="ta"), plan.table("tb", store="tb")
    a.join(b, pair).to_stream().to("inner")
    a.join(b, pair, "left_join").to_stream().to("left")
    a.join(b, pair, "outer_join", store="outer").to_stream().to("outer")
    return plan


def stream_stream_plan() -> Plan:
    plan = Plan()
    left, right = plan.stream("left"), plan.stream("right")
    symmetric = JoinWindowSpec(3 * S, 3 * S, grace=2 * S)
    left.join_stream(right, pair, symmetric, "join", "inner").to("inner")
    left.join_stream(right, pair, symmetric, "left_join", "left").to("left-joined")
    left.join_stream(right, pair, JoinWindowSpec(4 * S, 4 * S), "outer_join", "outer").to("outer")
    evens = left.filter(lambda k, v: v["n"] % 2 == 0)
    odds = left.filter(lambda k, v: v["n"] % 2 == 1)
    evens.join_stream(
        odds, pair, JoinWindowSpec(5 * S, 5 * S, grace=1 * S), "outer_join", "self"
    ).to("self")
    return plan


def rekeyed_stream_join_plan() -> Plan:
    """A left join whose right side changed its key (repartitioned first)."""
    plan = Plan()
    left, right = plan.stream("left"), plan.stream("right")
    rekeyed = right.filter(lambda k, v: k is not None).select_key(lambda k, v: "abcd"[v["n"] % 4])
    left.join_stream(
        rekeyed, pair, JoinWindowSpec(2 * S, 2 * S, grace=3 * S), "left_join", "rekeyed"
    ).to("rekeyed")
    return plan


def one_sided_plan() -> Plan:
    """Windows with ``before != after`` (Kafka's outer-join emission check then differs by
    side: tested on its own)."""
    plan = Plan()
    left, right = plan.stream("left"), plan.stream("right")
    left.join_stream(right, pair, JoinWindowSpec(1 * S, 4 * S, grace=1 * S), "join", "after").to(
        "inner"
    )
    left.join_stream(right, pair, JoinWindowSpec(0, 3 * S), "left_join", "before").to("left-joined")
    return plan


STREAM_TABLE = events(
    topics=("clicks", "clicks", "users", "countries"), tombstones=("users", "countries")
)
TABLE_TABLE = events(topics=("ta", "tb"), tombstones=("ta", "tb"))
STREAM_STREAM = events(topics=("left", "right"))


test_stream_table_and_global_joins_on_the_test_driver = on_driver_and_engine(
    "stream_table_and_global_joins", stream_table_plan, STREAM_TABLE
)[0]
test_stream_table_and_global_joins_on_the_engine = on_driver_and_engine(
    "stream_table_and_global_joins", lambda: stream_table_plan(rekeyed=False), STREAM_TABLE
)[1]
test_a_stream_table_join_after_a_key_change_on_the_engine = on_driver_and_engine(
    "a_stream_table_join_after_a_key_change", rekeyed_join_plan, STREAM_TABLE
)[1]
test_table_table_joins_on_the_test_driver, test_table_table_joins_on_the_engine = (
    on_driver_and_engine("table_table_joins", table_table_plan, TABLE_TABLE)
)
test_stream_stream_joins_on_the_test_driver, test_stream_stream_joins_on_the_engine = (
    on_driver_and_engine("stream_stream_joins", stream_stream_plan, STREAM_STREAM)
)
(
    test_a_stream_stream_join_after_a_key_change_on_the_test_driver,
    test_a_stream_stream_join_after_a_key_change_on_the_engine,
) = on_driver_and_engine("a_rekeyed_stream_join", rekeyed_stream_join_plan, STREAM_STREAM)
test_one_sided_join_windows_on_the_test_driver, test_one_sided_join_windows_on_the_engine = (
    on_driver_and_engine("one_sided_join_windows", one_sided_plan, STREAM_STREAM)
)


def test_a_sub_topology_reading_its_own_repartition_topic_on_the_engine() -> None:
    """As in Kafka, the records come back in a later batch: the repartition topic is
    created with the count of the table it is co-partitioned with before the stage runs."""
    found = [
        Event("users", "a", {"n": 1, "i": 0}, 1_000),
        Event("clicks", "b", {"n": 4, "i": 1}, 2_000),
    ]
    check_engine(stream_table_plan, EngineRun([found]))


def versioned_join_plan() -> Plan:
    """Stream-table joins against a versioned table (KIP-960): each click sees the user as
    of its own timestamp; late and out-of-order updates of the table count for the clicks
    they precede, updates older than the history retention are dropped."""
    plan = Plan()
    clicks = plan.stream("clicks")
    users = plan.versioned_table("users", "users-v", history_retention=4 * S)
    clicks.join_table(users, pair).to("as-of")
    clicks.join_table(users, pair, left=True).to("as-of-left")
    users.to_stream().to("latest-users")
    return plan


VERSIONED_EVENTS = events(topics=("clicks", "users"), tombstones=("users",))

test_versioned_join_on_the_test_driver, test_versioned_join_on_the_engine = on_driver_and_engine(
    "versioned-join", versioned_join_plan, VERSIONED_EVENTS
)


def foreign_key_plan() -> Plan:
    """Foreign-key joins (KIP-213), inner and left, on one left table: the foreign key is
    one of the foreign table's keys, or None for ``n == 9``."""
    plan = Plan()
    orders, customers = plan.table("orders", store="orders"), plan.table("customers")
    fk = lambda v: None if v["n"] == 9 else "abcd"[v["n"] % 4]  # noqa: E731
    orders.fk_join(customers, fk, pair, "fk-inner").to_stream().to("fk-inner")
    orders.fk_join(customers, fk, pair, "fk-left", left=True, store="fk-left").to_stream().to(
        "fk-left"
    )
    return plan


FOREIGN_KEY = events(topics=("orders", "customers"), tombstones=("orders", "customers"))

test_foreign_key_joins_on_the_test_driver, test_foreign_key_joins_on_the_engine = (
    on_driver_and_engine("foreign_key_joins", foreign_key_plan, FOREIGN_KEY)
)
