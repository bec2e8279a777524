"""One contract for every ordered bytes store: each registered kind, bare and changelogged.

The changelogged variants buffer their writes (as inside a task), and the ``layered`` ones
also move them halfway to the sent buffer, so reads go through both buffers and the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamtide.errors import StoreError
from streamtide.state import ChangeLoggingKeyValueBytesStore, KeyValueBytesStore
from streamtide.state.stores import KeyValueBytesStoreSupplier, key_value_store_kinds

KINDS = key_value_store_kinds()


def _open(kind: str, variant: str) -> KeyValueBytesStore:
    supplier = KeyValueBytesStoreSupplier("contract", kind, logging_enabled=variant != "bare")
    store = supplier.get()
    if variant == "bare":
        return store.open_standalone()  # type: ignore[attr-defined,no-any-return]
    assert isinstance(store, ChangeLoggingKeyValueBytesStore)
    return store.open_standalone(buffered=True)


VARIANTS = [(k, v) for k in KINDS for v in ("bare", "logged", "layered")]


@pytest.fixture(params=VARIANTS, ids=[f"{k}-{v}" for k, v in VARIANTS])
def opened(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[KeyValueBytesStore, Callable[[], None]]]:
    kind, variant = request.param
    store = _open(kind, variant)

    def checkpoint() -> None:
        """Move writes one step towards the local store (no-op for bare stores)."""
        if variant == "layered":
            store.take_changelog()  # type: ignore[attr-defined]
        elif variant == "logged":
            store.take_changelog()  # type: ignore[attr-defined]
            store.apply_sent()  # type: ignore[attr-defined]

    yield store, checkpoint
    store.close()


@pytest.fixture
def store(opened: tuple[KeyValueBytesStore, Callable[[], None]]) -> KeyValueBytesStore:
    return opened[0]


def test_kinds_include_in_memory_and_rocksdb() -> None:
    assert {"in_memory", "rocksdb"} <= set(KINDS)


def test_get_put_overwrite_delete(store: KeyValueBytesStore) -> None:
    assert store.get(b"a") is None
    store.put(b"a", b"1")
    store.put(b"a", b"2")
    assert store.get(b"a") == b"2"
    store.put(b"a", None)
    assert store.get(b"a") is None
    store.put(b"", b"empty key")
    assert store.get(b"") == b"empty key"


def test_put_if_absent_and_delete_return_previous(store: KeyValueBytesStore) -> None:
    assert store.put_if_absent(b"k", b"1") is None
    assert store.put_if_absent(b"k", b"2") == b"1"
    assert store.get(b"k") == b"1"
    assert store.delete(b"k") == b"1"
    assert store.delete(b"k") is None
    assert store.get(b"k") is None


def test_put_all_with_tombstones(opened: tuple[KeyValueBytesStore, Callable[[], None]]) -> None:
    store, checkpoint = opened
    store.put_all([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    checkpoint()
    store.put_all([(b"b", None), (b"d", b"4"), (b"a", b"9")])
    assert list(store.all()) == [(b"a", b"9"), (b"c", b"3"), (b"d", b"4")]


def test_order_is_unsigned_bytes(store: KeyValueBytesStore) -> None:
    keys = [b"\xff", b"\x80", b"\x7f", b"\x00", b"a", b"ab", b"b", b"\x00\x00"]
    for key in keys:
        store.put(key, key)
    assert [k for k, _ in store.all()] == sorted(keys)


def test_range_bounds_are_inclusive_and_reversible(
    opened: tuple[KeyValueBytesStore, Callable[[], None]],
) -> None:
    store, checkpoint = opened
    for key in (b"a", b"b", b"c"):
        store.put(key, key.upper())
    checkpoint()
    for key in (b"d", b"e"):
        store.put(key, key.upper())
    keys = lambda it: [k for k, _ in it]  # noqa: E731
    assert keys(store.range(b"b", b"d")) == [b"b", b"c", b"d"]
    assert keys(store.range(b"b", b"d", reverse=True)) == [b"d", b"c", b"b"]
    assert keys(store.range(None, b"b")) == [b"a", b"b"]
    assert keys(store.range(b"d", None)) == [b"d", b"e"]
    assert keys(store.range(None, None, reverse=True)) == [b"e", b"d", b"c", b"b", b"a"]
    assert keys(store.range(b"bb", b"cc")) == [b"c"]
    assert keys(store.range(b"d", b"b")) == []
    assert keys(store.range(b"x", b"z")) == []


def test_prefix_scan(opened: tuple[KeyValueBytesStore, Callable[[], None]]) -> None:
    store, checkpoint = opened
    for key in (b"ab", b"a\xff", b"a", b"b", b"\xff\xff"):
        store.put(key, b"v")
    checkpoint()
    store.put(b"a\x00", b"v")
    store.put(b"ab", None)
    assert [k for k, _ in store.prefix_scan(b"a")] == [b"a", b"a\x00", b"a\xff"]
    assert [k for k, _ in store.prefix_scan(b"\xff")] == [b"\xff\xff"]
    assert len(list(store.prefix_scan(b""))) == 5
    assert list(store.prefix_scan(b"zz")) == []


def test_delete_range_is_end_exclusive(
    opened: tuple[KeyValueBytesStore, Callable[[], None]],
) -> None:
    store, checkpoint = opened
    for key in (b"a", b"b", b"c", b"d", b"e"):
        store.put(key, key)
    checkpoint()
    store.delete_range(b"b", b"d")
    assert [k for k, _ in store.all()] == [b"a", b"d", b"e"]
    store.put(b"c", b"again")
    assert store.get(b"c") == b"again"
    store.delete_range(b"d", None)
    assert [k for k, _ in store.all()] == [b"a", b"c"]
    store.delete_range(None, b"b")
    assert [k for k, _ in store.all()] == [b"c"]
    store.delete_range(b"z", b"a")  # empty range: no-op
    assert store.get(b"c") == b"again"


def test_clear(store: KeyValueBytesStore) -> None:
    store.put_all([(bytes([i]), b"v") for i in range(50)])
    store.clear()
    assert list(store.all()) == []
    store.put(b"x", b"1")
    assert list(store.all()) == [(b"x", b"1")]


def test_approximate_num_entries_after_distinct_inserts(store: KeyValueBytesStore) -> None:
    store.put_all([(f"k{i:04d}".encode(), b"v") for i in range(300)])
    assert store.approximate_num_entries() == 300


def test_iteration_survives_writes(store: KeyValueBytesStore) -> None:
    for i in range(10):
        store.put(bytes([i]), b"v")
    seen = []
    for key, _ in store.all():
        seen.append(key)
        store.put(key, None)  # deleting the current entry while iterating is safe
    assert seen == [bytes([i]) for i in range(10)]
    assert list(store.all()) == []


def test_none_key_is_rejected(store: KeyValueBytesStore) -> None:
    with pytest.raises(StoreError):
        store.put(None, b"v")  # type: ignore[arg-type]


def test_closed_store_raises(store: KeyValueBytesStore) -> None:
    store.close()
    assert not store.is_open
    with pytest.raises(StoreError):
        store.get(b"a")
    with pytest.raises(StoreError):
        store.put(b"a", b"1")


KEYS = st.binary(min_size=0, max_size=3)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEYS, st.binary(min_size=0, max_size=3)),
        st.tuples(st.just("delete"), KEYS, st.none()),
        st.tuples(st.just("delete_range"), KEYS, st.one_of(st.none(), KEYS)),
        st.tuples(st.just("step"), st.none(), st.none()),
    ),
    max_size=40,
)
QUERIES = st.lists(st.tuples(st.one_of(st.none(), KEYS), st.one_of(st.none(), KEYS)), max_size=4)


@pytest.mark.parametrize(("kind", "variant"), VARIANTS, ids=[f"{k}-{v}" for k, v in VARIANTS])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, queries=QUERIES)
def test_matches_a_sorted_dict_model(
    kind: str, variant: str, ops: list[tuple], queries: list[tuple]
) -> None:
    store = _open(kind, variant)
    model: dict[bytes, bytes] = {}
    try:
        for op, key, arg in ops:
            if op == "put":
                store.put(key, arg)
                model[key] = arg
            elif op == "delete":
                store.put(key, None)
                model.pop(key, None)
            elif op == "delete_range":
                store.delete_range(key, arg)
                for k in [k for k in model if k >= key and (arg is None or k < arg)]:
                    del model[k]
            elif variant != "bare":
                store.take_changelog()  # type: ignore[attr-defined]
                if variant == "logged":
                    store.apply_sent()  # type: ignore[attr-defined]
        expected = sorted(model.items())
        assert list(store.all()) == expected
        assert list(store.range(None, None, reverse=True)) == expected[::-1]
        for lo, hi in queries:
            want = [
                (k, v) for k, v in expected if (lo is None or k >= lo) and (hi is None or k <= hi)
            ]
            assert list(store.range(lo, hi)) == want
            assert list(store.range(lo, hi, reverse=True)) == want[::-1]
            if lo is not None:
                assert list(store.prefix_scan(lo)) == [
                    (k, v) for k, v in expected if k.startswith(lo)
                ]
        for key in {k for _, k, _ in ops if k is not None}:
            assert store.get(key) == model.get(key)
    finally:
        store.close()
