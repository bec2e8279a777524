"""Contract tests of the window store, run over every registered bytes store kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtide.errors import StoreError
from streamtide.runtime.metrics import TaskMetrics
from streamtide.serde import Serdes
from streamtide.state.changelogging import apply_changelog
from streamtide.state.stores import KeyValueBytesStoreSupplier, key_value_store_kinds
from streamtide.state.window_store import WindowStore, WindowStoreBuilder
from streamtide.window import Window, Windowed

MINUTE = 60_000
SIZE = 10_000


class FakeContext:
    """The part of a task a store sees, with a stream time the test moves."""

    application_id = "window-store-test"
    task_id = "0_0"

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.default_key_serde = Serdes.string()
        self.default_value_serde = Serdes.int()
        self.metrics = TaskMetrics()
        self.stream_time = -1

    def current_stream_time_ms(self) -> int:
        return self.stream_time

    def register(self, store) -> None:
        pass


VARIANTS = [(kind, logged) for kind in key_value_store_kinds() for logged in (False, True)]


@pytest.fixture(params=VARIANTS, ids=[f"{k}-{'logged' if lg else 'plain'}" for k, lg in VARIANTS])
def kind(request) -> tuple[str, bool]:
    """A bytes store kind, plain or wrapped in the changelogging (write-buffering) store."""
    return request.param


@pytest.fixture
def context(tmp_path) -> FakeContext:
    return FakeContext(tmp_path)


def open_store(
    kind: tuple[str, bool], context: FakeContext, retention: int = 86_400_000, size: int = SIZE
) -> WindowStore:
    supplier = KeyValueBytesStoreSupplier("windows", kind[0])
    store = WindowStoreBuilder(supplier, size, retention, logging_enabled=kind[1]).build()
    store.init(context)
    return store


def entries(store: WindowStore) -> int:
    """Entries physically in the bytes store, expired or not."""
    return sum(1 for _ in store.inner.all())


def w(key: str, start: int, size: int = SIZE) -> Windowed:
    return Windowed(key, Window(start, start + size))


def test_kind_and_point_reads(kind, context):
    store = open_store(kind, context)
    assert store.kind == "window" and store.name == "windows"
    context.stream_time = 100_000
    store.put("a", 20_000, 1)
    store.put("a", 20_000, 2)  # overwrite
    store.put("a", 30_000, 3)
    assert store.get("a", 20_000) == 2
    assert store.get("a", 25_000) is None
    assert store.get("b", 20_000) is None
    store.put("a", 20_000, None)  # None deletes
    assert store.get("a", 20_000) is None
    assert store.fetch("a") == [(w("a", 30_000), 3)]


def test_fetch_by_key_and_time_range_ordered_by_start(kind, context):
    store = open_store(kind, context, retention=2 * MINUTE)  # one segment per minute
    context.stream_time = 3 * MINUTE
    for start in (150_000, 5_000, 60_000, 55_000, 120_000):
        store.put("a", start, start // 1000)
    store.put("ab", 60_000, 99)
    store.put("", 60_000, 98)
    assert [(s.window.start, v) for s, v in store.fetch("a")] == [
        (55_000, 55),
        (60_000, 60),
        (120_000, 120),
        (150_000, 150),
    ]  # 5_000 ended before 3 m - 2 m: expired
    assert [s.window.start for s, _ in store.fetch("a", 60_000, 120_000)] == [60_000, 120_000]
    assert [s.window.start for s, _ in store.fetch("a", 60_001, 119_999)] == []
    assert store.fetch("ab") == [(w("ab", 60_000), 99)]
    assert store.fetch("") == [(w("", 60_000), 98)]


def test_fetch_all_ordered_by_start_then_key(kind, context):
    store = open_store(kind, context)
    context.stream_time = 100_000
    for key, start in [("b", 20_000), ("a", 30_000), ("c", 10_000), ("a", 20_000)]:
        store.put(key, start, 1)
    assert [(s.key, s.window.start) for s, _ in store.fetch_all()] == [
        ("c", 10_000),
        ("a", 20_000),
        ("b", 20_000),
        ("a", 30_000),
    ]
    assert [(s.key, s.window.start) for s, _ in store.fetch_all(15_000, 25_000)] == [
        ("a", 20_000),
        ("b", 20_000),
    ]
    assert store.all() == store.fetch_all()


def test_windows_expire_after_retention_past_their_end(kind, context):
    store = open_store(kind, context, retention=20_000)
    context.stream_time = 40_000
    store.put("a", 10_000, 1)  # [10 s, 20 s): kept while 20 s >= stream time - 20 s
    context.stream_time = 40_000
    assert store.get("a", 10_000) == 1
    context.stream_time = 40_001
    assert store.get("a", 10_000) is None
    assert store.fetch("a") == [] and store.fetch_all() == []
    store.put("a", 10_000, 5)  # expired window: the write is ignored
    assert store.fetch("a", 0, 20_000) == []
    store.put("a", 10_001, 6)  # ends at stream time - retention: kept
    assert store.fetch("a") == [(w("a", 10_001), 6)]


def test_expired_segments_are_dropped_whole(kind, context):
    store = open_store(kind, context, retention=2 * MINUTE)
    assert store.segment_interval == MINUTE
    context.stream_time = 2 * MINUTE
    for key, start in [("a", 0), ("b", 50_000), ("a", 70_000), ("c", 130_000)]:
        store.put(key, start, 1)  # segments 0, 0, 1, 2
    assert entries(store) == 4
    # windows starting before 4 m - 2 m - 10 s = 110 s are expired: all of segment 0 and one
    # window of segment 1, which is kept for its live part
    context.stream_time = 4 * MINUTE
    store.put("d", 4 * MINUTE, 1)
    assert entries(store) == 3
    assert [(s.key, s.window.start) for s, _ in store.all()] == [("c", 130_000), ("d", 240_000)]


def test_changelog_replay_restores_everything(kind, context, tmp_path):
    store = open_store((kind[0], True), context, retention=2 * MINUTE)
    context.stream_time = MINUTE
    store.put("a", 0, 1)
    store.put("a", 50_000, 2)
    store.put("b", 50_000, 3)
    store.put("b", 50_000, None)
    context.stream_time = 4 * MINUTE
    store.put("a", 4 * MINUTE, 4)
    records = store.inner.take_changelog()
    fresh = FakeContext(tmp_path / "restored")
    fresh.stream_time = context.stream_time
    restored = open_store((kind[0], False), fresh, retention=2 * MINUTE)
    apply_changelog(restored.inner, records)
    assert restored.all() == store.all() == [(w("a", 4 * MINUTE), 4)]
    assert entries(restored) == 1  # segment 0 was dropped in the changelog too


def test_state_survives_reopening_the_inner_store(kind, context):
    store = open_store((kind[0], False), context)
    context.stream_time = 1000
    store.put("a", 0, 1)
    store.put("a", 9_000_000, 2)  # starts after stream time
    inner = store.inner
    store.close()
    reopened = WindowStore(inner, SIZE, 86_400_000, Serdes.string(), Serdes.int())
    reopened.init(context)
    assert reopened.fetch("a") == [(w("a", 0), 1), (w("a", 9_000_000), 2)]


def test_none_key_closed_store_and_bad_arguments(kind, context):
    store = open_store(kind, context)
    with pytest.raises(StoreError, match="None key"):
        store.put(None, 0, 1)
    store.close()
    with pytest.raises(StoreError, match="not open"):
        store.get("a", 0)
    inner = KeyValueBytesStoreSupplier("x", kind[0]).get()
    with pytest.raises(ValueError, match="size"):
        WindowStore(inner, 0, 1000)
    with pytest.raises(ValueError, match="retention"):
        WindowStore(inner, 10, -1)
