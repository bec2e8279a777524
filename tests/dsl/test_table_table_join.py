"""``KTable.join`` / ``left_join`` / ``outer_join``: Kafka's KTableKTableInnerJoinTest,
KTableKTableLeftJoinTest and KTableKTableOuterJoinTest, through the test driver."""

from __future__ import annotations

import pytest

from streamtide import Consumed, Materialized, Produced, StreamsBuilder
from streamtide.testing import TopologyTestDriver
from tests.dsl.table_support import INT, STRING, C, capture, config

KEYS = [0, 1, 2, 3]


def to_string_joiner(a, b) -> str:
    return f"{'null' if a is None else a}+{'null' if b is None else b}"


#: (topic, [(key, value, timestamp)]) for each step of all three tests
STEPS = [
    ("topic1", [(0, "X0", 5), (1, "X1", 6), (None, "SomeVal", 42)]),
    ("topic2", [(0, "Y0", 0), (1, "Y1", 10), (None, "AnotherVal", 73)]),
    ("topic1", [(k, f"XX{k}", 7) for k in KEYS]),
    ("topic2", [(k, f"YY{k}", k * 5) for k in KEYS]),
    ("topic1", [(k, f"XXX{k}", 6) for k in KEYS]),
    ("topic2", [(0, None, 5), (1, None, 7)]),
    ("topic1", [(k, f"XXXX{k}", 13) for k in KEYS]),
    ("topic1", [(0, None, 0), (1, None, 42), (2, None, 5), (3, None, 20)]),
]

#: what the joined table forwards at each step with old values sent (testSendingOldValue)
EXPECTED = {
    "inner": [
        [],
        [(0, C("X0+Y0"), 5), (1, C("X1+Y1"), 10)],
        [(0, C("XX0+Y0", "X0+Y0"), 7), (1, C("XX1+Y1", "X1+Y1"), 10)],
        [(0, C("XX0+YY0", "XX0+Y0"), 7), (1, C("XX1+YY1", "XX1+Y1"), 7),
         (2, C("XX2+YY2"), 10), (3, C("XX3+YY3"), 15)],
        [(0, C("XXX0+YY0", "XX0+YY0"), 6), (1, C("XXX1+YY1", "XX1+YY1"), 6),
         (2, C("XXX2+YY2", "XX2+YY2"), 10), (3, C("XXX3+YY3", "XX3+YY3"), 15)],
        [(0, C(None, "XXX0+YY0"), 6), (1, C(None, "XXX1+YY1"), 7)],
        [(2, C("XXXX2+YY2", "XXX2+YY2"), 13), (3, C("XXXX3+YY3", "XXX3+YY3"), 15)],
        [(2, C(None, "XXXX2+YY2"), 10), (3, C(None, "XXXX3+YY3"), 20)],
    ],
    "left": [
        [(0, C("X0+null"), 5), (1, C("X1+null"), 6)],
        [(0, C("X0+Y0", "X0+null"), 5), (1, C("X1+Y1", "X1+null"), 10)],
        [(0, C("XX0+Y0", "X0+Y0"), 7), (1, C("XX1+Y1", "X1+Y1"), 10),
         (2, C("XX2+null"), 7), (3, C("XX3+null"), 7)],
        [(0, C("XX0+YY0", "XX0+Y0"), 7), (1, C("XX1+YY1", "XX1+Y1"), 7),
         (2, C("XX2+YY2", "XX2+null"), 10), (3, C("XX3+YY3", "XX3+null"), 15)],
        [(0, C("XXX0+YY0", "XX0+YY0"), 6), (1, C("XXX1+YY1", "XX1+YY1"), 6),
         (2, C("XXX2+YY2", "XX2+YY2"), 10), (3, C("XXX3+YY3", "XX3+YY3"), 15)],
        [(0, C("XXX0+null", "XXX0+YY0"), 6), (1, C("XXX1+null", "XXX1+YY1"), 7)],
        [(0, C("XXXX0+null", "XXX0+null"), 13), (1, C("XXXX1+null", "XXX1+null"), 13),
         (2, C("XXXX2+YY2", "XXX2+YY2"), 13), (3, C("XXXX3+YY3", "XXX3+YY3"), 15)],
        [(0, C(None, "XXXX0+null"), 0), (1, C(None, "XXXX1+null"), 42),
         (2, C(None, "XXXX2+YY2"), 10), (3, C(None, "XXXX3+YY3"), 20)],
    ],
}  # fmt: skip
EXPECTED["outer"] = [list(step) for step in EXPECTED["left"][:-1]] + [
    [
        (0, C(None, "XXXX0+null"), 0),
        (1, C(None, "XXXX1+null"), 42),
        (2, C("null+YY2", "XXXX2+YY2"), 10),
        (3, C("null+YY3", "XXXX3+YY3"), 20),
    ]
]


