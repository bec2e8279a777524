"""``KTable.filter``, ``filter_not``, ``map_values``, ``to_stream``: Kafka's KTableFilterTest
and KTableMapValuesTest, through the test driver (old values and lookups included)."""

from __future__ import annotations

import pytest

from streamtide import Consumed, Materialized, Produced, StreamsBuilder
from streamtide.state.timestamped import ValueAndTimestamp as VT
from streamtide.testing import TopologyTestDriver
from tests.dsl.table_support import INT, STRING, C, capture, config


def even(_key, value) -> bool:
    return value % 2 == 0


@pytest.mark.parametrize("materialize_filter", [False, True])
def test_filter_and_filter_not_pass_through(materialize_filter) -> None:
    """shouldPassThroughWithoutMaterialization / shouldPassThroughOnMaterialization: without
    old values every failing update is a tombstone, known key or not."""
    builder = StreamsBuilder()
    table = builder.table("topic1", Consumed.with_(STRING, INT))
    kept = table.filter(
        even, materialized=Materialized.as_("store2") if materialize_filter else None
    )
    dropped = table.filter_not(even)
    kept.to_stream().to("kept", Produced.with_(STRING, INT))
    dropped.to_stream().to("dropped", Produced.with_(STRING, INT))
    with TopologyTestDriver(builder.build(), config(STRING, INT)) as driver:
        inp = driver.create_input_topic("topic1", STRING, INT)
        for key, value, ts in [
            ("A", 1, 10),
            ("B", 2, 5),
            ("C", 3, 8),
            ("D", 4, 14),
            ("A", None, 18),
            ("B", None, 15),
        ]:
            inp.pipe_input(key, value, timestamp=ts)

        def read(topic):
            out = driver.create_output_topic(topic, STRING, INT)
            return [(r.key, r.value, r.timestamp) for r in out.read_records()]

        assert read("kept") == [
            ("A", None, 10),
            ("B", 2, 5),
            ("C", None, 8),
            ("D", 4, 14),
            ("A", None, 18),
            ("B", None, 15),
        ]
        assert read("dropped") == [
            ("A", 1, 10),
            ("B", None, 5),
            ("C", 3, 8),
            ("D", None, 14),
            ("A", None, 18),
            ("B", None, 15),
        ]


def test_lookups_of_filtered_tables() -> None:
    """shouldGetValuesOnMaterialization: a materialized filter's store, and an unmaterialized
    filter looked up through its parent."""
    builder = StreamsBuilder()
    table = builder.table("topic1", Consumed.with_(STRING, INT))
    kept = table.filter(even, materialized=Materialized.as_("store2"))
    dropped = table.filter_not(even)
    looked_up = dropped.origin.view()
    assert looked_up.store_names == (table.store_name,)
    with TopologyTestDriver(builder.build(), config(STRING, INT)) as driver:
        inp = driver.create_input_topic("topic1", STRING, INT)
        store2 = driver.get_key_value_store("store2")
        parent = driver.get_key_value_store(table.store_name)

        def get2(key):
            return store2.get_with_timestamp(key)

        def get3(key):  # the filter_not's lookup: its parent's value, filtered
            stored = parent.get_with_timestamp(key)
            return None if stored is None or even(key, stored.value) else stored

        for key, value, ts in [("A", 1, 5), ("B", 1, 10), ("C", 1, 15)]:
            inp.pipe_input(key, value, timestamp=ts)
        assert [get2(k) for k in "ABC"] == [None, None, None]
        assert [get3(k) for k in "ABC"] == [VT(1, 5), VT(1, 10), VT(1, 15)]
        inp.pipe_input("A", 2, timestamp=10)
        inp.pipe_input("B", 2, timestamp=5)
        assert [get2(k) for k in "ABC"] == [VT(2, 10), VT(2, 5), None]
        assert [get3(k) for k in "ABC"] == [None, None, VT(1, 15)]
        inp.pipe_input("A", 3, timestamp=15)
        assert [get2(k) for k in "ABC"] == [None, VT(2, 5), None]
        assert [get3(k) for k in "ABC"] == [VT(3, 15), None, VT(1, 15)]
        inp.pipe_input("A", None, timestamp=10)
        inp.pipe_input("B", None, timestamp=20)
        assert [get2(k) for k in "ABC"] == [None, None, None]
        assert [get3(k) for k in "ABC"] == [None, None, VT(1, 15)]
        assert kept.store_name == "store2"


