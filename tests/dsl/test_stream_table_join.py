"""``KStream.join`` / ``left_join`` with a ``KTable``: Kafka's KStreamKTableJoinTest,
KStreamKTableLeftJoinTest and StreamTableJoinIntegrationTest (cache off), through the test
driver, plus KIP-962's None keys."""

from __future__ import annotations

import random

import pytest

from streamtide import Consumed, Joined, Produced, Serdes, StreamsBuilder, TopologyError
from streamtide.testing import TopologyTestDriver
from tests.dsl.table_support import INT, STRING, config

KEYS = [0, 1, 2, 3]


def to_string_joiner(a, b) -> str:
    return f"{'null' if a is None else a}+{'null' if b is None else b}"


class JoinRun:
    """A stream ``streamTopic`` joined with a table ``tableTopic`` (int keys, str values)."""

    def __init__(self, left: bool) -> None:
        builder = StreamsBuilder()
        consumed = Consumed.with_(INT, STRING)
        stream = builder.stream("streamTopic", consumed)
        table = builder.table("tableTopic", consumed)
        join = stream.left_join if left else stream.join
        join(table, to_string_joiner).to("out", Produced.with_(INT, STRING))
        self.topology = builder.build()
        self.driver = TopologyTestDriver(self.topology, config(INT, STRING))
        self.stream = self.driver.create_input_topic("streamTopic", INT, STRING)
        self.table = self.driver.create_input_topic("tableTopic", INT, STRING)
        self.out = self.driver.create_output_topic("out", INT, STRING)
        self.random = random.Random(7)

    def push_to_stream(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.stream.pipe_input(KEYS[i], f"{prefix}{KEYS[i]}", timestamp=i)

    def push_to_table(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.table.pipe_input(
                KEYS[i], f"{prefix}{KEYS[i]}", timestamp=self.random.randrange(2**31)
            )

    def push_null_values_to_table(self, count: int) -> None:
        for i in range(count):
            self.table.pipe_input(KEYS[i], None, timestamp=0)

    def take(self) -> list[tuple]:
        return [(r.key, r.value, r.timestamp) for r in self.out.read_records()]


@pytest.fixture
def inner():
    run = JoinRun(left=False)
    yield run
    run.driver.close()


@pytest.fixture
def left():
    run = JoinRun(left=True)
    yield run
    run.driver.close()


def test_join_requires_co_partitioned_topics(inner) -> None:
    """shouldRequireCopartitionedStreams."""
    assert [g for g, _ in inner.topology.copartition_groups] == [
        frozenset({"streamTopic", "tableTopic"})
    ]


def test_no_join_with_an_empty_table(inner) -> None:
    """shouldNotJoinWithEmptyTableOnStreamUpdates."""
    inner.push_to_stream(2, "X")
    assert inner.take() == []


def test_table_updates_never_join(inner) -> None:
    """shouldNotJoinOnTableUpdates."""
    inner.push_to_stream(2, "X")
    assert inner.take() == []
    inner.push_to_table(2, "Y")
    assert inner.take() == []
    inner.push_to_stream(4, "X")
    assert inner.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
    inner.push_to_table(4, "YY")
    assert inner.take() == []
    inner.push_to_stream(4, "X")
    assert inner.take() == [(0, "X0+YY0", 0), (1, "X1+YY1", 1), (2, "X2+YY2", 2), (3, "X3+YY3", 3)]
    inner.push_to_table(4, "YYY")
    assert inner.take() == []


def test_join_only_if_the_table_has_the_key(inner) -> None:
    """shouldJoinOnlyIfMatchFoundOnStreamUpdates."""
    inner.push_to_table(2, "Y")
    assert inner.take() == []
    inner.push_to_stream(4, "X")
    assert inner.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]


def test_a_table_tombstone_removes_the_key(inner) -> None:
    """shouldClearTableEntryOnNullValueUpdates."""
    inner.push_to_table(4, "Y")
    inner.push_to_stream(4, "X")
    assert inner.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+Y2", 2), (3, "X3+Y3", 3)]
    inner.push_null_values_to_table(2)
    assert inner.take() == []
    inner.push_to_stream(4, "XX")
    assert inner.take() == [(2, "XX2+Y2", 2), (3, "XX3+Y3", 3)]


@pytest.mark.parametrize("key, value", [(None, "A"), (1, None)])
def test_inner_join_drops_a_none_key_or_value(inner, key, value) -> None:
    """shouldLogAndMeterWhenSkippingNullLeftKey / ...NullLeftValue."""
    inner.push_to_table(2, "Y")
    inner.stream.pipe_input(key, value, timestamp=0)
    assert inner.take() == []
    assert inner.driver.metrics()["dropped-records"] == 1


def test_left_join_with_an_empty_table(left) -> None:
    """shouldJoinWithEmptyTableOnStreamUpdates."""
    left.push_to_stream(2, "X")
    assert left.take() == [(0, "X0+null", 0), (1, "X1+null", 1)]


def test_left_join_table_updates_never_join(left) -> None:
    """shouldNotJoinOnTableUpdates (left join)."""
    left.push_to_stream(2, "X")
    assert left.take() == [(0, "X0+null", 0), (1, "X1+null", 1)]
    left.push_to_table(2, "Y")
    assert left.take() == []
    left.push_to_stream(4, "X")
    assert left.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+null", 2), (3, "X3+null", 3)]
    left.push_to_table(4, "YY")
    assert left.take() == []
    left.push_to_stream(4, "X")
    assert left.take() == [(0, "X0+YY0", 0), (1, "X1+YY1", 1), (2, "X2+YY2", 2), (3, "X3+YY3", 3)]
    left.push_to_table(4, "YYY")
    assert left.take() == []


def test_left_join_regardless_of_a_match(left) -> None:
    """shouldJoinRegardlessIfMatchFoundOnStreamUpdates."""
    left.push_to_table(2, "Y")
    assert left.take() == []
    left.push_to_stream(4, "X")
    assert left.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+null", 2), (3, "X3+null", 3)]


def test_left_join_after_a_table_tombstone(left) -> None:
    """shouldClearTableEntryOnNullValueUpdates (left join)."""
    left.push_to_table(4, "Y")
    left.push_to_stream(4, "X")
    assert left.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+Y2", 2), (3, "X3+Y3", 3)]
    left.push_null_values_to_table(2)
    assert left.take() == []
    left.push_to_stream(4, "XX")
    assert left.take() == [
        (0, "XX0+null", 0),
        (1, "XX1+null", 1),
        (2, "XX2+Y2", 2),
        (3, "XX3+Y3", 3),
    ]


def test_left_join_joins_a_none_key_with_none_and_drops_a_none_value(left) -> None:
    """KIP-962: a left join keeps a record with a None key (joined with None); a None value
    is still dropped."""
    left.push_to_table(2, "Y")
    left.stream.pipe_input(None, "A", timestamp=5)
    left.stream.pipe_input(1, None, timestamp=6)
    assert left.take() == [(None, "A+null", 5)]
    assert left.driver.metrics()["dropped-records"] == 1


# ---- StreamTableJoinIntegrationTest (non-versioned table, cache off) --------------------------

INTEGRATION_INPUT = [
    ("left", None, 1), ("right", None, 2), ("left", "A", 3), ("right", "a", 4),
    ("left", "B", 5), ("right", "b", 6), ("left", None, 7), ("right", None, 8),
    ("left", "C", 9), ("right", "c", 10), ("right", None, 11), ("left", None, 12),
    ("right", None, 13), ("right", "d", 7), ("left", "D", 6), ("left", None, 2),
    ("right", None, 3), ("right", "e", 14), ("left", "E", 15), ("left", None, 10),
    ("right", None, 9), ("left", "F", 4), ("right", "f", 3),
]  # fmt: skip


def _integration_run(left: bool) -> list[list[tuple]]:
    builder = StreamsBuilder()
    stream = builder.stream("left", Consumed.with_(Serdes.long(), STRING))
    table = builder.table("right", Consumed.with_(Serdes.long(), STRING))
    join = stream.left_join if left else stream.join
    join(table, lambda a, b: f"{a}-{'null' if b is None else b}").to(
        "out", Produced.with_(Serdes.long(), STRING)
    )
    base = 1_000_000
    steps = []
    with TopologyTestDriver(builder.build(), config(Serdes.long(), STRING)) as driver:
        topics = {t: driver.create_input_topic(t, Serdes.long(), STRING) for t in ("left", "right")}
        out = driver.create_output_topic("out", Serdes.long(), STRING)
        for topic, value, ts in INTEGRATION_INPUT:
            topics[topic].pipe_input(0, value, timestamp=base + ts)
            steps.append([(r.value, r.timestamp - base) for r in out.read_records()])
    return steps


def _expected(results: dict[int, tuple]) -> list[list[tuple]]:
    return [[results[i]] if i in results else [] for i in range(len(INTEGRATION_INPUT))]


def test_integration_inner() -> None:
    """StreamTableJoinIntegrationTest.testInner."""
    assert _integration_run(False) == _expected({4: ("B-a", 5), 14: ("D-d", 6), 18: ("E-e", 15)})


def test_integration_left() -> None:
    """StreamTableJoinIntegrationTest.testLeft."""
    assert _integration_run(True) == _expected(
        {
            2: ("A-null", 3),
            4: ("B-a", 5),
            8: ("C-null", 9),
            14: ("D-d", 6),
            18: ("E-e", 15),
            21: ("F-null", 4),
        }
    )


# ---- build-time checks ---------------------------------------------------------------------


def test_a_key_changed_stream_is_repartitioned_before_the_join() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("clicks", Consumed.with_(STRING, STRING)).select_key(lambda k, v: v)
    table = builder.table("users", Consumed.with_(STRING, STRING))
    stream.join(table, lambda a, b: a + b, Joined.with_(STRING, STRING, STRING).with_name("enrich"))
    topology = builder.build()
    assert "enrich-repartition" in topology.internal_topics
    assert [g for g, _ in topology.copartition_groups] == [
        frozenset({"enrich-repartition", "users"})
    ]
    with TopologyTestDriver(topology, config()) as driver:
        driver.create_input_topic("users", STRING, STRING).pipe_input("u1", "Ann", timestamp=1)
        driver.create_input_topic("clicks", STRING, STRING).pipe_input("c1", "u1", timestamp=2)


def test_joining_something_else_is_a_clear_error() -> None:
    stream = StreamsBuilder().stream("s")
    with pytest.raises(TypeError, match="cannot be joined with str"):
        stream.join("not a table", lambda a, b: a)


def test_a_table_of_another_builder_is_refused() -> None:
    stream = StreamsBuilder().stream("s")
    with pytest.raises(TopologyError, match="same StreamsBuilder"):
        stream.join(StreamsBuilder().table("t"), lambda a, b: a)


def test_a_windowed_table_cannot_be_joined() -> None:
    from streamtide import TimeWindows

    builder = StreamsBuilder()
    stream = builder.stream("s", Consumed.with_(STRING, STRING))
    windowed = stream.group_by_key().windowed_by(TimeWindows.of_size(1000)).count()
    with pytest.raises(TopologyError, match="windowed aggregation"):
        builder.stream("t", Consumed.with_(STRING, STRING)).join(windowed, lambda a, b: a)
