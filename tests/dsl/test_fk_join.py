"""Foreign-key table joins (KIP-213) through the test driver: the scenarios of Kafka's
KTableKTableForeignKeyJoinIntegrationTest, for the inner and the left join, with and
without a materialized result and with a key join of the result back onto the left table
("rejoin"). Kafka's test reads the output as a map (the last value per key); these cases
check that map and, for every key in it, the timestamp of its last record: the larger of
the left row's and the foreign row's, or the foreign update's."""

from __future__ import annotations

import pytest

from streamtide import (
    Consumed,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    StreamsConfig,
    TableJoined,
    TopologyError,
)
from streamtide.dsl.fk_wire import combined_key
from streamtide.testing import TopologyTestDriver

S = Serdes.string()
BASE = 1_000
LEFT, RIGHT, OUTPUT, REJOIN = "left_table", "right_table", "output-topic", "rejoin-output-topic"


def _split(value: str) -> str:
    return value.split("|")[1]


def topology(left_join: bool, materialized: bool, rejoin: bool, extractor=_split):
    builder = StreamsBuilder()
    left = builder.table(LEFT, Consumed.with_(S, S))
    right = builder.table(RIGHT, Consumed.with_(S, S))
    stored = Materialized.as_("store").with_value_serde(S) if materialized else None

    def joiner(a, b):
        return f"({a},{'null' if b is None else b})"

    join = left.left_join if left_join else left.join
    fk_join = join(right, extractor, joiner, stored)
    fk_join.to_stream().to(OUTPUT, Produced.with_(S, S))
    if rejoin:
        rejoin_join = fk_join.left_join if left_join else fk_join.join
        rejoined = rejoin_join(
            left,
            lambda a, b: f"rejoin({a},{b})",
            materialized=Materialized.as_("store-rejoin") if materialized else None,
        )
        rejoined.to_stream().to(REJOIN, Produced.with_(S, S))
    return builder.build()


class Run:
    """A driver with both input topics, the outputs read as maps with timestamps."""

    def __init__(self, driver: TopologyTestDriver, materialized: bool, rejoin: bool) -> None:
        self.driver = driver
        self.left = driver.create_input_topic(LEFT, S, S)
        self.right = driver.create_input_topic(RIGHT, S, S)
        self.out = driver.create_output_topic(OUTPUT, S, S)
        self.rejoin_out = driver.create_output_topic(REJOIN, S, S) if rejoin else None
        self.materialized = materialized

    def output(self, topic=None) -> dict:
        """key -> (last value, its timestamp), as readKeyValuesToMap with timestamps."""
        records = (topic or self.out).read_records()
        return {r.key: (r.value, r.timestamp) for r in records}

    def store(self) -> dict | None:
        if not self.materialized:
            return None
        return dict(self.driver.get_key_value_store("store").all())


def _driver(left_join, materialized, rejoin, extractor=_split) -> TopologyTestDriver:
    config = StreamsConfig(application_id="fk", default_key_serde=S, default_value_serde=S)
    return TopologyTestDriver(topology(left_join, materialized, rejoin, extractor), config)


def _values(output: dict) -> dict:
    return {key: value for key, (value, _) in output.items()}


CASES = [
    pytest.param(left_join, materialized, rejoin, id=f"{kind}-{mat}-{re}")
    for left_join, kind in ((True, "left"), (False, "inner"))
    for materialized, mat in ((True, "materialized"), (False, "plain"))
    for rejoin, re in ((True, "rejoin"), (False, "no-rejoin"))
]


