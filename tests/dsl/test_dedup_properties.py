"""Deduplication against a reference model, store bounds, and records without offsets."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtide import Processor, PunctuationType, Record, Serdes, StreamsConfig, Topology
from streamtide.dsl.deduplicate import DedupIds, DeduplicateProcessor
from streamtide.state.dedup import DedupStoreBuilder
from streamtide.state.stores import KeyValueBytesStoreSupplier
from streamtide.testing import TopologyTestDriver
from tests.dsl.test_dedup_support import OPERATORS, build, driver_for


def reference(events: list[tuple[Any, int]], interval: int) -> list[int]:
    """Indexes of the forwarded events, by a plain scan over what was forwarded so far.

    An earlier forwarded event ``f`` makes ``e`` a duplicate when both have the same id, ``f``
    was stored (not late when it came), ``f`` has not expired (``stream_time - f.ts <=
    interval``) and the two are at most ``interval`` apart.
    """
    forwarded: list[tuple[int, Any, int, bool]] = []  # index, id, ts, stored
    stream_time = -1
    for index, (dedup_id, ts) in enumerate(events):
        stream_time = max(stream_time, ts)
        duplicate = dedup_id is not None and any(
            stored and f_id == dedup_id and stream_time - f_ts <= interval
            and abs(ts - f_ts) <= interval
            for _, f_id, f_ts, stored in forwarded
        )  # fmt: skip
        if not duplicate:
            late = ts < stream_time - interval
            forwarded.append((index, dedup_id, ts, dedup_id is not None and not late))
    return [index for index, *_ in forwarded]


def dedup_id(operator: str, key: Any, label: Any) -> Any:
    if operator == "by_key":
        return key
    if operator == "by_key_value":
        return None if key is None or label is None else (key, label)
    return label


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", None]),  # key
        st.sampled_from(["x", "y", None]),  # id
        st.builds(  # timestamps: many ties, boundary hits and 1 ms off boundaries
            lambda n, d: max(n * 500 + d, 0), st.integers(0, 40), st.sampled_from([0, 0, 1, -1])
        ),
    ),
    min_size=3,
    max_size=40,
)
INTERVALS = st.sampled_from([0, 1, 500, 1000, 2500, 4000, 10_000])


@settings(max_examples=80, deadline=None)
@given(
    operator=st.sampled_from(OPERATORS),
    events=EVENTS,
    interval=INTERVALS,
    rekey=st.booleans(),
)
def test_operators_match_the_reference_model(operator, events, interval, rekey) -> None:
    rekey = rekey and operator != "deduplicate"
    with driver_for(build(operator, interval, rekey=rekey)) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.json())
        for n, (key, label, ts) in enumerate(events):
            source.pipe_input(key, {"id": label, "n": n}, ts)
        got = [r.value["n"] for r in sink.read_records()]
        expected = reference([(dedup_id(operator, k, i), ts) for k, i, ts in events], interval)
        assert got == expected
        dropped = driver.metrics().get("dropped-duplicates", 0)
        assert dropped == len(events) - len(expected)


@pytest.mark.parametrize("operator", OPERATORS)
@pytest.mark.parametrize("seed", range(4))
def test_long_random_streams_match_the_reference_model(operator, seed) -> None:
    rng = random.Random(seed)
    interval = [0, 500, 1500, 3000][seed]
    events = [
        (
            rng.choice(["a", "b", "c", None]),
            rng.choice(["x", "y", None]),
            rng.randrange(0, 60) * 250,
        )
        for _ in range(150)
    ]
    events.sort(key=lambda e: e[2] + rng.randrange(-3000, 3000))  # mostly in order, some late
    with driver_for(build(operator, interval)) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.json())
        for n, (key, label, ts) in enumerate(events):
            source.pipe_input(key, {"id": label, "n": n}, ts)
        got = [r.value["n"] for r in sink.read_records()]
    expected = reference([(dedup_id(operator, k, i), ts) for k, i, ts in events], interval)
    assert got == expected
    assert len(expected) < len(events) or interval == 0  # the stream had duplicates


@pytest.mark.parametrize("operator", OPERATORS)
def test_purging_bounds_the_store(operator) -> None:
    """3000 records over 300 s, 7 ids, interval 2 s: the store keeps only unexpired entries."""
    interval = 2000
    with driver_for(build(operator, interval)) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.json())
        (store_name,) = driver.topology.store_builders
        store = driver.get_state_store(store_name)
        largest = 0
        stream_time = -1
        for n in range(3000):
            ts = 1000 + n * 100 - (300 if n % 5 == 0 else 0)  # some a little out of order
            stream_time = max(stream_time, ts)
            label = f"id{n % 7}"
            key = label if operator == "by_key" else "user"
            source.pipe_input(key, {"id": label, "n": n}, ts)
            entries = list(store.entries())
            assert all(stream_time - e.timestamp <= interval for e in entries)
            ids = [e.dedup_id for e in entries]
            assert len(ids) == len(set(ids))  # at most one live entry per id
            largest = max(largest, len(entries))
        assert largest == 7
        assert len(sink.read_records()) > 3000 * 100 // interval  # far more than it keeps


class Ticker(Processor):
    """Forwards its input, and emits ``("p", n)`` at t=5 s from a wall-clock punctuator."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.ticks = 0
        context.schedule(1000, PunctuationType.WALL_CLOCK_TIME, self.tick)

    def tick(self, _now: int) -> None:
        self.ticks += 1
        self.context.forward(Record("p", f"tick-{self.ticks}", 5000))

    def process(self, record: Record) -> None:
        self.context.forward(record)


