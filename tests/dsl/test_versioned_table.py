"""Versioned tables (KIP-889, KIP-914) and stream-table joins against them (KIP-960):
Kafka's StreamTableJoinIntegrationTest versioned cases, through the test driver."""

from __future__ import annotations

import pytest

from streamtide import Consumed, Materialized, Produced, Serdes, Stores, StreamsBuilder
from streamtide.errors import TopologyError
from streamtide.state import VersionedRecord
from streamtide.testing import TopologyTestDriver
from tests.dsl.table_support import STRING, config

LONG = Serdes.long()
ANY_UNIQUE_KEY = 0
LEFT, RIGHT = "inputTopicLeft", "inputTopicRight"

#: AbstractJoinIntegrationTest's input: (topic, value, timestamp), all with one key
INPUT = [
    (LEFT, None, 1), (RIGHT, None, 2), (LEFT, "A", 3), (RIGHT, "a", 4), (LEFT, "B", 5),
    (RIGHT, "b", 6), (LEFT, None, 7), (RIGHT, None, 8), (LEFT, "C", 9), (RIGHT, "c", 10),
    (RIGHT, None, 11), (LEFT, None, 12), (RIGHT, None, 13),
    (RIGHT, "d", 7),  # out-of-order data with null as latest
    (LEFT, "D", 6), (LEFT, None, 2), (RIGHT, None, 3), (RIGHT, "e", 14), (LEFT, "E", 15),
    (LEFT, None, 10),  # out-of-order data with non-null as latest
    (RIGHT, None, 9), (LEFT, "F", 4), (RIGHT, "f", 3),
]  # fmt: skip


def versioned(name: str = "store", retention: int = 300_000) -> Materialized:
    return Materialized.as_(Stores.persistent_versioned_key_value_store(name, retention))


def run_join(left: bool) -> list[tuple[int, list]]:
    """The join's output after each input record (by its index), as Kafka's test reads it."""
    builder = StreamsBuilder()
    consumed = Consumed.with_(LONG, STRING)
    stream = builder.stream(LEFT, consumed)
    table = builder.table(RIGHT, consumed, versioned())
    joiner = lambda a, b: f"{a}-{b}"  # noqa: E731
    (stream.left_join if left else stream.join)(table, joiner).to(
        "output", Produced.with_(LONG, STRING)
    )
    results = []
    with TopologyTestDriver(builder.build(), config(LONG, STRING)) as driver:
        inputs = {t: driver.create_input_topic(t, LONG, STRING) for t in (LEFT, RIGHT)}
        out = driver.create_output_topic("output", LONG, STRING)
        for index, (topic, value, ts) in enumerate(INPUT):
            inputs[topic].pipe_input(ANY_UNIQUE_KEY, value, timestamp=ts)
            found = [(r.key, r.value, r.timestamp) for r in out.read_records()]
            if found:
                results.append((index, found))
    return results


def test_inner_with_versioned_store() -> None:
    """testInnerWithVersionedStore: each stream record joins the table as of its time."""
    assert run_join(left=False) == [
        (4, [(ANY_UNIQUE_KEY, "B-a", 5)]),
        (14, [(ANY_UNIQUE_KEY, "D-b", 6)]),
        (18, [(ANY_UNIQUE_KEY, "E-e", 15)]),
        (21, [(ANY_UNIQUE_KEY, "F-a", 4)]),
    ]


def test_left_with_versioned_store() -> None:
    """testLeftWithVersionedStore."""
    assert run_join(left=True) == [
        (2, [(ANY_UNIQUE_KEY, "A-None", 3)]),
        (4, [(ANY_UNIQUE_KEY, "B-a", 5)]),
        (8, [(ANY_UNIQUE_KEY, "C-None", 9)]),
        (14, [(ANY_UNIQUE_KEY, "D-b", 6)]),
        (18, [(ANY_UNIQUE_KEY, "E-e", 15)]),
        (21, [(ANY_UNIQUE_KEY, "F-a", 4)]),
    ]


def test_a_versioned_source_table_does_not_forward_out_of_order_updates() -> None:
    """KIP-914: an update older than the key's latest goes into the history only; one older
    than the history retention is not stored at all (and counted)."""
    builder = StreamsBuilder()
    builder.table("t", Consumed.with_(STRING, STRING), versioned("v", 15)).to_stream().to("out")
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("t", STRING, STRING)
        out = driver.create_output_topic("out", STRING, STRING)
        for key, value, ts in [("k", "v1", 10), ("k", "v3", 30), ("k", "v2", 20), ("k", "old", 5)]:
            inp.pipe_input(key, value, timestamp=ts)
        inp.pipe_input("k", None, timestamp=40)
        assert [(r.key, r.value, r.timestamp) for r in out.read_records()] == [
            ("k", "v1", 10),
            ("k", "v3", 30),
            ("k", None, 40),
        ]
        store = driver.get_versioned_key_value_store("v")
        assert store.get("k") is None
        assert store.get("k", 25) == VersionedRecord("v2", 20, 30)
        assert store.get("k", 35) == VersionedRecord("v3", 30, 40)
        assert store.get("k", 5) is None  # "old" came after the grace period (30 - 15)
        assert store.get("k", 24) is None  # older than the history retention (40 - 15)
        assert driver.metrics()["dropped-records"] == 1


def test_to_table_can_be_versioned_and_joined() -> None:
    builder = StreamsBuilder()
    prices = builder.stream("prices", Consumed.with_(STRING, LONG)).to_table(
        materialized=versioned("prices")
    )
    builder.stream("orders", Consumed.with_(STRING, LONG)).join(
        prices, lambda qty, price: qty * price
    ).to("totals", Produced.with_(STRING, LONG))
    with TopologyTestDriver(builder.build(), config()) as driver:
        price = driver.create_input_topic("prices", STRING, LONG)
        order = driver.create_input_topic("orders", STRING, LONG)
        price.pipe_input("apple", 3, timestamp=100)
        order.pipe_input("apple", 2, timestamp=150)
        price.pipe_input("apple", 5, timestamp=120)  # a late price change, before the order
        order.pipe_input("apple", 1, timestamp=110)  # a late order, before the change
        out = driver.create_output_topic("totals", STRING, LONG)
        assert [(r.key, r.value, r.timestamp) for r in out.read_records()] == [
            ("apple", 6, 150),
            ("apple", 3, 110),
        ]
        assert "table-test-prices-changelog" in driver.produced_topic_names()


def test_only_tables_from_topics_or_streams_can_be_versioned() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    with pytest.raises(TopologyError, match="versioned"):
        grouped.count(versioned("counts"))


def test_materialized_as_a_plain_supplier_names_the_store_and_kind() -> None:
    supplier = Stores.in_memory_key_value_store("mem")
    materialized = Materialized.as_(supplier)
    assert (materialized.store_name, materialized.store_type) == ("mem", "in_memory")
    assert materialized.versioned is None
