"""The foreign-key join's processors one by one, as Kafka's unit tests take them:
SubscriptionSendProcessorSupplierTest and ResponseJoinProcessorSupplierTest on the operators
themselves (their output batch captured), SubscriptionReceiveProcessorSupplierTest,
SubscriptionJoinProcessorSupplierTest and ForeignTableJoinProcessorSupplierTests through the
test driver, subscriptions piped straight into the subscription topic and answers read from
the response topic.

Two cases differ from Kafka on purpose (``dsl.fk_join_operators.SubscriptionSendOperator``):
a left join's row moving between two foreign keys unsubscribes from the old one silently
(DELETE_KEY_NO_PROPAGATE, as an inner join does), where Kafka's old key answers
``joiner(value, None)`` from another partition than the new key's answer and can overwrite
it; an inner join's row whose old foreign key was None subscribes to None (answered with a
tombstone), where Kafka drops the update and the row's last result stays for good."""

from __future__ import annotations

from typing import Any

import pytest

from streamtide import Consumed, Produced, Serdes, StreamsBuilder, StreamsConfig
from streamtide.dsl.change import Change
from streamtide.dsl.fk_join_operators import ResponseJoinOperator, SubscriptionSendOperator
from streamtide.dsl.fk_wire import (
    DELETE_KEY_AND_PROPAGATE as DKAP,
)
from streamtide.dsl.fk_wire import (
    DELETE_KEY_NO_PROPAGATE as DKNP,
)
from streamtide.dsl.fk_wire import (
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE as PNIN,
)
from streamtide.dsl.fk_wire import (
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE as POIA,
)
from streamtide.dsl.fk_wire import (
    Response,
    ResponseSerde,
    Subscription,
    SubscriptionSerde,
    combined_key,
    value_hash,
)
from streamtide.dsl.table_view import TableView
from streamtide.processor.column_batch import ColumnBatch
from streamtide.state.timestamped import ValueAndTimestamp
from streamtide.testing import TopologyTestDriver

S, JSON = Serdes.string(), Serdes.json()


