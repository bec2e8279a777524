"""``KStream.to_table`` (KIP-523): Kafka's KStreamImplTest cases, through the test driver."""

from __future__ import annotations

from typing import Any

import pytest

from streamtide import Grouped, Materialized, Produced, Serdes, StreamsBuilder
from streamtide.errors import TopologyError
from streamtide.testing import TopologyTestDriver
from tests.dsl.table_support import INT, STRING, config

LONG = Serdes.long()
SIX = [("A", "01", 5), ("B", "02", 100), ("C", "03", 0), ("D", "04", 0), ("A", "05", 10)]
SIX.append(("A", "06", 8))


def pipe(driver: TopologyTestDriver, topic: str, records: list[tuple[Any, Any, int]]) -> None:
    inp = driver.create_input_topic(topic, STRING, STRING)
    for key, value, ts in records:
        inp.pipe_input(key, value, timestamp=ts)


def reader(driver: TopologyTestDriver, topic: str, key: Any = STRING, value: Any = STRING) -> Any:
    """A function giving what ``topic`` got since it was last called."""
    out = driver.create_output_topic(topic, key, value)
    return lambda: [(r.key, r.value, r.timestamp) for r in out.read_records()]


def read(driver: TopologyTestDriver, topic: str, key: Any = STRING, value: Any = STRING) -> list:
    return reader(driver, topic, key, value)()


def test_should_not_materialized_ktable_from_kstream() -> None:
    """shouldNotMaterializedKTableFromKStream: every record is an update; no store."""
    builder = StreamsBuilder()
    builder.stream("input").to_table().to_stream().to("output")
    topology = builder.build()
    assert topology.nodes["KSTREAM-TOTABLE-0000000001"].stores == []
    with TopologyTestDriver(topology, config()) as driver:
        pipe(driver, "input", SIX)
        assert read(driver, "output") == SIX


def test_should_materialize_ktable_from_kstream() -> None:
    """shouldMaterializeKTableFromKStream."""
    builder = StreamsBuilder()
    builder.stream("input").to_table(materialized=Materialized.as_("store"))
    with TopologyTestDriver(builder.build(), config()) as driver:
        pipe(driver, "input", [("A", "01", 0), ("B", "02", 0), ("A", "03", 0)])
        assert dict(driver.get_key_value_store("store").all()) == {"A": "03", "B": "02"}
        assert "table-test-store-changelog" in driver.produced_topic_names()


def test_should_support_key_change_ktable_from_kstream() -> None:
    """shouldSupportKeyChangeKTableFromKStream: a key change before ``to_table``
    repartitions through ``KSTREAM-TOTABLE-0000000002-repartition``."""
    builder = StreamsBuilder()
    builder.stream("input").map(lambda k, v: (ord(k[0]) - ord("A"), v)).to_table(
        materialized=Materialized.with_(INT, None)
    ).to_stream().to("output")
    topology = builder.build()
    assert "KSTREAM-TOTABLE-0000000002-repartition" in topology.internal_topics
    with TopologyTestDriver(topology, config()) as driver:
        pipe(driver, "input", SIX)
        expected = [(0, "01", 5), (1, "02", 100), (2, "03", 0), (3, "04", 0), (0, "05", 10)]
        assert read(driver, "output", INT) == [*expected, (0, "06", 8)]


def test_should_support_table_table_join_with_kstream_to_ktable() -> None:
    """shouldSupportTableTableJoinWithKStreamToKTable."""
    builder = StreamsBuilder()
    table1 = builder.stream("left").to_table()
    table2 = builder.stream("right").to_table()
    table1.join(table2, lambda a, b: f"{a}+{b}").to_stream().to("output")
    with TopologyTestDriver(builder.build(), config()) as driver:
        output = reader(driver, "output")
        pipe(driver, "right", [("lhs1", "rhsValue1", 0), ("rhs2", "rhsValue2", 0)])
        pipe(driver, "right", [("lhs3", "rhsValue3", 0)])
        assert output() == []
        pipe(driver, "left", [("lhs1", "lhsValue1", 0), ("lhs2", "lhsValue2", 0)])
        assert output() == [("lhs1", "lhsValue1+rhsValue1", 0)]
        pipe(driver, "left", [("lhs3", "lhsValue3", 0)])
        assert output() == [("lhs3", "lhsValue3+rhsValue3", 0)]
        pipe(driver, "left", [("lhs1", "lhsValue4", 0)])
        assert output() == [("lhs1", "lhsValue4+rhsValue1", 0)]