def test_records_without_offset_are_dropped_when_a_match_is_found() -> None:
    ids = DedupIds("deduplicate_by_key", Serdes.string(), Serdes.string())
    supplier = KeyValueBytesStoreSupplier("seen", "in_memory")
    topology = (
        Topology()
        .add_source("in", "input", key_serde=Serdes.string(), value_serde=Serdes.string())
        .add_processor("ticker", Ticker, "in")
        .add_processor("dedup", lambda: DeduplicateProcessor("seen", 10_000, ids), "ticker")
        .add_state_store(DedupStoreBuilder(supplier), "dedup")
        .add_sink("out", "output", "dedup", key_serde=Serdes.string(), value_serde=Serdes.string())
    )
    config = StreamsConfig(application_id="punctuated")
    with TopologyTestDriver(topology, config, initial_wall_clock_ms=0) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.string())
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.string())
        driver.advance_wall_clock_time(1000)  # tick-1: nothing stored yet -> forwarded, stored
        driver.advance_wall_clock_time(1000)  # tick-2: found, no offset -> dropped
        source.pipe_input("p", "from-topic", 6000)  # a topic record matching it -> dropped
        source.pipe_input("q", "from-topic", 6000)
        assert sink.read_key_values() == [("p", "tick-1"), ("q", "from-topic")]
        (entry,) = driver.get_state_store("seen").fetch(b"p")
        assert entry.timestamp == 5000 and entry.origin is None
        assert driver.metrics()["dropped-duplicates"] == 2


@pytest.mark.parametrize("operator", OPERATORS)
def test_changelog_replay_rebuilds_the_store(operator) -> None:
    """Everything the dedup store knows reaches its changelog: replaying the changelog into
    an empty bytes store gives a store with the same entries (what a restore does)."""
    from streamtide.state.changelogging import apply_changelog
    from streamtide.state.dedup import INDEX_KEYS, DedupStore

    rng = random.Random(7)
    with driver_for(build(operator, 1500)) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        for n in range(300):
            label = rng.choice(["x", "y", "z", None])
            ts = n * 50 + rng.randrange(-400, 400) + 400
            key = label if operator == "by_key" else "user"
            source.pipe_input(key, {"id": label, "n": n}, ts)
        (store_name,) = driver.topology.store_builders
        live = driver.get_state_store(store_name)
        changelog = driver.topic_records(f"dedup-app-{store_name}-changelog")
        assert changelog
        replica = DedupStore(KeyValueBytesStoreSupplier("replica", "in_memory").get())
        replica.open_standalone()
        records = [(r.key, r.value, r.headers) for r in changelog]
        assert not [key for key, _, _ in records if key[:1] == INDEX_KEYS.prefix]
        apply_changelog(replica.inner, records, INDEX_KEYS)
        assert list(replica.entries()) == list(live.entries())
        assert len(list(live.entries())) > 0
        # the time index, not logged, is derived again: every byte of the store is the same
        assert list(replica.inner.all()) == list(live.inner.all())
        assert replica.purge_expired(1 << 40) == len(list(live.entries()))