class Counters:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def increment(self, name: str, amount: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + amount

    def get(self, name: str) -> int:
        return self.counts.get(name, 0)


class Context:
    """What these operators read of a task's context (an edge of the unit test)."""

    default_key_serde = S
    default_value_serde = JSON

    def __init__(self) -> None:
        self.metrics = Counters()


def run(operator: Any, keys: list, values: list) -> tuple[list[tuple], Context]:
    """``operator`` over one batch (partition 0, timestamps 0): what it emits."""
    context = Context()
    operator.init(context)
    emitted: list[tuple] = []

    def emit(batch: ColumnBatch, child: Any = None) -> None:
        emitted.extend(zip(batch.keys, batch.values, batch.timestamps))

    operator.emit = emit
    n = len(keys)
    batch = ColumnBatch("topic", 0, None, list(range(n)), keys, values, [0] * n, [()] * n,
                        list(range(n)), [0] * n)  # fmt: skip
    operator.process_batch(batch)
    return emitted, context


def left_value(fk: str | None) -> dict:
    return {"fk": fk}


def h(value: Any) -> bytes | None:
    return value_hash(JSON.serialize(value))


def sub(fk: str | None, value: Any, instruction: int) -> tuple:
    return (fk, Subscription(h(value), instruction, b"pk", 0), 0)


def send(left_join: bool, new: Any, old: Any) -> tuple[list[tuple], Context]:
    operator = SubscriptionSendOperator(lambda v: v["fk"], left_join, S, JSON, S)
    return run(operator, ["pk"], [Change(new, old)])


FK1, FK2, NULL_FK = left_value("fk1"), left_value("fk2"), left_value(None)

#: SubscriptionSendProcessorSupplierTest: (test, left join, new, old, expected forwards)
SEND_CASES = [
    ("leftJoinShouldPropagateNewPrimaryKeyWithNonNullFK", True, FK1, None,
     [sub("fk1", FK1, PNIN)]),
    ("leftJoinShouldPropagateNewPrimaryKeyWithNullFK", True, NULL_FK, None,
     [sub(None, NULL_FK, PNIN)]),
    ("leftJoinShouldPropagateChangeOfFKFromNonNullToNonNullValue", True, FK2, FK1,
     [sub("fk1", FK2, DKNP), sub("fk2", FK2, PNIN)]),  # Kafka: DKAP (see the module)
    ("leftJoinShouldPropagateNewRecordOfUnchangedFK", True, FK1, FK1,
     [sub("fk1", FK1, PNIN)]),
    ("leftJoinShouldPropagateChangeOfFKFromNonNullToNullValue", True, NULL_FK, FK1,
     [sub("fk1", NULL_FK, DKAP), sub(None, NULL_FK, PNIN)]),
    ("leftJoinShouldPropagateChangeFromNullFKToNonNullFKValue", True, FK1, NULL_FK,
     [sub("fk1", FK1, PNIN)]),
    ("leftJoinShouldPropagateChangeFromNullFKToNullFKValue", True, NULL_FK, NULL_FK,
     [sub(None, NULL_FK, PNIN)]),
    ("leftJoinShouldPropagateDeletionOfAPrimaryKey", True, None, FK1,
     [sub("fk1", None, DKAP), sub(None, None, PNIN)]),
    ("leftJoinShouldPropagateDeletionOfAPrimaryKeyThatHadNullFK", True, None, NULL_FK,
     [sub(None, None, PNIN)]),
    ("leftJoinShouldPropagateNothingWhenOldAndNewLeftValueIsNull", True, None, None, []),
    ("innerJoinShouldPropagateNewPrimaryKey", False, FK1, None, [sub("fk1", FK1, POIA)]),
    ("innerJoinShouldNotPropagateNewPrimaryKeyWithNullFK", False, NULL_FK, None, []),
    ("innerJoinShouldDeleteOldAndPropagateNewFK", False, FK2, FK1,
     [sub("fk1", FK2, DKNP), sub("fk2", FK2, PNIN)]),
    # Kafka drops it: the row's result would then never change again (see the module)
    ("innerJoinShouldPropagateNothingWhenOldAndNewFKIsNull", False, NULL_FK, NULL_FK,
     [sub(None, NULL_FK, PNIN)]),
    ("innerJoinShouldPropagateDeletionOfPrimaryKey", False, None, FK1, [sub("fk1", None, DKAP)]),
    ("innerJoinShouldPropagateNothingWhenOldAndNewLeftValueIsNull", False, None, None, []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("left_join", "new", "old", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in SEND_CASES],
)
def test_SubscriptionSendProcessorSupplierTest(left_join, new, old, expected) -> None:
    emitted, context = send(left_join, new, old)
    assert emitted == expected
    dropped = 1 if not expected and new is not None else 0
    assert context.metrics.get("dropped-records") == dropped


def respond(left_join: bool, current: Any, response: Response) -> tuple[list[tuple], Context]:
    def make(context: Any):
        return lambda key: None if current is None else ValueAndTimestamp(current, 0)

    operator = ResponseJoinOperator(TableView((), make), S, lambda a, b: f"({a},{b})", left_join)
    return run(operator, ["lhs1"], [response])


def string_hash(value: str) -> bytes | None:
    return value_hash(S.serialize(value))


#: ResponseJoinProcessorSupplierTest: (test, left join, left value, hash of, foreign, output)
RESPONSE_CASES = [
    ("shouldNotForwardWhenHashDoesNotMatch", False, "lhsValue", "oldLhsValue", "rhsValue", None),
    ("shouldIgnoreUpdateWhenLeftHasBecomeNull", False, None, "lhsValue", "rhsValue", None),
    ("shouldForwardWhenHashMatches", False, "lhsValue", "lhsValue", "rhsValue",
     [("lhs1", "(lhsValue,rhsValue)", 0)]),
    ("shouldEmitTombstoneForInnerJoinWhenRightIsNull", False, "lhsValue", "lhsValue", None,
     [("lhs1", None, 0)]),
    ("shouldEmitResultForLeftJoinWhenRightIsNull", True, "lhsValue", "lhsValue", None,
     [("lhs1", "(lhsValue,None)", 0)]),
    ("shouldEmitTombstoneForLeftJoinWhenRightIsNullAndLeftIsNull", True, None, None, None,
     [("lhs1", None, 0)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("left_join", "current", "hashed", "foreign", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in RESPONSE_CASES],
)
def test_ResponseJoinProcessorSupplierTest(left_join, current, hashed, foreign, expected):
    hashed_value = None if hashed is None else string_hash(hashed)
    emitted, context = respond(left_join, current, Response(hashed_value, foreign, 0))
    assert emitted == (expected or [])
    assert context.metrics.get("dropped-records") == (0 if expected else 1)


# ---- the foreign side, through the driver ------------------------------------------------


class ForeignSide:
    """A foreign-key join whose subscription topic is piped directly and whose response
    topic is read directly, with the foreign table ``right``."""

    def __init__(self, driver: TopologyTestDriver, base: str) -> None:
        self.driver = driver
        self.subscriptions = driver.create_input_topic(
            f"{base}-subscription-registration-topic", S, SubscriptionSerde()
        )
        self.responses = driver.create_output_topic(
            f"{base}-subscription-response-topic", S, ResponseSerde(S)
        )
        self.right = driver.create_input_topic("right", S, S)
        self.store = driver.get_key_value_store(f"{base}-subscription-store")

    def subscribe(self, fk: str | None, instruction: int, pk: str, value_hash_: bytes, ts: int):
        self.subscriptions.pipe_input(
            fk, Subscription(value_hash_, instruction, pk.encode(), 0), timestamp=ts
        )

    def answers(self) -> list[tuple]:
        return [(r.key, r.value, r.timestamp) for r in self.responses.read_records()]

    def stored(self, fk: str, pk: str) -> Any:
        return self.store.get(combined_key(fk.encode(), pk.encode()))


@pytest.fixture
def foreign_side():
    builder = StreamsBuilder()
    left = builder.table("left", Consumed.with_(S, S))
    right = builder.table("right", Consumed.with_(S, S))
    joined = left.join(right, lambda v: v, lambda a, b: f"({a},{b})", "fk")
    joined.to_stream().to("out", Produced.with_(S, S))
    config = StreamsConfig(application_id="fk", default_key_serde=S, default_value_serde=S)
    with TopologyTestDriver(builder.build(), config) as driver:
        yield ForeignSide(driver, "fk")


HASH = b"\x01" * 16
#: the answer to pk1's subscription at time 3 when fk1 has no foreign row
ANSWER = ("pk1", Response(HASH, None, 0), 3)


@pytest.mark.parametrize(
    ("instruction", "answered"),
    [
        pytest.param(DKAP, True, id="shouldDeleteKeyAndPropagateV1"),
        pytest.param(DKNP, False, id="shouldDeleteKeyNoPropagateV1"),
        pytest.param(POIA, True, id="shouldPropagateOnlyIfFKValAvailableV1"),
        pytest.param(PNIN, True, id="shouldPropagateNullIfNoFKValAvailableV1"),
    ],
)
def test_SubscriptionReceiveProcessorSupplierTest(foreign_side, instruction, answered) -> None:
    """The store keeps a subscription unless the instruction deletes it; with the foreign
    row present every instruction but DELETE_KEY_NO_PROPAGATE answers (DELETE_KEY_AND_
    PROPAGATE with None), at the larger timestamp."""
    foreign_side.right.pipe_input("fk1", "foreignValue", timestamp=5)
    foreign_side.subscribe("fk1", PNIN, "pk1", HASH, 1)
    foreign_side.answers()
    foreign_side.subscribe("fk1", instruction, "pk1", HASH, 7)
    kept = foreign_side.stored("fk1", "pk1")
    if instruction in (DKAP, DKNP):
        assert kept is None
    else:
        assert SubscriptionSerde().deserialize(kept) == Subscription(HASH, instruction, b"pk1", 0)
    value = None if instruction == DKAP else "foreignValue"
    assert foreign_side.answers() == ([("pk1", Response(HASH, value, 0), 7)] if answered else [])


@pytest.mark.parametrize(
    ("instruction", "expected"),
    [
        pytest.param(DKAP, [ANSWER], id="shouldDeleteKeyAndPropagateFKV1"),
        pytest.param(POIA, [], id="shouldPropagateOnlyIfFKAvailableV1"),
        pytest.param(PNIN, [ANSWER], id="shouldPropagateNullIfNoFKAvailableV1"),
        pytest.param(DKNP, [], id="shouldDeleteKeyNoPropagateV1"),
    ],
)  # fmt: skip
def test_SubscriptionJoinProcessorSupplierTest_without_foreign_row(
    foreign_side, instruction, expected
) -> None:
    foreign_side.subscribe("fk1", instruction, "pk1", HASH, 3)
    assert foreign_side.answers() == expected


def test_SubscriptionJoinProcessorSupplierTest_null_foreign_key_touches_no_store(
    foreign_side,
) -> None:
    foreign_side.subscribe(None, PNIN, "pk1", HASH, 3)
    assert foreign_side.answers() == [("pk1", Response(HASH, None, 0), 3)]
    assert list(foreign_side.store.all()) == []
    foreign_side.subscribe(None, POIA, "pk1", HASH, 4)  # dropped: needs a foreign key
    assert foreign_side.answers() == []


def test_ForeignTableJoinProcessorSupplierTests(foreign_side) -> None:
    """shouldPropagateRightRecordForEachMatchingPrimaryKey, shouldPropagateNothingIfNo
    MatchingPrimaryKey, shouldPropagateTombstoneRightRecordForEachMatchingPrimaryKey,
    shouldNotMatchForeignKeysHavingThisFKAsPrefix, shouldIgnoreRecordWithNullKey."""
    other = b"\x02" * 16
    foreign_side.subscribe("fk1", POIA, "pk1", HASH, 1)
    foreign_side.subscribe("fk1", POIA, "pk2", other, 1)
    foreign_side.subscribe("fk10", POIA, "pk3", HASH, 1)
    assert foreign_side.answers() == []
    foreign_side.right.pipe_input("fk1", "value1", timestamp=10)
    assert foreign_side.answers() == [
        ("pk1", Response(HASH, "value1", 0), 10),
        ("pk2", Response(other, "value1", 0), 10),
    ]
    foreign_side.right.pipe_input("fk2", "value2", timestamp=11)
    assert foreign_side.answers() == []
    foreign_side.right.pipe_input("fk1", None, timestamp=12)
    assert foreign_side.answers() == [
        ("pk1", Response(HASH, None, 0), 12),
        ("pk2", Response(other, None, 0), 12),
    ]
    foreign_side.right.pipe_input(None, "value", timestamp=13)
    assert foreign_side.answers() == []