FILTER_STEPS = [
    [("A", 1, 5), ("B", 1, 10), ("C", 1, 15)],
    [("A", 2, 15), ("B", 2, 8)],
    [("A", 3, 20)],
    [("A", None, 10), ("B", None, 20)],
]


def _filter_run(source_materialized, filter_materialized, force_old_values) -> tuple:
    builder = StreamsBuilder()
    table = builder.table("topic1", Consumed.with_(STRING, INT), source_materialized)
    kept = table.filter(even, materialized=filter_materialized)
    if force_old_values is not None:
        kept.origin.enable_sending_old_values(force_old_values)
    table_out, kept_out = capture(builder, table.node), capture(builder, kept.node)
    steps = []
    with TopologyTestDriver(builder.build(), config(STRING, INT)) as driver:
        inp = driver.create_input_topic("topic1", STRING, INT)
        for step in FILTER_STEPS:
            for key, value, ts in step:
                inp.pipe_input(key, value, timestamp=ts)
            steps.append((table_out.take(), kept_out.take()))
    return table.origin.send_old_values, kept.origin.send_old_values, steps


NOT_SENDING = [
    ([("A", C(1), 5), ("B", C(1), 10), ("C", C(1), 15)],
     [("A", C(None), 5), ("B", C(None), 10), ("C", C(None), 15)]),
    ([("A", C(2), 15), ("B", C(2), 8)], [("A", C(2), 15), ("B", C(2), 8)]),
    ([("A", C(3), 20)], [("A", C(None), 20)]),
    ([("A", C(None), 10), ("B", C(None), 20)], [("A", C(None), 10), ("B", C(None), 20)]),
]  # fmt: skip


@pytest.mark.parametrize(
    "filter_materialized, force",
    [(None, None), (Materialized.as_("store2"), None), (None, False)],
    ids=["not-materialized", "materialized", "not-forced"],
)
def test_filters_without_old_values(filter_materialized, force) -> None:
    """shouldNotSendOldValuesWithoutMaterialization / OnMaterialization /
    shouldNotEnableSendingOldValuesIfNotAlreadyMaterializedAndNotForcedToMaterialize."""
    table_sends, filter_sends, steps = _filter_run(None, filter_materialized, force)
    assert (table_sends, filter_sends) == (False, False)
    assert steps == NOT_SENDING


def _sending(parent_sends: bool) -> list:
    def old(value):
        return value if parent_sends else None

    return [
        ([("A", C(1), 5), ("B", C(1), 10), ("C", C(1), 15)], []),
        (
            [("A", C(2, old(1)), 15), ("B", C(2, old(1)), 8)],
            [("A", C(2), 15), ("B", C(2), 8)],
        ),
        ([("A", C(3, old(2)), 20)], [("A", C(None, 2), 20)]),
        (
            [("A", C(None, old(3)), 10), ("B", C(None, old(2)), 20)],
            [("B", C(None, 2), 20)],
        ),
    ]


def test_forced_old_values_materialize_the_source() -> None:
    """shouldEnableSendOldValuesWhenNotMaterializedAlreadyButForcedToMaterialize."""
    table_sends, filter_sends, steps = _filter_run(None, None, True)
    assert (table_sends, filter_sends) == (True, True)
    assert steps == _sending(True)


def test_a_materialized_filter_sends_old_values_from_its_own_store() -> None:
    """shouldEnableSendOldValuesWhenMaterializedAlreadyAndForcedToMaterialize."""
    table_sends, filter_sends, steps = _filter_run(None, Materialized.as_("store2"), True)
    assert (table_sends, filter_sends) == (False, True)
    assert steps == _sending(False)


def test_a_materialized_source_sends_old_values_downstream() -> None:
    """shouldSendOldValuesWhenEnabledOnUpStreamMaterialization."""
    table_sends, filter_sends, steps = _filter_run(Materialized.as_("store2"), None, False)
    assert (table_sends, filter_sends) == (True, True)
    assert steps == _sending(True)


