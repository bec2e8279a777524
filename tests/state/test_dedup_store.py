"""Contract tests of the dedup store, run over every registered bytes store kind."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtide.errors import StoreError, TopologyError
from streamtide.record import RecordMetadata
from streamtide.serde import Serdes
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.dedup import DedupStore, DedupStoreBuilder, decode_ts, encode_ts
from streamtide.state.stores import KeyValueBytesStoreSupplier, key_value_store_kinds

KINDS = key_value_store_kinds()


class FakeStoreContext:
    """The little a store needs from its task."""

    def __init__(self, state_dir: Path) -> None:
        self.application_id = "dedup-contract"
        self.task_id = "0_0"
        self.state_dir = state_dir
        self.default_key_serde = Serdes.bytes()
        self.default_value_serde = Serdes.bytes()
        self.metrics: Any = None
        self.registered: list[Any] = []

    def current_stream_time_ms(self) -> int:
        return -1

    def register(self, store: Any) -> None:
        self.registered.append(store)


@contextmanager
def opened(kind: str, name: str = "dedup", logging: bool = True) -> Iterator[DedupStore]:
    with tempfile.TemporaryDirectory() as tmp:
        supplier = KeyValueBytesStoreSupplier(name, kind)
        store = DedupStoreBuilder(supplier, logging_enabled=logging).build()
        store.init(FakeStoreContext(Path(tmp)))
        try:
            yield store
        finally:
            if store.is_open:
                store.close()


@pytest.fixture(
    params=[(kind, logging) for kind in KINDS for logging in (True, False)],
    ids=lambda p: f"{p[0]}-{'logged' if p[1] else 'unlogged'}",
)
def store(request: pytest.FixtureRequest) -> Iterator[DedupStore]:
    kind, logging = request.param
    with opened(kind, logging=logging) as opened_store:
        yield opened_store


def count(store: DedupStore) -> int:
    """Exact number of entries (``approximate_num_entries`` may overcount on RocksDB)."""
    return sum(1 for _ in store.entries())


def raw_count(store: DedupStore) -> int:
    """Exact number of keys in the bytes store below (both key families)."""
    return sum(1 for _ in store.inner.all())


def origin(offset: int, topic: str = "in", partition: int = 0) -> RecordMetadata:
    return RecordMetadata(topic, partition, offset)


def test_timestamp_encoding_keeps_order_across_zero() -> None:
    times = [-(2**63), -5000, -1, 0, 1, 5000, 2**63 - 1]
    encoded = [encode_ts(t) for t in times]
    assert encoded == sorted(encoded)
    assert [decode_ts(e) for e in encoded] == times


def test_store_kind_name_and_registration() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        context = FakeStoreContext(Path(tmp))
        store = DedupStoreBuilder(KeyValueBytesStoreSupplier("seen", KINDS[0])).build()
        assert store.kind == "dedup" and store.name == "seen"
        assert not store.is_open
        store.init(context)  # opens the inner bytes store, which registers itself
        assert store.is_open
        assert [s.name for s in context.registered] == ["seen"]
        assert isinstance(context.registered[0], KeyValueBytesStore)
        store.close()
        assert not store.is_open


def test_builder_rejects_unknown_kind() -> None:
    with pytest.raises(TopologyError, match="unknown store kind"):
        DedupStoreBuilder(KeyValueBytesStoreSupplier("x", "no-such-kind")).build()


def test_find_is_inclusive_and_ordered(store: DedupStore) -> None:
    for ts in (30, 10, 20):
        store.put(b"a", ts, origin(ts))
    assert [e.timestamp for e in store.find(b"a", 10, 30)] == [10, 20, 30]
    assert [e.timestamp for e in store.find(b"a", 11, 29)] == [20]
    assert [e.timestamp for e in store.find(b"a", 20, 20)] == [20]
    assert store.find(b"a", 31, 100) == []
    assert store.find(b"a", 30, 10) == []
    assert store.find(b"b", 0, 100) == []


def test_ids_that_prefix_each_other_stay_apart(store: DedupStore) -> None:
    ids = [b"", b"a", b"ab", b"a\x00", b"\xff", b"b"]
    for n, dedup_id in enumerate(ids):
        store.put(dedup_id, 100 + n, origin(n))
    for n, dedup_id in enumerate(ids):
        found = store.find(dedup_id, -(2**63), 2**63 - 1)
        assert [(e.dedup_id, e.timestamp, e.offset) for e in found] == [(dedup_id, 100 + n, n)]
    assert count(store) == len(ids)


def test_negative_times_and_clamped_bounds(store: DedupStore) -> None:
    store.put(b"a", -20, origin(1))
    store.put(b"a", 5, origin(2))
    assert [e.timestamp for e in store.find(b"a", -(2**70), -1)] == [-20]
    assert [e.timestamp for e in store.find(b"a", -20, 2**70)] == [-20, 5]
    assert [e.timestamp for e in store.fetch(b"a")] == [-20, 5]


def test_origins_round_trip(store: DedupStore) -> None:
    store.put(b"a", 1, RecordMetadata("clicks-é", 3, 2**40))
    store.put(b"a", 2, None)
    store.put(b"a", 3, 7)
    first, second, third = store.fetch(b"a")
    assert first.origin == RecordMetadata("clicks-é", 3, 2**40)
    assert first.is_same_record(RecordMetadata("clicks-é", 3, 2**40))
    assert not first.is_same_record(RecordMetadata("clicks-é", 2, 2**40))
    assert not first.is_same_record(RecordMetadata("other", 3, 2**40))
    assert not first.is_same_record(RecordMetadata("clicks-é", 3, 2**40 + 1))
    assert not first.is_same_record(None)
    assert second.origin is None and second.offset is None
    assert not second.is_same_record(None)  # records without offset never match
    assert third.offset == 7


def test_put_same_id_and_time_overwrites(store: DedupStore) -> None:
    store.put(b"a", 1, origin(1))
    store.put(b"a", 1, origin(2))
    assert [e.offset for e in store.fetch(b"a")] == [2]
    assert count(store) == 1


def test_purge_removes_only_older_entries_from_both_families(store: DedupStore) -> None:
    for ts in (5, 10, 15, 20):
        store.put(b"a", ts, origin(ts))
        store.put(b"", ts, origin(ts))
    assert store.purge_expired(15) == 4
    assert [e.timestamp for e in store.fetch(b"a")] == [15, 20]
    assert [e.timestamp for e in store.fetch(b"")] == [15, 20]  # an empty id at the bound stays
    assert count(store) == 4
    assert raw_count(store) == 8  # base + index, nothing left behind
    assert store.purge_expired(15) == 0
    assert store.purge_expired(2**70) == 4
    assert raw_count(store) == 0


def test_approximate_num_entries_counts_entries_not_keys() -> None:
    with opened("in_memory") as store:
        for n in range(5):
            store.put(b"id%d" % n, n, origin(n))
        assert store.approximate_num_entries() == 5
        store.purge_expired(3)
        assert store.approximate_num_entries() == 2


def test_remove(store: DedupStore) -> None:
    store.put(b"a", 1, origin(1))
    assert store.remove(b"a", 1) is True
    assert store.remove(b"a", 1) is False
    assert raw_count(store) == 0


def test_entries_lists_everything(store: DedupStore) -> None:
    store.put(b"b", 2, None)
    store.put(b"a", 1, origin(9))
    listed = [(e.dedup_id, e.timestamp, e.origin) for e in store.entries()]
    assert sorted(listed, key=lambda e: e[0]) == [(b"a", 1, origin(9)), (b"b", 2, None)]


def test_rejects_non_bytes_ids_and_bad_origins(store: DedupStore) -> None:
    with pytest.raises(StoreError, match="must be bytes"):
        store.put("a", 1, None)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="must be bytes"):
        store.find(None, 0, 1)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="origin"):
        store.put(b"a", 1, "offset 7")  # type: ignore[arg-type]


def test_closed_store_refuses_work() -> None:
    with opened(KINDS[0]) as store:
        store.close()
        with pytest.raises(StoreError):
            store.find(b"a", 0, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_all_state_lives_in_the_bytes_store(kind: str) -> None:
    """A second store over a copy of the bytes (what a restore produces) answers the same."""
    with opened(kind, "first") as first, opened(kind, "second") as second:
        for n in range(20):
            first.put(b"id%d" % (n % 3), n * 10, origin(n) if n % 4 else None)
        first.purge_expired(50)
        for key, value in first.inner.all():
            second.inner.put(key, value)
        assert list(second.entries()) == list(first.entries())
        assert second.find(b"id1", 60, 130) == first.find(b"id1", 60, 130)
        assert second.purge_expired(100) == first.purge_expired(100) > 0
        assert list(second.entries()) == list(first.entries())


class CountingBytesStore(KeyValueBytesStore):
    """Delegates to a real bytes store and counts the entries its scans hand out."""

    def __init__(self, inner: KeyValueBytesStore) -> None:
        self.inner = inner
        self.name = inner.name
        self.scanned = 0

    def init(self, context: Any) -> None:
        self.inner.init(context)

    def get(self, key: bytes) -> bytes | None:
        return self.inner.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self.inner.put(key, value)

    def range(self, from_key: Any, to_key: Any, reverse: bool = False) -> Iterator[Any]:
        for entry in self.inner.range(from_key, to_key, reverse):
            self.scanned += 1
            yield entry

    def approximate_num_entries(self) -> int:
        return self.inner.approximate_num_entries()

    @property
    def is_open(self) -> bool:
        return self.inner.is_open

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("kind", KINDS)
def test_find_and_purge_are_range_scans(kind: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        counting = CountingBytesStore(KeyValueBytesStoreSupplier("scan", kind).get())
        store = DedupStore(counting)
        store.init(FakeStoreContext(Path(tmp)))
        for n in range(1000):
            store.put(b"id%d" % (n % 50), n, origin(n))
        counting.scanned = 0
        found = store.find(b"id7", 400, 500)
        assert [e.timestamp for e in found] == [407, 457]
        assert counting.scanned == 2  # only the id's entries in the range
        counting.scanned = 0
        assert store.purge_expired(30) == 30
        assert counting.scanned == 30  # only the expired index entries
        counting.scanned = 0
        assert store.purge_expired(30) == 0
        assert counting.scanned == 0
        store.close()


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from([b"", b"a", b"ab", b"b"]), st.integers(-20, 20)),
        st.tuples(st.just("purge"), st.integers(-25, 25)),
        st.tuples(
            st.just("find"),
            st.sampled_from([b"", b"a", b"ab", b"b"]),
            st.integers(-25, 25),
            st.integers(-25, 25),
        ),
    ),
    max_size=40,
)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=60, deadline=None)
@given(ops=OPS)
def test_store_matches_a_list_model(kind: str, ops: list[tuple]) -> None:
    model: dict[tuple[bytes, int], int] = {}
    with opened(kind) as store:
        for n, op in enumerate(ops):
            if op[0] == "put":
                _, dedup_id, ts = op
                store.put(dedup_id, ts, origin(n))
                model[(dedup_id, ts)] = n
            elif op[0] == "purge":
                expired = [k for k in model if k[1] < op[1]]
                assert store.purge_expired(op[1]) == len(expired)
                for k in expired:
                    del model[k]
            else:
                _, dedup_id, lo, hi = op
                expected = sorted(
                    (ts, off) for (i, ts), off in model.items() if i == dedup_id and lo <= ts <= hi
                )
                assert [(e.timestamp, e.offset) for e in store.find(dedup_id, lo, hi)] == expected
        assert count(store) == len(model)
        assert sorted((e.dedup_id, e.timestamp) for e in store.entries()) == sorted(model)


@pytest.mark.parametrize("kind", KINDS)
def test_purges_in_a_long_batch_do_not_rewalk_earlier_tombstones(kind: str, monkeypatch) -> None:
    """Within one uncommitted batch the write buffer holds every purged entry's tombstone;
    purging must still examine only the newly expired entries (linear, not quadratic)."""
    import bisect

    from streamtide.state.transaction import WriteBuffer

    examined = 0
    overlay = WriteBuffer.overlay

    def counting_overlay(self, below, from_key, to_key, reverse=False):
        nonlocal examined
        keys = self._keys
        lo = 0 if from_key is None else bisect.bisect_left(keys, from_key)
        hi = len(keys) if to_key is None else bisect.bisect_right(keys, to_key)
        examined += max(0, hi - lo)
        return overlay(self, below, from_key, to_key, reverse)

    monkeypatch.setattr(WriteBuffer, "overlay", counting_overlay)
    with tempfile.TemporaryDirectory() as tmp:
        store = DedupStore(KeyValueBytesStoreSupplier("batch", kind, logging_enabled=True).get())
        store.init(FakeStoreContext(Path(tmp)))
        records = 3000
        for n in range(records):
            store.purge_expired(n - 10)
            store.put(b"id%d" % n, n, origin(n))
        assert examined <= 4 * records, f"{examined} buffered keys examined"
        assert [e.timestamp for e in store.entries()] == list(range(records - 11, records))
        store.close()


def test_the_time_index_stays_out_of_the_changelog_and_is_derived_when_applied() -> None:
    """Writes, purges and a replay: the changelog holds only entries (two records per entry
    over its life); applying it, or a changelog of an older release that logged the index
    too, gives the same bytes, index included."""
    from streamtide.state.changelogging import ChangeLoggingKeyValueBytesStore, apply_changelog
    from streamtide.state.dedup import INDEX_KEYS

    logged = ChangeLoggingKeyValueBytesStore(KeyValueBytesStoreSupplier("d", "in_memory").get())
    logged.open_standalone(buffered=True)
    store = DedupStore(logged)
    changelog: list[tuple[bytes, bytes | None, tuple]] = []
    for step in range(6):
        store.write_entries([(b"id%d" % i, step * 100 + i, ("in", 0, i), True) for i in range(5)])
        store.purge_expired(step * 100 - 150)
        keys, values, headers = logged.take_changelog_columns()
        changelog += zip(keys, values, headers)
        logged.apply_sent()
    assert changelog and all(key[:1] == b"\x01" for key, _, _ in changelog)
    assert len(changelog) == 30 + 2 * 5 * 2  # 30 puts; tombstones of the 20 purged
    for records in (changelog, [*changelog, *old_index_records(store)]):
        replica = DedupStore(KeyValueBytesStoreSupplier("r", "in_memory").get()).open_standalone()
        apply_changelog(replica.inner, records, INDEX_KEYS)
        assert list(replica.inner.all()) == list(logged.inner.all())


def old_index_records(store: DedupStore) -> list[tuple[bytes, bytes | None, tuple]]:
    """The index records a changelog of an older release also held for the live entries."""
    return [(k, v, ()) for k, v in store.inner.range(b"\x02", b"\x03")]
