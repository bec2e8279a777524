"""Stream-global-table joins: Kafka's KStreamGlobalKTableJoinTest and
KStreamGlobalKTableLeftJoinTest through the test driver."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamtide import (
    Consumed,
    GlobalKTable,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TopologyError,
)
from streamtide.testing import TopologyTestDriver
from tests.dsl.stream_join_support import KEYS, to_string_joiner


def foreign_key(key: int | None, value: str) -> str | None:
    """The table key is the second comma-separated part of the stream value, if any."""
    parts = value.split(",")
    return parts[1] if len(parts) > 1 else None


class GlobalJoin:
    """``streamTopic`` (int keys) joined with the global table of ``globalTopic``."""

    def __init__(self, left: bool) -> None:
        builder = StreamsBuilder()
        stream = builder.stream("streamTopic", Consumed.with_(Serdes.integer(), Serdes.string()))
        table = builder.global_table(
            "globalTopic", Consumed.with_(Serdes.string(), Serdes.string())
        )
        join = stream.left_join if left else stream.join
        join(table, foreign_key, to_string_joiner).to(
            "out", Produced.with_(Serdes.integer(), Serdes.string())
        )
        self.topology = builder.build()
        self.driver = TopologyTestDriver(self.topology)
        self.stream = self.driver.create_input_topic(
            "streamTopic", Serdes.integer(), Serdes.string()
        )
        self.table = self.driver.create_input_topic("globalTopic", Serdes.string(), Serdes.string())
        self.out = self.driver.create_output_topic("out", Serdes.integer(), Serdes.string())
        self.time = 0  # the stream topic's timestamps advance by 1 ms per record

    def push_to_stream(self, count: int, prefix: str, foreign: bool, null_key: bool) -> None:
        for i in range(count):
            value = f"{prefix}{KEYS[i]}" + (f",FKey{KEYS[i]}" if foreign else "")
            key = None if null_key and i == 0 else KEYS[i]
            self.stream.pipe_input(key, value, timestamp=self.time)
            self.time += 1

    def push_to_global_table(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.table.pipe_input(f"FKey{KEYS[i]}", f"{prefix}{KEYS[i]}", timestamp=0)

    def push_null_value_to_global_table(self, count: int) -> None:
        for i in range(count):
            self.table.pipe_input(f"FKey{KEYS[i]}", None, timestamp=0)

    def check(self, *expected: tuple) -> None:
        got = [(r.key, r.value, r.timestamp) for r in self.out.read_records()]
        assert got == list(expected)


@pytest.fixture(params=[False, True], ids=["join", "left_join"])
def case(request) -> Iterator[GlobalJoin]:
    case = GlobalJoin(left=request.param)
    case.left = request.param
    yield case
    case.driver.close()


@pytest.fixture
def inner() -> Iterator[GlobalJoin]:
    case = GlobalJoin(left=False)
    yield case
    case.driver.close()


@pytest.fixture
def left() -> Iterator[GlobalJoin]:
    case = GlobalJoin(left=True)
    yield case
    case.driver.close()


def test_should_not_require_copartitioning(case):
    assert case.topology.copartition_groups == []
    assert case.topology.source_topics() == ["streamTopic"]
    assert len(case.topology.subtopologies()) == 1
    described = str(case.topology.describe())
    assert "Global store: globalTopic-STATE-STORE-0000000001 (topic: globalTopic" in described


def test_should_not_join_with_empty_global_table_on_stream_updates(inner, left):
    inner.push_to_stream(2, "X", True, False)
    inner.check()
    left.push_to_stream(2, "X", True, False)
    left.check((0, "X0,FKey0+null", 0), (1, "X1,FKey1+null", 1))


def test_inner_join_should_not_join_on_global_table_updates(inner):
    inner.push_to_stream(2, "X", True, False)
    inner.check()
    inner.push_to_global_table(2, "Y")
    inner.check()
    inner.push_to_stream(4, "X", True, False)
    inner.check((0, "X0,FKey0+Y0", 2), (1, "X1,FKey1+Y1", 3))
    inner.push_to_global_table(4, "YY")
    inner.check()
    inner.push_to_stream(4, "X", True, False)
    inner.check(
        (0, "X0,FKey0+YY0", 6),
        (1, "X1,FKey1+YY1", 7),
        (2, "X2,FKey2+YY2", 8),
        (3, "X3,FKey3+YY3", 9),
    )
    inner.push_to_global_table(4, "YYY")
    inner.check()


def test_left_join_should_not_join_on_global_table_updates(left):
    left.push_to_stream(2, "X", True, False)
    left.check((0, "X0,FKey0+null", 0), (1, "X1,FKey1+null", 1))
    left.push_to_global_table(2, "Y")
    left.check()
    left.push_to_stream(4, "X", True, False)
    left.check(
        (0, "X0,FKey0+Y0", 2),
        (1, "X1,FKey1+Y1", 3),
        (2, "X2,FKey2+null", 4),
        (3, "X3,FKey3+null", 5),
    )
    left.push_to_global_table(4, "YY")
    left.check()
    left.push_to_stream(4, "X", True, False)
    left.check(
        (0, "X0,FKey0+YY0", 6),
        (1, "X1,FKey1+YY1", 7),
        (2, "X2,FKey2+YY2", 8),
        (3, "X3,FKey3+YY3", 9),
    )
    left.push_to_global_table(4, "YYY")
    left.check()


def test_should_join_only_if_match_found_on_stream_updates(inner, left):
    inner.push_to_global_table(2, "Y")
    inner.check()
    inner.push_to_stream(4, "X", True, False)
    inner.check((0, "X0,FKey0+Y0", 0), (1, "X1,FKey1+Y1", 1))
    left.push_to_global_table(2, "Y")
    left.check()
    left.push_to_stream(4, "X", True, False)
    left.check(
        (0, "X0,FKey0+Y0", 0),
        (1, "X1,FKey1+Y1", 1),
        (2, "X2,FKey2+null", 2),
        (3, "X3,FKey3+null", 3),
    )


def test_should_clear_global_table_entry_on_null_value_updates(case):
    case.push_to_global_table(4, "Y")
    case.check()
    case.push_to_stream(4, "X", True, False)
    case.check(
        (0, "X0,FKey0+Y0", 0), (1, "X1,FKey1+Y1", 1), (2, "X2,FKey2+Y2", 2), (3, "X3,FKey3+Y3", 3)
    )
    case.push_null_value_to_global_table(2)
    case.check()
    case.push_to_stream(4, "XX", True, False)
    cleared = [(0, "XX0,FKey0+null", 4), (1, "XX1,FKey1+null", 5)] if case.left else []
    case.check(*cleared, (2, "XX2,FKey2+Y2", 6), (3, "XX3,FKey3+Y3", 7))
    assert (
        case.driver.get_key_value_store("globalTopic-STATE-STORE-0000000001").get("FKey0") is None
    )


def test_should_not_join_on_null_key_mapper_values(case):
    """A record whose key_selector returns None is dropped by both joins."""
    case.push_to_global_table(4, "Y")
    case.check()
    case.push_to_stream(4, "XXX", False, False)
    case.check()
    assert case.driver.metrics()["dropped-records"] == 4


def test_should_join_on_null_key_with_non_null_key_mapper_values(inner, left):
    inner.push_to_global_table(2, "Y")
    inner.push_to_stream(4, "X", True, True)
    inner.check((None, "X0,FKey0+Y0", 0), (1, "X1,FKey1+Y1", 1))
    left.push_to_global_table(4, "Y")
    left.push_to_stream(4, "X", True, True)
    left.check(
        (None, "X0,FKey0+Y0", 0),
        (1, "X1,FKey1+Y1", 1),
        (2, "X2,FKey2+Y2", 2),
        (3, "X3,FKey3+Y3", 3),
    )


def test_null_stream_value_is_dropped(case):
    case.push_to_global_table(1, "Y")
    case.stream.pipe_input(0, None, timestamp=0)
    case.check()
    assert case.driver.metrics()["dropped-records.null_key_or_value"] == 1


# ---- the API around it ---------------------------------------------------------------------


def test_global_table_store_name_serdes_and_topic_rules():
    builder = StreamsBuilder()
    table = builder.global_table(
        "users", materialized=Materialized.as_("users-store").with_value_serde(Serdes.json())
    )
    assert isinstance(table, GlobalKTable)
    assert (table.store_name, table.topic) == ("users-store", "users")
    spec = builder.topology.global_stores["users-store"]
    assert spec.value_serde is not None and spec.key_serde is None
    with pytest.raises(TopologyError, match="already read by this topology"):
        builder.global_table("users")
    with pytest.raises(TopologyError, match="is a global table's topic"):
        builder.stream("users")
    with pytest.raises(TopologyError, match="needs a topic name"):
        builder.global_table("")
    stream = builder.stream("clicks")
    with pytest.raises(TypeError, match="key_selector must be callable"):
        stream.join(table, None, to_string_joiner)
    with pytest.raises(TypeError, match="joiner must be callable"):
        stream.left_join(table, foreign_key)
    with pytest.raises(TopologyError, match="same StreamsBuilder"):
        StreamsBuilder().stream("x").join(table, foreign_key, to_string_joiner)