def test_should_support_stream_table_join_with_kstream_to_ktable() -> None:
    """shouldSupportStreamTableJoinWithKStreamToKTable: the join materializes the table."""
    builder = StreamsBuilder()
    stream = builder.stream("streamTopic")
    table = builder.stream("tableTopic").to_table()
    stream.join(table, lambda a, b: f"{a}+{b}").to("output")
    with TopologyTestDriver(builder.build(), config()) as driver:
        output = reader(driver, "output")
        rhs = [("lhs1", "rhsValue1", 0), ("rhs2", "rhsValue2", 0), ("lhs3", "rhsValue3", 0)]
        pipe(driver, "tableTopic", rhs)
        assert output() == []
        pipe(driver, "streamTopic", [("lhs1", "lhsValue1", 0), ("lhs2", "lhsValue2", 0)])
        assert output() == [("lhs1", "lhsValue1+rhsValue1", 0)]
        pipe(driver, "streamTopic", [("lhs3", "lhsValue3", 0)])
        assert output() == [("lhs3", "lhsValue3+rhsValue3", 0)]
        pipe(driver, "streamTopic", [("lhs1", "lhsValue4", 0)])
        assert output() == [("lhs1", "lhsValue4+rhsValue1", 0)]


def test_should_support_group_by_count_with_kstream_to_ktable() -> None:
    """shouldSupportGroupByCountWithKStreamToKTable: old values reach the re-grouping."""
    builder = StreamsBuilder()
    builder.stream("input").to_table().group_by(
        lambda k, v: (v, v), Grouped.with_(STRING, STRING)
    ).count().to_stream().to("output", Produced.with_(STRING, LONG))
    cfg = config()
    cfg.cache_max_bytes_buffering = 0
    with TopologyTestDriver(builder.build(), cfg) as driver:
        records = [("A", "green", 10), ("B", "green", 9), ("A", "blue", 12)]
        pipe(driver, "input", [*records, ("C", "yellow", 15), ("D", "green", 11)])
        assert read(driver, "output", STRING, LONG) == [
            ("green", 1, 10),
            ("green", 2, 10),
            ("green", 1, 12),
            ("blue", 1, 12),
            ("yellow", 1, 15),
            ("green", 2, 12),
        ]


def test_should_support_trigger_materialized_with_ktable_from_kstream() -> None:
    """shouldSupportTriggerMaterializedWithKTableFromKStream."""
    builder = StreamsBuilder()
    builder.stream("input").to_table().map_values(
        lambda v: ord(v[0]) - ord("a"),
        materialized=Materialized.as_("store").with_key_serde(STRING).with_value_serde(INT),
    ).to_stream().to("output", Produced.with_(STRING, INT))
    with TopologyTestDriver(builder.build(), config()) as driver:
        records = [("A", "green", 10), ("B", "green", 9), ("A", "blue", 12)]
        pipe(driver, "input", [*records, ("C", "yellow", 15), ("D", "green", 11)])
        store = driver.get_key_value_store("store")
        assert dict(store.all()) == {"A": 1, "B": 6, "C": 24, "D": 6}
        assert read(driver, "output", STRING, INT) == [
            ("A", 6, 10),
            ("B", 6, 9),
            ("A", 1, 12),
            ("C", 24, 15),
            ("D", 6, 11),
        ]


def test_a_none_key_is_dropped_and_a_none_value_deletes() -> None:
    """KTableSource's rules hold for a stream read as a table."""
    builder = StreamsBuilder()
    builder.stream("input").to_table("t", Materialized.as_("store")).to_stream().to("output")
    with TopologyTestDriver(builder.build(), config()) as driver:
        pipe(driver, "input", [(None, "x", 1), ("A", "a", 2), ("A", None, 3)])
        assert read(driver, "output") == [("A", "a", 2), ("A", None, 3)]
        assert list(driver.get_key_value_store("store").all()) == []
        assert driver.metrics()["dropped-records"] == 1


def test_to_table_names_and_arguments_are_checked() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("input")
    stream.to_table("my-table")
    with pytest.raises(TopologyError):
        stream.to_table("my-table")
