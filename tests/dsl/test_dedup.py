"""The deduplication acceptance cases D1-D11 for every deduplication operator."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamtide import Serdes, StreamsProcessingError
from streamtide.dsl.deduplicate import pack_pair, unpack_pair
from streamtide.log.api import LogRecord
from tests.dsl.test_dedup_support import OPERATORS, build, driver_for, key_of, run

S = 1000  # ms per second
T = 100 * S
INTERVAL = timedelta(seconds=10)


def at(label: str, *seconds: float) -> list[tuple[str, int]]:
    return [(label, int(s * S)) for s in seconds]


# (case, input events, forwarded events); interval 10 s unless the case says otherwise
CASES = [
    ("D1", at("a", 100, 108, 111), at("a", 100, 111)),
    ("D2", at("a", 100, 92, 89), at("a", 100, 89)),
    ("D3", at("a", 5, 15, 16), at("a", 5, 16)),
    ("D4", at("a", 15, 5, 4), at("a", 15, 4)),
    ("D6", at("k", 20, 25, 11, 9), at("k", 20, 9)),
    ("D7", [*at("k1", 10), *at("k2", 20), *at("k1", 9)], [*at("k1", 10), *at("k2", 20)]),
    (
        "D8",
        [*at("k1", 10), *at("k2", 21), *at("k1", 9)],
        [*at("k1", 10), *at("k2", 21), *at("k1", 9)],
    ),
]


@pytest.mark.parametrize("operator", OPERATORS)
@pytest.mark.parametrize(("case", "events", "expected"), CASES, ids=[c[0] for c in CASES])
def test_D1_to_D8_forwarded_records(operator, case, events, expected) -> None:
    forwarded, metrics = run(operator, events, INTERVAL)
    assert forwarded == expected, case
    assert metrics.get("dropped-duplicates", 0) == len(events) - len(expected)


@pytest.mark.parametrize("operator", ["by_key", "by_key_value"])
@pytest.mark.parametrize(("case", "events", "expected"), CASES, ids=[c[0] for c in CASES])
def test_D1_to_D8_after_a_key_change(operator, case, events, expected) -> None:
    """The same cases when a key-changing operation forces a repartition first."""
    forwarded, _ = run(operator, events, INTERVAL, rekey=True)
    assert forwarded == expected, case


def test_D1_with_t_at_100_s_written_out() -> None:
    forwarded, _ = run("by_key", [("a", T), ("a", T + 8 * S), ("a", T + 11 * S)], 10 * S)
    assert forwarded == [("a", T), ("a", T + 11 * S)]


@pytest.mark.parametrize("operator", OPERATORS)
@pytest.mark.parametrize(
    ("case", "events", "stored"),
    [
        ("D2", at("a", 100, 92, 89), [100 * S]),
        ("D4", at("a", 15, 5, 4), [15 * S]),
        ("D6", at("k", 20, 25, 11, 9), [20 * S]),
        ("D8", [*at("k1", 10), *at("k2", 21), *at("k1", 9)], [21 * S]),
    ],
)
def test_D2_D4_D6_D8_late_records_and_duplicates_are_not_stored(
    operator, case, events, stored
) -> None:
    with driver_for(build(operator, INTERVAL)) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        for n, (label, ts) in enumerate(events):
            source.pipe_input(key_of(operator, label, n), {"id": label, "n": n}, ts)
        (store_name,) = driver.topology.store_builders
        entries = driver.get_state_store(store_name).entries()
        assert sorted(e.timestamp for e in entries) == stored, case


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([("a", 0), ("b", 10), ("a", 1)], [("a", 0), ("b", 10)]),  # 10 - 0 = interval: kept
        ([("a", 0), ("b", 11), ("a", 1)], [("a", 0), ("b", 11), ("a", 1)]),  # 11 > 10: purged
        ([("a", 0), ("a", 10)], [("a", 0)]),  # |t - ts| = interval: a duplicate
        ([("a", 0), ("a", 11)], [("a", 0), ("a", 11)]),
    ],
)
def test_expiry_and_window_boundaries_to_the_millisecond(events, expected) -> None:
    assert run("by_key", events, 10)[0] == expected


@pytest.mark.parametrize("operator", OPERATORS)
def test_D5_interval_zero(operator) -> None:
    forwarded, metrics = run(operator, at("a", 5, 5, 6), 0)
    assert forwarded == at("a", 5, 6)
    assert metrics["dropped-duplicates"] == 1


@pytest.mark.parametrize("rekey", [False, True])
def test_D9_null_key_by_key_always_forwarded(rekey) -> None:
    forwarded, metrics = run("by_key", [(None, 1 * S), (None, 1 * S)], INTERVAL, rekey=rekey)
    assert forwarded == [(None, 1 * S), (None, 1 * S)]
    assert metrics.get("dropped-duplicates", 0) == 0


@pytest.mark.parametrize("rekey", [False, True])
def test_D10_by_key_value_null_id_always_forwarded(rekey) -> None:
    forwarded, _ = run("by_key_value", [(None, 1 * S), (None, 1 * S)], INTERVAL, rekey=rekey)
    assert forwarded == [(None, 1 * S), (None, 1 * S)]


def test_D10_by_key_value_null_key_always_forwarded() -> None:
    with driver_for(build("by_key_value", INTERVAL)) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.json())
        source.pipe_input(None, {"id": "a", "n": 0}, 1 * S)
        source.pipe_input(None, {"id": "a", "n": 1}, 1 * S)
        assert [r.value["n"] for r in sink.read_records()] == [0, 1]


def test_D9_deduplicate_null_id_always_forwarded() -> None:
    forwarded, _ = run("deduplicate", [(None, 1 * S), (None, 1 * S)], INTERVAL)
    assert forwarded == [(None, 1 * S), (None, 1 * S)]


def test_by_key_value_needs_both_key_and_id_equal() -> None:
    with driver_for(build("by_key_value", INTERVAL)) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.json())
        for n, (key, label) in enumerate([("u1", "a"), ("u2", "a"), ("u1", "b"), ("u1", "a")]):
            source.pipe_input(key, {"id": label, "n": n}, 5 * S)
        assert [r.value["n"] for r in sink.read_records()] == [0, 1, 2]


@pytest.mark.parametrize("operator", OPERATORS)
def test_forwarded_records_keep_key_value_timestamp_and_headers(operator) -> None:
    with driver_for(build(operator, INTERVAL, rekey=operator != "deduplicate")) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.json())
        source.pipe_input("k", {"id": "a", "x": [1, None]}, 1234, headers=[("h", b"\x00v")])
        source.pipe_input(None, {"id": None}, 1235)
        records = [(r.key, r.value, r.timestamp, r.headers) for r in sink.read_records()]
        assert records == [
            ("k", {"id": "a", "x": [1, None]}, 1234, (("h", b"\x00v"),)),
            (None, {"id": None}, 1235, ()),
        ]


@pytest.mark.parametrize("key", [None, b"", b"key\x00"])
@pytest.mark.parametrize("value", [None, b"", b"\x01value"])
def test_repartition_pair_round_trips(key, value) -> None:
    assert unpack_pair(pack_pair(key, value)) == (key, value)


def test_deduplicate_ignores_the_key() -> None:
    forwarded, _ = run("deduplicate", [("a", 5 * S), ("a", 6 * S), ("b", 6 * S)], INTERVAL)
    assert forwarded == [("a", 5 * S), ("b", 6 * S)]  # keys were record-0, record-1, record-2


# ---- D11: the same record reprocessed (same topic, partition and offset) ------------------


def raw(operator: str, label: str, seconds: int, offset: int, n: int = 0) -> LogRecord:
    key = Serdes.string().serialize(key_of(operator, label, n))
    value = Serdes.json().serialize({"id": label, "n": n})
    return LogRecord(key, value, seconds * S, (), offset)


@pytest.mark.parametrize("operator", ["by_key", "by_key_value"])
def test_D11_reprocessed_record_is_forwarded_again(operator) -> None:
    with driver_for(build(operator, INTERVAL)) as driver:
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.json())
        (task,) = driver.tasks
        record = raw(operator, "a", 5, offset=7)
        for _ in range(2):  # processed, then processed again as after a crash
            task.add_records("input", [record])
            assert task.process() == 1
        store = driver.get_state_store(driver.topology.subtopology(0).stores[0])
        assert [(e.timestamp, e.offset) for e in store.entries()] == [(5 * S, 7)]
        # a genuine duplicate (another offset) is still dropped
        task.add_records("input", [raw(operator, "a", 5, offset=8, n=1)])
        task.process()
        forwarded = [(r.value["id"], r.timestamp, r.value["n"]) for r in sink.read_records()]
        assert forwarded == [("a", 5 * S, 0), ("a", 5 * S, 0)]
        assert driver.metrics()["dropped-duplicates"] == 1


def test_D11_deduplicate_reprocessed_repartition_record_is_forwarded_again() -> None:
    """``deduplicate`` sees the records of its repartition topic: the same repartition record
    read twice (the dedup task crashed before committing) is forwarded twice."""
    with driver_for(build("deduplicate", INTERVAL)) as driver:
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.json())
        upstream, dedup_task = driver.tasks
        upstream.add_records("input", [raw("deduplicate", "a", 5, offset=7)])
        upstream.process()
        dedup_task.process()
        (topic,) = dedup_task.subtopology.source_topics
        physical = dedup_task.resolve(topic)
        assert physical == f"dedup-app-{topic}"
        (repartitioned,) = driver.topic_records(physical)
        dedup_task.add_records(physical, [repartitioned])
        assert dedup_task.process() == 1
        forwarded = [(r.key, r.value, r.timestamp) for r in sink.read_records()]
        assert forwarded == [("record-0", {"id": "a", "n": 0}, 5 * S)] * 2
        assert driver.metrics().get("dropped-duplicates", 0) == 0


# ---- naming, repartition topics and describe() --------------------------------------------


def test_describe_by_key_without_repartition() -> None:
    text = str(build("by_key", INTERVAL).build().describe())
    assert "Processor: KSTREAM-DEDUPLICATE-0000000001 (stores: " in text
    assert "[KSTREAM-DEDUPLICATE-STATE-STORE-0000000002]" in text
    assert "repartition" not in text
    assert "Sub-topology: 1" not in text


@pytest.mark.parametrize("operator", ["by_key", "by_key_value"])
def test_describe_repartition_after_key_change(operator) -> None:
    topology = build(operator, INTERVAL, rekey=True).build()
    text = str(topology.describe())
    name = "KSTREAM-DEDUPLICATE-0000000002"
    assert f"Sink: {name}-repartition-sink (topic: {name}-repartition)" in text
    assert f"Source: {name}-repartition-source (topics: [{name}-repartition])" in text
    assert f"Processor: {name} (stores: [KSTREAM-DEDUPLICATE-STATE-STORE-0000000003])" in text
    assert topology.internal_topics == {f"{name}-repartition"}
    assert [len(s.nodes) for s in topology.subtopologies()] == [3, 3]


def test_describe_deduplicate_named() -> None:
    from streamtide import Deduplicated

    options = Deduplicated.as_("unique-clicks").with_id_serde(Serdes.string())
    topology = build("deduplicate", INTERVAL, deduplicated=options).build()
    text = str(topology.describe())
    assert "Processor: unique-clicks-id-select (stores: [])" in text
    assert "Sink: unique-clicks-repartition-sink (topic: unique-clicks-repartition)" in text
    assert "Source: unique-clicks-repartition-source (topics: [unique-clicks-repartition])" in text
    assert "Processor: unique-clicks (stores: [unique-clicks])" in text
    with driver_for(build("deduplicate", INTERVAL, deduplicated=options)) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        source.pipe_input("k", {"id": "a", "n": 0}, 1)
        assert "dedup-app-unique-clicks-repartition" in driver.produced_topic_names()
        assert driver.get_state_store("unique-clicks").kind == "dedup"


def test_deduplicate_result_is_marked_for_repartition() -> None:
    builder = build("deduplicate", INTERVAL)
    stream = builder.stream("other", None)
    assert stream.repartition_required is False
    keyed = stream.deduplicate(lambda k, v: v, 0)
    assert keyed.repartition_required is True
    assert stream.deduplicate_by_key(0).repartition_required is False


# ---- serdes -------------------------------------------------------------------------------


def test_dedup_id_uses_the_deduplicated_key_serde() -> None:
    from streamtide import Deduplicated

    folding = Serdes.from_functions(lambda s: s.lower().encode(), lambda b: b.decode())
    events = [("A", 1 * S), ("a", 2 * S), ("B", 3 * S)]
    plain, _ = run("by_key", events, INTERVAL)
    assert plain == events
    builder = build("by_key", INTERVAL, deduplicated=Deduplicated.with_(folding))
    with driver_for(builder) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.json())
        for n, (label, ts) in enumerate(events):
            source.pipe_input(label, {"id": label, "n": n}, ts)
        assert [r.key for r in sink.read_records()] == ["A", "B"]


def test_by_key_value_id_uses_the_id_serde() -> None:
    from streamtide import Deduplicated

    folding = Serdes.from_functions(lambda s: s.lower().encode(), lambda b: b.decode())
    options = Deduplicated().with_id_serde(folding)
    with driver_for(build("by_key_value", INTERVAL, deduplicated=options)) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.json())
        for n, label in enumerate(["X", "x", "y"]):
            source.pipe_input("user", {"id": label, "n": n}, 1)
        assert [r.value["n"] for r in sink.read_records()] == [0, 2]


def test_id_without_a_matching_serde_fails_clearly() -> None:
    from streamtide import Consumed, StreamsBuilder

    builder = StreamsBuilder()
    stream = builder.stream("input", Consumed.with_(Serdes.string(), Serdes.json()))
    stream.deduplicate(lambda _k, v: v["id"], INTERVAL).to("output")
    with driver_for(builder) as driver:  # a list id: not str, int or bytes; default serde bytes
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        with pytest.raises(StreamsProcessingError, match=r"with_id_serde"):
            source.pipe_input("k", {"id": ["a"]}, 1)


# ---- invalid arguments --------------------------------------------------------------------


def stream_of():
    from streamtide import StreamsBuilder

    return StreamsBuilder().stream("input")


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.deduplicate_by_key(-1),
        lambda s: s.deduplicate_by_key_value(by_id, timedelta(seconds=-1)),
        lambda s: s.deduplicate(by_id, -10),
    ],
)
def test_negative_interval_is_rejected(call) -> None:
    with pytest.raises(ValueError, match="interval must not be negative"):
        call(stream_of())


@pytest.mark.parametrize("interval", [1.5, "10s", None, True])
def test_interval_of_the_wrong_type_is_rejected(interval) -> None:
    with pytest.raises(TypeError, match="timedelta or int"):
        stream_of().deduplicate_by_key(interval)


@pytest.mark.parametrize("method", ["deduplicate_by_key_value", "deduplicate"])
def test_id_selector_must_be_callable(method) -> None:
    with pytest.raises(TypeError, match="id_selector must be callable"):
        getattr(stream_of(), method)("id", 10)


def test_deduplicated_options_are_checked() -> None:
    from streamtide import Deduplicated, TopologyError

    with pytest.raises(TypeError, match="expected a Deduplicated"):
        stream_of().deduplicate_by_key(10, "name")
    with pytest.raises(TopologyError, match="non-empty string"):
        Deduplicated.as_("")
    with pytest.raises(TopologyError, match="non-empty string"):
        Deduplicated().with_name(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a Serde"):
        Deduplicated().with_key_serde("string")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a Serde"):
        Deduplicated().with_value_serde(str)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a Serde"):
        Deduplicated().with_id_serde(None)  # type: ignore[arg-type]
    base = Deduplicated.as_("x")
    changed = base.with_key_serde(Serdes.string()).with_value_serde(Serdes.json())
    assert base == Deduplicated(name="x") and changed.name == "x"
    assert changed.key_serde is not None and changed.value_serde is not None


def by_id(_key, value):
    return value