def test_a_filter_before_a_regrouping_forwards_no_tombstone_for_keys_it_never_passed() -> None:
    """shouldSkipNullToRepartitionWithoutMaterialization: group_by switches old values on."""
    builder = StreamsBuilder()
    table = builder.table("topic1", Consumed.with_(STRING, STRING))
    accepted = table.filter(lambda k, v: v.lower() == "accept")
    accepted.group_by(lambda k, v: (k, v)).reduce(lambda a, v: a + v, lambda a, v: a)
    table_out, accepted_out = capture(builder, table.node), capture(builder, accepted.node)
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("topic1", STRING, STRING)
        for key, ts in [("A", 5), ("B", 10), ("C", 20)]:
            inp.pipe_input(key, "reject", timestamp=ts)
    assert table_out.take() == [
        ("A", C("reject"), 5),
        ("B", C("reject"), 10),
        ("C", C("reject"), 20),
    ]
    assert accepted_out.take() == []


# ---- map_values (KTableMapValuesTest) -------------------------------------------------------


def first_digit(value: str) -> int:
    return ord(value[0]) - 48


@pytest.mark.parametrize("materialize", [False, True])
def test_map_values(materialize) -> None:
    """testKTable / testQueryableKTable."""
    builder = StreamsBuilder()
    table = builder.table("topic1", Consumed.with_(STRING, STRING))
    materialized = Materialized.as_("anyName").with_value_serde(INT) if materialize else None
    table.map_values(first_digit, materialized=materialized).to_stream().to(
        "out", Produced.with_(STRING, INT)
    )
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("topic1", STRING, STRING)
        for key, value, ts in [("A", "1", 5), ("B", "2", 25), ("C", "3", 20), ("D", "4", 10)]:
            inp.pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic("out", STRING, INT)
        assert [(r.key, r.value, r.timestamp) for r in out.read_records()] == [
            ("A", 1, 5),
            ("B", 2, 25),
            ("C", 3, 20),
            ("D", 4, 10),
        ]
        if materialize:
            assert driver.get_key_value_store("anyName").get_with_timestamp("B") == VT(2, 25)


MAP_STEPS = [
    [("A", "01", 5), ("B", "01", 10), ("C", "01", 15)],
    [("A", "02", 10), ("B", "02", 8)],
    [("A", "03", 20)],
    [("A", None, 30)],
]


@pytest.mark.parametrize("send_old_values", [False, True])
@pytest.mark.parametrize("materialize", [False, True])
def test_map_values_with_and_without_old_values(send_old_values, materialize) -> None:
    """testNotSendingOldValue / testSendingOldValue (and their materialized variants)."""
    builder = StreamsBuilder()
    table = builder.table("topic1", Consumed.with_(STRING, STRING))
    materialized = Materialized.as_("anyName").with_value_serde(INT) if materialize else None
    mapped = table.map_values(int, materialized=materialized)
    if send_old_values:
        assert mapped.origin.enable_sending_old_values(True)
    out = capture(builder, mapped.node)
    steps = []
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("topic1", STRING, STRING)
        for step in MAP_STEPS:
            for key, value, ts in step:
                inp.pipe_input(key, value, timestamp=ts)
            steps.append(out.take())

    def old(value):
        return value if send_old_values else None

    assert steps == [
        [("A", C(1), 5), ("B", C(1), 10), ("C", C(1), 15)],
        [("A", C(2, old(1)), 10), ("B", C(2, old(1)), 8)],
        [("A", C(3, old(2)), 20)],
        [("A", C(None, old(3)), 30)],
    ]


def test_to_stream_of_a_stream_aggregation_still_emits_plain_values() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .count()
        .filter(lambda k, n: n != 2)
        .to_stream()
        .to("out", Produced.with_(STRING, INT))
    )
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        for ts in range(3):
            inp.pipe_input("a", "x", timestamp=ts)
        out = driver.create_output_topic("out", STRING, INT)
        assert out.read_key_values() == [("a", 1), ("a", None), ("a", 3)]