@pytest.mark.parametrize(("left_join", "materialized", "rejoin"), CASES)
def test_doJoinFromLeftThenDeleteLeftEntity(left_join, materialized, rejoin) -> None:
    with _driver(left_join, materialized, rejoin) as driver:
        run = Run(driver, materialized, rejoin)
        run.right.pipe_input("rhs1", "rhsValue1", timestamp=BASE)
        run.right.pipe_input("rhs2", "rhsValue2", timestamp=BASE + 1)
        run.right.pipe_input("rhs3", "rhsValue3", timestamp=BASE + 2)
        assert run.output() == {}
        assert run.store() in ({}, None)

        run.left.pipe_input("lhs1", "lhsValue1|rhs1", timestamp=BASE + 3)
        run.left.pipe_input("lhs2", "lhsValue2|rhs2", timestamp=BASE + 4)
        expected = {
            "lhs1": ("(lhsValue1|rhs1,rhsValue1)", BASE + 3),
            "lhs2": ("(lhsValue2|rhs2,rhsValue2)", BASE + 4),
        }
        assert run.output() == expected
        if rejoin:
            assert _values(run.output(run.rejoin_out)) == {
                "lhs1": "rejoin((lhsValue1|rhs1,rhsValue1),lhsValue1|rhs1)",
                "lhs2": "rejoin((lhsValue2|rhs2,rhsValue2),lhsValue2|rhs2)",
            }
        assert run.store() in (_values(expected), None)

        run.left.pipe_input("lhs3", "lhsValue3|rhs1", timestamp=BASE + 5)
        assert run.output() == {"lhs3": ("(lhsValue3|rhs1,rhsValue1)", BASE + 5)}
        if rejoin:
            assert _values(run.output(run.rejoin_out)) == {
                "lhs3": "rejoin((lhsValue3|rhs1,rhsValue1),lhsValue3|rhs1)"
            }
        assert run.store() in (
            {
                "lhs1": "(lhsValue1|rhs1,rhsValue1)",
                "lhs2": "(lhsValue2|rhs2,rhsValue2)",
                "lhs3": "(lhsValue3|rhs1,rhsValue1)",
            },
            None,
        )

        run.left.pipe_input("lhs1", None, timestamp=BASE + 6)
        assert run.output() == {"lhs1": (None, BASE + 6)}
        if rejoin:
            assert _values(run.output(run.rejoin_out)) == {"lhs1": None}
        assert run.store() in (
            {"lhs2": "(lhsValue2|rhs2,rhsValue2)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"},
            None,
        )


