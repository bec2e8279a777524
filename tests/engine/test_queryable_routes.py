"""``engine.queryable.store_route``: which stores can be queried, with which serdes, and which
task holds a key (no Spark: the routes are pure)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamtide import (
    Consumed,
    InvalidStateStoreError,
    JoinWindows,
    Materialized,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    StreamsConfig,
    TimeWindows,
    Topology,
)
from streamtide.engine.queryable import StoreRoute, store_route
from streamtide.log.partitioner import partition_for_key
from streamtide.state.queryable import QueryableKind

STRING, LONG = Serdes.string(), Serdes.long()
CONFIG = StreamsConfig(application_id="routes", default_key_serde=STRING)


def _topology() -> Topology:
    builder = StreamsBuilder()
    clicks = builder.stream("clicks", Consumed.with_(STRING, STRING))
    builder.table("users", Consumed.with_(STRING, STRING), Materialized.as_("users"))
    builder.global_table("countries", Consumed.with_(STRING, STRING), Materialized.as_("geo"))
    grouped = clicks.group_by_key()
    grouped.count(Materialized.as_("counts"))
    grouped.reduce(lambda a, b: b, Materialized.as_("last").with_logging_disabled())
    grouped.windowed_by(TimeWindows.of_size(60_000)).count(Materialized.as_("per-minute"))
    grouped.windowed_by(SessionWindows.with_inactivity_gap(1_000)).count(
        Materialized.as_("sessions")
    )
    clicks.deduplicate_by_key(timedelta(seconds=5)).to("unique")
    clicks.join(clicks, lambda a, b: a, JoinWindows.of_time_difference_with_no_grace(10)).to("j")
    return builder.build()


def _route(name: str) -> StoreRoute:
    topology = _topology()
    partitions = {s.id: 4 for s in topology.subtopologies()}
    return store_route(topology, CONFIG, name, partitions)


def test_key_value_window_and_session_stores_can_be_queried() -> None:
    assert _route("counts").kind is QueryableKind.KEY_VALUE
    assert _route("users").kind is QueryableKind.KEY_VALUE
    assert _route("per-minute").kind is QueryableKind.WINDOW
    assert _route("sessions").kind is QueryableKind.SESSION
    counts = _route("counts")
    assert counts.value_serde.deserialize(LONG.serialize(7)) == 7  # the count's own serde
    assert counts.key_serde.serialize("a") == b"a"  # the stream's key serde


def test_a_key_goes_to_the_task_of_its_partition() -> None:
    route = _route("counts")
    for key in ("alice", "bob", "carol", "dave", "erin"):
        raw = route.key_bytes(key)
        assert route.task_of(raw) == f"{route.subtopology}_{partition_for_key(raw, 4)}"
    assert len({route.task_of(route.key_bytes(f"k{i}")) for i in range(50)}) == 4
    assert route.task_ids == [f"{route.subtopology}_{p}" for p in range(4)]
    with pytest.raises(InvalidStateStoreError, match="must not be None"):
        route.key_bytes(None)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("nope", r"unknown state store 'nope'; stores that can be queried: counts, per-minute"),
        ("last", "no changelog"),
        ("geo", "global table"),
    ],
)
def test_stores_that_cannot_be_queried_are_refused_with_the_reason(name: str, reason: str) -> None:
    with pytest.raises(InvalidStateStoreError, match=reason):
        _route(name)


def test_internal_stores_of_joins_and_deduplication_are_refused() -> None:
    internal = [
        n for n in _topology().store_builders if "JOIN" in n.upper() or "DEDUP" in n.upper()
    ]
    assert len(internal) >= 3
    for name in internal:
        with pytest.raises(InvalidStateStoreError, match="internal store"):
            _route(name)
