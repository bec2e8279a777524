"""Table operators take whole batches: a source table, ``filter``/``filter_not``/``map_values``
(with and without a store, with and without old values) and ``group_by`` with
``count``/``reduce``/``aggregate`` give exactly what they give one record at a time.

The same random input (repeated keys, tombstones, None keys, timestamps out of order) goes
through the test driver twice: once in a few sends, each processed as one piece (so every
operator gets many rows of the same keys in one batch, and the aggregation gets the whole
batch of re-grouped changes), and once with every piece one row long
(``StreamTask.max_piece_rows = 1``). Every topic (outputs, repartition and changelog topics)
and every store must be equal. The aggregator changes its aggregate in place, which must not
alter what was emitted before.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamtide import Consumed, Grouped, Materialized, Produced, Serdes, StreamsBuilder
from streamtide.processor.topology import Topology
from streamtide.runtime.stream_task import StreamTask
from streamtide.testing import TopologyTestDriver
from tests.dsl.table_support import config

STRING, JSON, LONG = Serdes.string(), Serdes.json(), Serdes.long()
STORES = ("profiles", "small", "scaled", "sums", "counts", "totals")


def add_in_place(_key: Any, value: Any, aggregate: dict) -> dict:
    aggregate["total"] += value["n"]
    aggregate["ids"].append(value["i"])
    return aggregate


def subtract_in_place(_key: Any, value: Any, aggregate: dict) -> dict:
    aggregate["total"] -= value["n"]
    aggregate["ids"].remove(value["i"])
    return aggregate


def tables() -> Topology:
    builder = StreamsBuilder()
    profiles = builder.table("profiles", Consumed.with_(STRING, JSON), Materialized.as_("profiles"))
    profiles.to_stream().to("updates", Produced.with_(STRING, JSON))
    kept = profiles.filter(lambda k, v: v["n"] != 3)  # old values: group_by below
    kept.to_stream().to("kept", Produced.with_(STRING, JSON))
    small = profiles.filter_not(lambda k, v: v["n"] > 6, materialized=Materialized.as_("small"))
    small.to_stream().to("small", Produced.with_(STRING, JSON))
    scaled = profiles.map_values(
        lambda v: {"n": v["n"] * 10, "i": v["i"]},
        materialized=Materialized.as_("scaled").with_value_serde(JSON),
    )
    scaled.to_stream().to("scaled", Produced.with_(STRING, JSON))
    kept.group_by(lambda k, v: (f"g{v['n'] % 3}", v), Grouped.with_(STRING, JSON)).aggregate(
        lambda: {"total": 0, "ids": []},
        add_in_place,
        subtract_in_place,
        Materialized.as_("sums").with_value_serde(JSON),
    ).to_stream().to("sums", Produced.with_(STRING, JSON))
    profiles.group_by(
        lambda k, v: None if v["n"] == 5 else (f"p{v['n'] % 2}", v), Grouped.with_(STRING, JSON)
    ).count(Materialized.as_("counts")).to_stream().to("counts", Produced.with_(STRING, LONG))
    scaled.group_by(lambda k, v: ("all", v["n"]), Grouped.with_(STRING, LONG)).reduce(
        lambda a, v: a + v, lambda a, v: a - v, Materialized.as_("totals").with_value_serde(LONG)
    ).to_stream().to("totals", Produced.with_(STRING, LONG))
    return builder.build()


def run(records: list[tuple], cuts: list[int], piece_rows: int | None) -> dict[str, Any]:
    """Send ``records`` to ``profiles``, processing them at each cut (and at the end)."""
    StreamTask.max_piece_rows = piece_rows
    try:
        with TopologyTestDriver(tables(), config()) as driver:
            start = 0
            for end in [*cuts, len(records)]:
                if end == start:
                    continue
                *first, last = records[start:end]
                for key, value, timestamp in first:
                    driver.send("profiles", 0, key, value, timestamp, ())
                driver.pipe_raw("profiles", *last)  # processes all that was sent
                driver.commit()
                start = end
            seen: dict[str, Any] = {
                topic: [
                    (r.key, r.value, r.timestamp, r.headers) for r in driver.topic_records(topic)
                ]
                for topic in sorted(driver.produced_topic_names())
            }
            for name in STORES:
                seen[f"store {name}"] = list(driver.get_state_store(name).inner.all())
            return seen
    finally:
        StreamTask.max_piece_rows = None


@st.composite
def updates(draw: Any) -> tuple[list[tuple], list[int]]:
    count = draw(st.integers(min_value=1, max_value=40))
    records = []
    for i in range(count):
        key = draw(st.sampled_from(["a", "a", "a", "b", "b", "c", None]))
        n = draw(st.integers(min_value=0, max_value=9))
        value = None if n == 0 else JSON.serialize({"n": n, "i": i})
        timestamp = 1000 * i - draw(st.sampled_from([0, 0, 0, 1500, 5000]))
        records.append((None if key is None else key.encode(), value, max(timestamp, 0)))
    cuts = sorted(set(draw(st.lists(st.integers(0, count), max_size=3))))
    return records, cuts


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=updates())
def test_table_operators_on_whole_batches_equal_records_one_at_a_time(data: Any) -> None:
    records, cuts = data
    one_at_a_time = run(records, cuts, 1)
    batched = run(records, cuts, None)
    assert batched.keys() == one_at_a_time.keys()
    for what in one_at_a_time:
        assert batched[what] == one_at_a_time[what], what
    assert one_at_a_time.get("updates") or all(key is None for key, _, _ in records)


def test_a_batch_of_updates_of_one_key_emits_each_with_its_old_value() -> None:
    """Three updates of one key and a tombstone in one batch: each change carries the value
    before it (the table sends old values, as its ``group_by`` needs), and the group's count
    moves as record by record."""
    records = [
        (b"a", JSON.serialize({"n": 1, "i": 0}), 10),
        (b"a", JSON.serialize({"n": 2, "i": 1}), 20),
        (b"a", JSON.serialize({"n": 4, "i": 2}), 30),
        (b"a", None, 40),
    ]
    seen = run(records, [], None)
    counts = [(STRING.deserialize(k), LONG.deserialize(v), t) for k, v, t, _ in seen["counts"]]
    assert counts == [
        ("p1", 1, 10),
        ("p1", 0, 20),
        ("p0", 1, 20),
        ("p0", 1, 30),
        ("p0", 0, 40),
    ]
    kept = [JSON.deserialize(v) if v else None for _, v, _, _ in seen["kept"]]
    assert kept == [
        {"n": 1, "i": 0},
        {"n": 2, "i": 1},
        {"n": 4, "i": 2},
        None,
    ]
