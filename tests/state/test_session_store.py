"""Contract tests of the session store, run over every registered bytes store kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtide.errors import StoreError
from streamtide.runtime.metrics import TaskMetrics
from streamtide.serde import Serdes
from streamtide.state.changelogging import apply_changelog
from streamtide.state.segments import segment_interval
from streamtide.state.session_store import SessionStore, SessionStoreBuilder
from streamtide.state.stores import KeyValueBytesStoreSupplier, key_value_store_kinds
from streamtide.window import Window, Windowed

MINUTE = 60_000
LATER = 4 * MINUTE - 1  # live from 2 m - 1 ms: segment 0 expired, segment 1 not yet


class FakeContext:
    """The part of a task a store sees, with a stream time the test moves."""

    application_id = "session-store-test"
    task_id = "0_0"

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.default_key_serde = Serdes.string()
        self.default_value_serde = Serdes.int()
        self.metrics = TaskMetrics()
        self.stream_time = -1
        self.registered: list = []

    def current_stream_time_ms(self) -> int:
        return self.stream_time

    def register(self, store) -> None:
        self.registered.append(store)


VARIANTS = [(kind, logged) for kind in key_value_store_kinds() for logged in (False, True)]


@pytest.fixture(params=VARIANTS, ids=[f"{k}-{'logged' if lg else 'plain'}" for k, lg in VARIANTS])
def kind(request) -> tuple[str, bool]:
    """A bytes store kind, plain or wrapped in the changelogging (write-buffering) store."""
    return request.param


@pytest.fixture
def context(tmp_path) -> FakeContext:
    return FakeContext(tmp_path)


def supplier(kind: tuple[str, bool], name: str = "sessions") -> KeyValueBytesStoreSupplier:
    return KeyValueBytesStoreSupplier(name, kind[0]).with_logging(kind[1])


def open_store(
    kind: tuple[str, bool], context: FakeContext, retention: int = 86_400_000
) -> SessionStore:
    builder = SessionStoreBuilder(supplier(kind), retention, logging_enabled=kind[1])
    store = builder.build()
    store.init(context)
    return store


def entries(store: SessionStore) -> int:
    """Entries physically in the bytes store, expired or not (RocksDB only estimates its
    ``approximate_num_entries``)."""
    return sum(1 for _ in store.inner.all())


def w(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def test_kind_name_and_default_serdes(kind, context):
    store = open_store(kind, context)
    assert store.kind == "session" and store.name == "sessions" and store.is_open
    assert (store.key_serde.name, store.value_serde.name) == ("string", "int")  # defaults
    assert context.registered == [store.inner]  # the bytes store is what the task changelogs


def test_segment_interval():
    assert segment_interval(86_400_000) == 43_200_000
    assert segment_interval(10_000) == MINUTE
    assert segment_interval(300_000, num_segments=4) == 100_000


def test_put_fetch_ordered_by_end_then_start_across_segments(kind, context):
    store = open_store(kind, context, retention=2 * MINUTE)  # one segment per minute
    context.stream_time = 5 * MINUTE
    sessions = [
        (w("a", 4 * MINUTE, 4 * MINUTE + 10), 5),
        (w("a", 100, 3 * MINUTE + 1), 4),
        (w("a", 3 * MINUTE, 3 * MINUTE + 1), 3),
        (w("a", 3 * MINUTE + 1, 3 * MINUTE + 1), 2),
        (w("a", 0, 4 * MINUTE + 10), 1),
    ]
    for session, agg in sessions:
        store.put(session, agg)
    assert store.fetch("a") == [
        (w("a", 100, 3 * MINUTE + 1), 4),
        (w("a", 3 * MINUTE, 3 * MINUTE + 1), 3),
        (w("a", 3 * MINUTE + 1, 3 * MINUTE + 1), 2),
        (w("a", 0, 4 * MINUTE + 10), 1),
        (w("a", 4 * MINUTE, 4 * MINUTE + 10), 5),
    ]


def test_find_sessions_applies_both_bounds(kind, context):
    store = open_store(kind, context)
    context.stream_time = 1000
    for start, end in [(0, 99), (101, 200), (201, 300), (301, 400)]:
        store.put(w("k", start, end), end)
    found = store.find_sessions("k", earliest_session_end=150, latest_session_start=250)
    assert [s.window for s, _ in found] == [Window(101, 200), Window(201, 300)]
    assert [a for _, a in found] == [200, 300]
    assert store.find_sessions("k", 401, 1000) == []
    assert store.find_sessions("k", 0, -1) == []
    assert [s.window for s, _ in store.find_sessions("k", 99, 0)] == [Window(0, 99)]


def test_keys_are_isolated_even_when_one_prefixes_another(kind, context):
    store = open_store(kind, context)
    context.stream_time = 50
    store.put(w("a", 10, 20), 1)
    store.put(w("ab", 10, 20), 2)
    store.put(w("", 10, 20), 3)
    assert store.fetch("a") == [(w("a", 10, 20), 1)]
    assert store.fetch("ab") == [(w("ab", 10, 20), 2)]
    assert store.fetch("") == [(w("", 10, 20), 3)]
    assert store.fetch("b") == []


def test_put_overwrites_remove_and_none_delete(kind, context):
    store = open_store(kind, context)
    context.stream_time = 50
    store.put(w("a", 0, 10), 1)
    store.put(w("a", 0, 10), 7)
    store.put(w("a", 20, 30), 2)
    assert store.fetch_session("a", 0, 10) == 7
    store.remove(w("a", 0, 10))
    assert store.fetch_session("a", 0, 10) is None
    store.put(w("a", 20, 30), None)
    store.remove(w("a", 40, 40))  # absent: nothing happens
    assert store.fetch("a") == []
    assert entries(store) == 0


def test_none_key_is_rejected(kind, context):
    store = open_store(kind, context)
    with pytest.raises(StoreError, match="None key"):
        store.put(Windowed(None, Window(0, 0)), 1)
    with pytest.raises(StoreError, match="None key"):
        store.fetch(None)


def test_expired_sessions_are_never_returned_and_late_puts_not_stored(kind, context):
    store = open_store(kind, context, retention=10_000)
    context.stream_time = 20_000
    store.put(w("a", 9_000, 10_000), 1)
    store.put(w("a", 15_000, 15_000), 2)
    context.stream_time = 20_001  # live from 10_001: [9s/10s] expired, its segment not yet
    assert store.fetch("a") == [(w("a", 15_000, 15_000), 2)]
    assert store.find_sessions("a", 0, 100_000) == [(w("a", 15_000, 15_000), 2)]
    assert store.fetch_session("a", 9_000, 10_000) is None
    assert store.all() == [(w("a", 15_000, 15_000), 2)]
    store.put(w("b", 10_000, 10_000), 3)  # older than stream time - retention: ignored
    assert store.fetch("b") == []
    store.put(w("b", 10_001, 10_001), 4)  # exactly at the boundary: kept
    assert store.fetch("b") == [(w("b", 10_001, 10_001), 4)]


def test_expired_segments_are_dropped_whole(kind, context):
    store = open_store(kind, context, retention=2 * MINUTE)
    assert store.segment_interval == MINUTE
    context.stream_time = 2 * MINUTE + 10  # live from 10 ms
    ends = [("a", 10), ("b", MINUTE - 1), ("a", MINUTE + 5), ("c", 2 * MINUTE + 5)]
    for key, end in ends:  # segments 0, 0, 1, 2
        store.put(w(key, end, end), 1)
    assert entries(store) == 4
    # live from 1 m + 10 ms: segment 0 is all expired; segment 1 holds an expired session
    context.stream_time = 3 * MINUTE + 10
    assert entries(store) == 4  # dropping happens on the next write
    store.put(w("d", 3 * MINUTE + 10, 3 * MINUTE + 10), 1)
    assert entries(store) == 3  # segment 0 gone, segment 1 stays ...
    assert store.fetch("a") == []  # ... but its session is expired all the same
    assert [s for s, _ in store.all()] == [
        w("c", 2 * MINUTE + 5, 2 * MINUTE + 5),
        w("d", 3 * MINUTE + 10, 3 * MINUTE + 10),
    ]
    context.stream_time = 4 * MINUTE
    store.put(w("d", 4 * MINUTE, 4 * MINUTE), 2)
    assert entries(store) == 3  # segment 1 dropped: c, d and d remain
    assert [s.key for s, _ in store.all()] == ["c", "d", "d"]


def test_state_survives_reopening_the_inner_store(kind, context):
    plain = (kind[0], False)
    store = open_store(plain, context)
    context.stream_time = 1000
    store.put(w("a", 0, 10), 1)
    store.put(w("a", 5_000_000, 5_000_000), 2)  # ends after stream time
    store.put(w("b", 20, 30), 3)
    inner = store.inner
    store.close()
    assert not store.is_open
    reopened = SessionStore(inner, 86_400_000, Serdes.string(), Serdes.int())
    reopened.init(context)
    assert reopened.fetch("a") == [(w("a", 0, 10), 1), (w("a", 5_000_000, 5_000_000), 2)]
    assert reopened.find_sessions("a", 4_000_000, 6_000_000) == [(w("a", 5_000_000, 5_000_000), 2)]
    assert [s.key for s, _ in reopened.all()] == ["a", "a", "b"]  # one segment: by key


def test_changelog_replay_restores_everything(kind, context, tmp_path):
    """All state is in the bytes store: replaying its changelog into a fresh one (restore)
    gives the same sessions, segment drops included."""
    logged = (kind[0], True)
    store = open_store(logged, context, retention=2 * MINUTE)
    context.stream_time = MINUTE
    store.put(w("a", 10, 20), 1)
    store.put(w("a", 30, 40), 2)
    store.remove(w("a", 30, 40))
    store.put(w("b", MINUTE, MINUTE), 3)
    context.stream_time = LATER  # segment 0 expires and is dropped on the next put
    store.put(w("b", LATER, LATER), 4)
    records = store.inner.take_changelog()
    assert any(value is None and headers for _, value, headers in records)  # a range delete
    fresh_context = FakeContext(tmp_path / "restored")
    fresh_context.stream_time = context.stream_time
    restored = open_store((kind[0], False), fresh_context, retention=2 * MINUTE)
    apply_changelog(restored.inner, records)
    assert restored.all() == store.all() == [(w("b", LATER, LATER), 4)]
    fresh_context.stream_time = 2 * MINUTE  # an earlier stream time shows the kept segment
    assert [s for s, _ in restored.fetch("b")] == [w("b", MINUTE, MINUTE), w("b", LATER, LATER)]
    assert restored.fetch("a") == []


def test_closed_store_refuses_use(kind, context):
    store = open_store(kind, context)
    store.close()
    with pytest.raises(StoreError, match="not open"):
        store.fetch("a")


def test_explicit_serdes_win_over_defaults(kind, context):
    store = SessionStoreBuilder(supplier(kind), 1000, Serdes.int(), Serdes.json()).build()
    store.init(context)
    context.stream_time = 0
    store.put(Windowed(7, Window(0, 0)), {"n": [1, 2]})
    assert store.fetch(7) == [(Windowed(7, Window(0, 0)), {"n": [1, 2]})]


def test_negative_retention_is_rejected(kind):
    with pytest.raises(ValueError, match="retention"):
        SessionStore(supplier(kind).get(), -1)
