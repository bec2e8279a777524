"""``StreamsBuilder.table``: Kafka's KTableSourceTest, through the test driver."""

from __future__ import annotations

from streamtide import Consumed, Materialized, Produced, Serdes, StreamsBuilder
from streamtide.state.timestamped import ValueAndTimestamp
from streamtide.testing import TopologyTestDriver
from tests.dsl.table_support import INT, STRING, C, capture, config


def test_a_table_forwards_every_update_and_tombstones() -> None:
    """testKTable."""
    builder = StreamsBuilder()
    builder.table("topic1", Consumed.with_(STRING, INT)).to_stream().to(
        "out", Produced.with_(STRING, INT)
    )
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("topic1", STRING, INT)
        records = [("A", 1, 10), ("B", 2, 11), ("C", 3, 12), ("D", 4, 13)]
        records += [("A", None, 14), ("B", None, 15)]
        for key, value, ts in records:
            inp.pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic("out", STRING, INT)
        assert [(r.key, r.value, r.timestamp) for r in out.read_records()] == records


def test_a_record_with_a_none_key_is_dropped_and_counted() -> None:
    """kTableShouldLogAndMeterOnSkippedRecords."""
    builder = StreamsBuilder()
    table = builder.table("topic", Consumed.with_(STRING, STRING))
    captured = capture(builder, table.node)
    with TopologyTestDriver(builder.build(), config()) as driver:
        driver.create_input_topic("topic", STRING, STRING).pipe_input(None, "value", timestamp=0)
        assert captured.take() == []
        assert driver.metrics()["dropped-records"] == 1


def test_the_store_holds_the_latest_value_and_its_timestamp() -> None:
    """testValueGetter: out-of-order updates still replace the value (a plain store)."""
    builder = StreamsBuilder()
    builder.table("topic1", Consumed.with_(STRING, STRING), Materialized.as_("store"))
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("topic1", STRING, STRING)
        store = driver.get_key_value_store("store")

        def values() -> list:
            return [store.get_with_timestamp(k) for k in "ABC"]

        inp.pipe_input("A", "01", timestamp=10)
        inp.pipe_input("B", "01", timestamp=20)
        inp.pipe_input("C", "01", timestamp=15)
        vt = ValueAndTimestamp
        assert values() == [vt("01", 10), vt("01", 20), vt("01", 15)]
        inp.pipe_input("A", "02", timestamp=30)
        inp.pipe_input("B", "02", timestamp=5)
        assert values() == [vt("02", 30), vt("02", 5), vt("01", 15)]
        inp.pipe_input("A", "03", timestamp=29)
        assert values() == [vt("03", 29), vt("02", 5), vt("01", 15)]
        inp.pipe_input("A", None, timestamp=50)
        inp.pipe_input("B", None, timestamp=3)
        assert values() == [None, None, vt("01", 15)]
        assert store.get("C") == "01"


def _old_values_run(send_old_values: bool) -> list:
    builder = StreamsBuilder()
    table = builder.table("topic1", Consumed.with_(STRING, STRING))
    if send_old_values:
        assert table.origin.enable_sending_old_values(True)
    captured = capture(builder, table.node)
    steps = []
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("topic1", STRING, STRING)
        for batch in [
            [("A", "01", 10), ("B", "01", 20), ("C", "01", 15)],
            [("A", "02", 8), ("B", "02", 22)],
            [("A", "03", 12)],
            [("A", None, 15), ("B", None, 20)],
        ]:
            for key, value, ts in batch:
                inp.pipe_input(key, value, timestamp=ts)
            steps.append(captured.take())
    return steps


def test_without_old_values_updates_carry_only_the_new_value() -> None:
    """testNotSendingOldValue."""
    assert _old_values_run(False) == [
        [("A", C("01"), 10), ("B", C("01"), 20), ("C", C("01"), 15)],
        [("A", C("02"), 8), ("B", C("02"), 22)],
        [("A", C("03"), 12)],
        [("A", C(None), 15), ("B", C(None), 20)],
    ]


def test_with_old_values_updates_carry_the_previous_value() -> None:
    """testSendingOldValue."""
    assert _old_values_run(True) == [
        [("A", C("01"), 10), ("B", C("01"), 20), ("C", C("01"), 15)],
        [("A", C("02", "01"), 8), ("B", C("02", "01"), 22)],
        [("A", C("03", "02"), 12)],
        [("A", C(None, "03"), 15), ("B", C(None, "02"), 20)],
    ]


def test_the_source_topic_is_the_changelog_of_the_store() -> None:
    builder = StreamsBuilder()
    builder.table("users", Consumed.with_(STRING, STRING), Materialized.as_("users-store"))
    topology = builder.build()
    assert topology.source_changelog_topic("users-store") == "users"
    assert topology.changelog_topic("users-store", "app") == "users"
    with TopologyTestDriver(topology, config()) as driver:
        driver.create_input_topic("users", STRING, STRING).pipe_input("a", "x", timestamp=1)
        driver.commit()
        assert not any("changelog" in t for t in driver.produced_topic_names())


def test_an_unmaterialized_table_has_no_store_until_a_lookup_needs_one() -> None:
    builder = StreamsBuilder()
    table = builder.table("users", Consumed.with_(STRING, STRING))
    assert table.store_name is None
    assert not builder.build().store_builders
    table.origin.view()
    assert table.store_name == "users-STATE-STORE-0000000000"
    assert builder.build().source_changelog_topic(table.store_name) == "users"


def test_different_serdes_in_consumed_and_materialized_are_refused() -> None:
    import pytest

    from streamtide import TopologyError

    with pytest.raises(TopologyError, match="different value serdes"):
        StreamsBuilder().table(
            "t",
            Consumed.with_(STRING, STRING),
            Materialized.as_("s").with_value_serde(Serdes.json()),
        )