def _build(kind: str, materialized: Materialized | None = None):
    builder = StreamsBuilder()
    consumed = Consumed.with_(INT, STRING)
    table1 = builder.table("topic1", consumed)
    table2 = builder.table("topic2", consumed)
    join = {"inner": table1.join, "left": table1.left_join, "outer": table1.outer_join}[kind]
    return builder, join(table2, to_string_joiner, materialized=materialized)


def _pipe_steps(builder: StreamsBuilder, on_step) -> None:
    with TopologyTestDriver(builder.build(), config(INT, STRING)) as driver:
        topics = {t: driver.create_input_topic(t, INT, STRING) for t in ("topic1", "topic2")}
        for topic, records in STEPS:
            for key, value, ts in records:
                topics[topic].pipe_input(key, value, timestamp=ts)
            on_step(driver)


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
@pytest.mark.parametrize("materialized", [False, True])
def test_join_output(kind, materialized) -> None:
    """testJoin / testQueryableJoin: the output topic, timestamps = max of both sides."""
    builder, joined = _build(kind, Materialized.as_("anyName") if materialized else None)
    joined.to_stream().to("output", Produced.with_(INT, STRING))
    assert [g for g, _ in builder.build().copartition_groups] == [frozenset({"topic1", "topic2"})]
    outputs = []
    final_store = {}
    topics = {}

    def on_step(driver) -> None:
        if not topics:
            topics["out"] = driver.create_output_topic("output", INT, STRING)
        out = topics["out"]
        outputs.append([(r.key, r.value, r.timestamp) for r in out.read_records()])
        if materialized:
            store = driver.get_key_value_store("anyName")
            final_store.clear()
            final_store.update({k: store.get_with_timestamp(k) for k in KEYS})

    _pipe_steps(builder, on_step)
    assert outputs == [[(k, c.new, ts) for k, c, ts in step] for step in EXPECTED[kind]]
    if materialized:
        if kind == "outer":
            assert [(k, v.value, v.timestamp) for k, v in final_store.items() if v] == [
                (2, "null+YY2", 10),
                (3, "null+YY3", 20),
            ]
        else:
            assert all(v is None for v in final_store.values())


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
@pytest.mark.parametrize("send_old_values", [False, True])
def test_join_changes(kind, send_old_values) -> None:
    """testSendingOldValue(s) / testNotSendingOldValue(s)."""
    builder, joined = _build(kind)
    if send_old_values:
        assert joined.origin.enable_sending_old_values(True)
    captured = capture(builder, joined.node)
    steps = []
    _pipe_steps(builder, lambda driver: steps.append(captured.take()))
    expected = EXPECTED[kind]
    if not send_old_values:
        expected = [[(k, C(c.new), ts) for k, c, ts in step] for step in expected]
    assert steps == expected


def test_a_joined_table_can_be_joined_by_a_stream_through_both_sides_stores() -> None:
    builder, joined = _build("left")
    view = joined.origin.view()
    assert set(view.store_names) == {
        "topic1-STATE-STORE-0000000000",
        "topic2-STATE-STORE-0000000003",
    }
    stream = builder.stream("clicks", Consumed.with_(INT, STRING))
    stream.join(joined, lambda a, b: f"{a}:{b}").to("out", Produced.with_(INT, STRING))
    with TopologyTestDriver(builder.build(), config(INT, STRING)) as driver:
        driver.create_input_topic("topic1", INT, STRING).pipe_input(1, "X", timestamp=1)
        driver.create_input_topic("topic2", INT, STRING).pipe_input(1, "Y", timestamp=2)
        driver.create_input_topic("clicks", INT, STRING).pipe_input(1, "c", timestamp=3)
        out = driver.create_output_topic("out", INT, STRING)
        assert out.read_key_values() == [(1, "c:X+Y")]