@pytest.mark.parametrize(("left_join", "materialized", "rejoin"), CASES)
def test_doJoinFromRightThenDeleteRightEntity(left_join, materialized, rejoin) -> None:
    with _driver(left_join, materialized, rejoin) as driver:
        run = Run(driver, materialized, rejoin)
        run.left.pipe_input("lhs1", "lhsValue1|rhs1", timestamp=BASE)
        run.left.pipe_input("lhs2", "lhsValue2|rhs2", timestamp=BASE + 1)
        run.left.pipe_input("lhs3", "lhsValue3|rhs1", timestamp=BASE + 2)
        half = {
            "lhs1": ("(lhsValue1|rhs1,null)", BASE),
            "lhs2": ("(lhsValue2|rhs2,null)", BASE + 1),
            "lhs3": ("(lhsValue3|rhs1,null)", BASE + 2),
        }
        assert run.output() == (half if left_join else {})
        assert run.store() in ((_values(half) if left_join else {}), None)

        run.right.pipe_input("rhs1", "rhsValue1", timestamp=BASE + 3)
        assert run.output() == {
            "lhs1": ("(lhsValue1|rhs1,rhsValue1)", BASE + 3),
            "lhs3": ("(lhsValue3|rhs1,rhsValue1)", BASE + 3),
        }
        joined_1 = {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"}
        assert run.store() in (
            ({**joined_1, "lhs2": "(lhsValue2|rhs2,null)"} if left_join else joined_1),
            None,
        )

        run.right.pipe_input("rhs2", "rhsValue2", timestamp=BASE + 4)
        assert run.output() == {"lhs2": ("(lhsValue2|rhs2,rhsValue2)", BASE + 4)}
        all_joined = {**joined_1, "lhs2": "(lhsValue2|rhs2,rhsValue2)"}
        assert run.store() in (all_joined, None)

        run.right.pipe_input("rhs3", "rhsValue3", timestamp=BASE + 5)
        assert run.output() == {}
        assert run.store() in (all_joined, None)

        run.right.pipe_input("rhs1", None, timestamp=BASE + 6)
        assert run.output() == {
            "lhs1": ("(lhsValue1|rhs1,null)" if left_join else None, BASE + 6),
            "lhs3": ("(lhsValue3|rhs1,null)" if left_join else None, BASE + 6),
        }
        left_only = {"lhs1": "(lhsValue1|rhs1,null)", "lhs3": "(lhsValue3|rhs1,null)"}
        assert run.store() in (
            (
                {**left_only, "lhs2": "(lhsValue2|rhs2,rhsValue2)"}
                if left_join
                else {"lhs2": "(lhsValue2|rhs2,rhsValue2)"}
            ),
            None,
        )


@pytest.mark.parametrize(("left_join", "materialized", "rejoin"), CASES)
def test_shouldEmitTombstoneWhenDeletingNonJoiningRecords(left_join, materialized, rejoin):
    with _driver(left_join, materialized, rejoin) as driver:
        run = Run(driver, materialized, rejoin)
        run.left.pipe_input("lhs1", "lhsValue1|rhs1", timestamp=BASE)
        expected = {"lhs1": ("(lhsValue1|rhs1,null)", BASE)} if left_join else {}
        assert run.output() == expected
        assert run.store() in (_values(expected), None)
        # an inner join's tombstone is unnecessary (it cannot know whether it emitted)
        run.left.pipe_input("lhs1", None, timestamp=BASE + 1)
        assert run.output() == {"lhs1": (None, BASE + 1)}
        assert run.store() in ({}, None)
        run.left.pipe_input("lhs1", None, timestamp=BASE + 2)
        assert run.output() == {}
        assert run.store() in ({}, None)


@pytest.mark.parametrize(("left_join", "materialized", "rejoin"), CASES)
def test_shouldNotEmitTombstonesWhenDeletingNonExistingRecords(left_join, materialized, rejoin):
    with _driver(left_join, materialized, rejoin) as driver:
        run = Run(driver, materialized, rejoin)
        run.left.pipe_input("lhs1", None, timestamp=BASE)
        assert run.output() == {}
        assert run.store() in ({}, None)


@pytest.mark.parametrize(("left_join", "materialized", "rejoin"), CASES)
def test_joinShouldProduceNullsWhenValueHasNonMatchingForeignKey(left_join, materialized, rejoin):
    with _driver(left_join, materialized, rejoin) as driver:
        run = Run(driver, materialized, rejoin)

        def half(fk: str, ts: int) -> dict:
            return {"lhs1": (f"(lhsValue1|{fk},null)" if left_join else None, ts)}

        run.left.pipe_input("lhs1", "lhsValue1|rhs1", timestamp=BASE)
        assert run.output() == ({"lhs1": ("(lhsValue1|rhs1,null)", BASE)} if left_join else {})
        # moving to another missing foreign key: an inner join's unnecessary tombstone
        run.left.pipe_input("lhs1", "lhsValue1|rhs2", timestamp=BASE + 1)
        assert run.output() == half("rhs2", BASE + 1)
        assert run.store() in (({"lhs1": "(lhsValue1|rhs2,null)"} if left_join else {}), None)
        run.left.pipe_input("lhs1", "lhsValue1|rhs3", timestamp=BASE + 2)
        assert run.output() == half("rhs3", BASE + 2)
        # a foreign row no left row refers to any more changes nothing
        run.right.pipe_input("rhs1", "rhsValue1", timestamp=BASE + 3)
        assert run.output() == {}
        assert run.store() in (({"lhs1": "(lhsValue1|rhs3,null)"} if left_join else {}), None)
        run.left.pipe_input("lhs1", "lhsValue1|rhs1", timestamp=BASE + 4)
        assert run.output() == {"lhs1": ("(lhsValue1|rhs1,rhsValue1)", BASE + 4)}
        assert run.store() in ({"lhs1": "(lhsValue1|rhs1,rhsValue1)"}, None)
        run.left.pipe_input("lhs1", "lhsValue1|rhs2", timestamp=BASE + 5)
        assert run.output() == half("rhs2", BASE + 5)
        assert run.store() in (({"lhs1": "(lhsValue1|rhs2,null)"} if left_join else {}), None)


@pytest.mark.parametrize(("left_join", "materialized", "rejoin"), CASES)
def test_shouldUnsubscribeOldForeignKeyIfLeftSideIsUpdated(left_join, materialized, rejoin):
    with _driver(left_join, materialized, rejoin) as driver:
        run = Run(driver, materialized, rejoin)
        run.right.pipe_input("rhs1", "rhsValue1", timestamp=BASE)
        run.right.pipe_input("rhs2", "rhsValue2", timestamp=BASE + 1)
        assert run.output() == {}
        run.left.pipe_input("lhs1", "lhsValue1|rhs1", timestamp=BASE + 2)
        assert run.output() == {"lhs1": ("(lhsValue1|rhs1,rhsValue1)", BASE + 2)}
        run.left.pipe_input("lhs1", "lhsValue1|rhs2", timestamp=BASE + 3)
        assert run.output() == {"lhs1": ("(lhsValue1|rhs2,rhsValue2)", BASE + 3)}
        assert run.store() in ({"lhs1": "(lhsValue1|rhs2,rhsValue2)"}, None)
        # the old foreign key's update reaches nobody
        run.right.pipe_input("rhs1", "rhsValue1Delta", timestamp=BASE + 4)
        assert run.output() == {}
        assert run.store() in ({"lhs1": "(lhsValue1|rhs2,rhsValue2)"}, None)


@pytest.mark.parametrize("materialized", [True, False])
@pytest.mark.parametrize("rejoin", [True, False])
def test_shouldEmitRecordOnNullForeignKeyForLeftJoins(materialized, rejoin) -> None:
    with _driver(True, materialized, rejoin, lambda value: None) as driver:
        run = Run(driver, materialized, rejoin)
        run.left.pipe_input("lhs1", "lhsValue1|rhs1", timestamp=BASE)
        assert run.output() == {"lhs1": ("(lhsValue1|rhs1,null)", BASE)}
        assert run.store() in ({"lhs1": "(lhsValue1|rhs1,null)"}, None)


@pytest.mark.parametrize("materialized", [True, False])
@pytest.mark.parametrize("rejoin", [True, False])
def test_shouldEmitRecordWhenOldAndNewFkDiffer(materialized, rejoin) -> None:
    def extractor(value: str):
        fk = _split(value)
        return None if fk == "returnNull" else fk

    with _driver(True, materialized, rejoin, extractor) as driver:
        run = Run(driver, materialized, rejoin)
        subscriptions = next(
            name for name in driver.topology.store_builders if name.endswith("-subscription-store")
        )
        store = driver.get_key_value_store(subscriptions)
        key = combined_key(b"rhs1", b"lhs1")
        run.left.pipe_input("lhs1", "lhsValue1|rhs1", timestamp=BASE)
        assert run.output() == {"lhs1": ("(lhsValue1|rhs1,null)", BASE)}
        assert run.store() in ({"lhs1": "(lhsValue1|rhs1,null)"}, None)
        assert store.get(key) is not None
        run.left.pipe_input("lhs1", "lhsValue1|returnNull", timestamp=BASE)
        assert run.output() == {"lhs1": ("(lhsValue1|returnNull,null)", BASE)}
        assert run.store() in ({"lhs1": "(lhsValue1|returnNull,null)"}, None)
        assert store.get(key) is None


def test_a_stream_aggregation_cannot_be_the_left_side() -> None:
    """Its updates carry no old values, so a row could never unsubscribe (refused at build
    time, as ``group_by`` of it is)."""
    builder = StreamsBuilder()
    counts = builder.stream("clicks", Consumed.with_(S, S)).group_by_key().count()
    right = builder.table(RIGHT, Consumed.with_(S, S))
    with pytest.raises(TopologyError, match="old values"):
        counts.join(right, str, lambda a, b: a)


def test_options_after_the_joiner_are_checked() -> None:
    builder = StreamsBuilder()
    left = builder.table(LEFT, Consumed.with_(S, S))
    right = builder.table(RIGHT, Consumed.with_(S, S))
    with pytest.raises(TypeError, match="TableJoined"):
        left.join(right, _split, lambda a, b: a, 42)
    with pytest.raises(TypeError, match="foreign-key joins"):
        left.join(right, lambda a, b: a, TableJoined.as_("x"))
    joined = left.join(right, _split, lambda a, b: a, "named", Materialized.as_("kept"))
    assert joined.store_name == "kept"
    assert "named-subscription-registration-topic" in builder.topology.internal_topics
