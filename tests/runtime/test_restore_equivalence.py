"""Restore equivalence: for random operation sequences, committed in batches (some aborted),
a store rebuilt from its changelog -- with or without snapshots in between, from scratch or
from its checkpoint -- equals the original, for every store type and every bytes-store kind.

Every store type is a layout over the supplier's bytes store, so the test compares both the raw
bytes and what the store's public API returns at the same stream time.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from durable_support import file_log, open_task, store_topology
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamtide.serde import Serdes
from streamtide.state.dedup import DedupStoreBuilder
from streamtide.state.session_store import SessionStoreBuilder
from streamtide.state.stores import KeyValueBytesStoreSupplier, KeyValueStoreBuilder
from streamtide.state.window_store import WindowStoreBuilder
from streamtide.window import Window, Windowed

MINUTE = 60_000
KEYS = st.sampled_from(["a", "b", "c", "dd"])
TIMES = st.integers(min_value=0, max_value=10 * MINUTE)


def _kv(supplier: KeyValueBytesStoreSupplier) -> Any:
    return KeyValueStoreBuilder(supplier, Serdes.string(), Serdes.int())


def _kv_op(run: Any, op: tuple) -> None:  # type: ignore[type-arg]
    store = run.store("s")
    if op[0] == "put":
        store.put(op[1], op[2])
    else:  # the bytes level: a range delete, as segmented stores issue
        run.stores.logged["s"].delete_range(op[1].encode(), op[2].encode())


def _dedup_op(run: Any, op: tuple) -> None:  # type: ignore[type-arg]
    store = run.store("s")
    if op[0] == "put":
        store.put(op[1].encode(), op[2], op[2] // 7)
    elif op[0] == "remove":
        store.remove(op[1].encode(), op[2])
    else:
        store.purge_expired(op[2])


def _session_op(run: Any, op: tuple) -> None:  # type: ignore[type-arg]
    store = run.store("s")
    if op[0] == "time":
        run.task.stream_time = max(run.task.stream_time, op[2])
    else:
        start = op[2]
        session = Windowed(op[1], Window(start, start + op[3]))
        store.put(session, op[3] if op[0] == "put" else None)


def _window_op(run: Any, op: tuple) -> None:  # type: ignore[type-arg]
    store = run.store("s")
    if op[0] == "time":
        run.task.stream_time = max(run.task.stream_time, op[2])
    else:
        store.put(op[1], op[2], op[3] if op[0] == "put" else None)


KV_OPS = st.one_of(
    st.tuples(st.just("put"), KEYS, st.one_of(st.none(), st.integers(0, 99))),
    st.tuples(st.just("put"), KEYS, st.integers(0, 99)),
    st.tuples(st.just("range"), st.sampled_from(["a", "b"]), st.sampled_from(["c", "e"])),
)
DEDUP_OPS = st.tuples(st.sampled_from(["put", "put", "remove", "purge"]), KEYS, TIMES)
SESSION_OPS = st.tuples(
    st.sampled_from(["put", "put", "remove", "time"]), KEYS, TIMES, st.integers(0, MINUTE)
)
WINDOW_OPS = st.tuples(
    st.sampled_from(["put", "put", "delete", "time"]), KEYS, TIMES, st.integers(0, 9)
)

STORE_TYPES: dict[
    str, tuple[Callable[[KeyValueBytesStoreSupplier], Any], Callable, Callable, Any]
] = {
    "key_value": (_kv, _kv_op, lambda s: list(s.all()), KV_OPS),
    "dedup": (DedupStoreBuilder, _dedup_op, lambda s: list(s.entries()), DEDUP_OPS),
    "session": (
        lambda sup: SessionStoreBuilder(sup, 3 * MINUTE, Serdes.string(), Serdes.int()),
        _session_op,
        lambda s: s.all(),
        SESSION_OPS,
    ),
    "window": (
        lambda sup: WindowStoreBuilder(sup, MINUTE, 4 * MINUTE, Serdes.string(), Serdes.int()),
        _window_op,
        lambda s: s.all(),
        WINDOW_OPS,
    ),
}

CASES = [
    (store_type, kind, interval)
    for store_type in STORE_TYPES
    for kind in ("in_memory", "rocksdb")
    for interval in (0, 2)
]


def _batches(ops: Any) -> Any:
    """Batches of operations, each committed or aborted."""
    batch = st.tuples(st.lists(ops, max_size=8), st.sampled_from([True, True, True, False]))
    return st.lists(batch, min_size=1, max_size=6)


def _check(store_type: str, kind: str, interval: int, batches: list) -> None:  # type: ignore[type-arg]
    make_builder, apply_op, view, _ = STORE_TYPES[store_type]
    topology = store_topology(make_builder(KeyValueBytesStoreSupplier("s", kind)))
    options = {"snapshot_interval": interval}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        log = file_log(root / "log")
        run = open_task(log, topology, root / "original", **options)
        for ops, committed in batches:
            for op in ops:
                apply_op(run, op)
            if committed:
                run.commit()
            else:
                run.commit(seal=False, confirm=False)
                run.stores.abort()
        stream_time = run.task.stream_time
        raw = list(run.stores.logged["s"].all())
        local = list(run.stores.logged["s"].inner.all())
        public = view(run.store("s"))
        run.close()
        assert raw == local  # nothing unconfirmed is left in the local store
        for state_dir in ("rebuilt", "original"):  # from scratch, then from the checkpoint
            again = open_task(log, topology, root / state_dir, **options)
            again.task.stream_time = stream_time
            assert list(again.stores.logged["s"].inner.all()) == raw
            assert view(again.store("s")) == public
            again.close()


@pytest.mark.parametrize(
    ("store_type", "kind", "interval"),
    CASES,
    ids=[f"{t}-{k}-{'snapshots' if i else 'changelog'}" for t, k, i in CASES],
)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_rebuilt_store_equals_the_original(
    store_type: str, kind: str, interval: int, data: st.DataObject
) -> None:
    _check(store_type, kind, interval, data.draw(_batches(STORE_TYPES[store_type][3])))


def test_snapshots_were_really_used() -> None:
    """The snapshot variant restores from a snapshot, not only from the changelog."""
    batches = [([("put", k, i) for k in "abc"], True) for i in range(6)]
    make_builder, apply_op, _, _ = STORE_TYPES["key_value"]
    topology = store_topology(make_builder(KeyValueBytesStoreSupplier("s", "rocksdb")))
    with tempfile.TemporaryDirectory() as tmp:
        log = file_log(Path(tmp) / "log")
        run = open_task(log, topology, Path(tmp) / "a", snapshot_interval=2)
        for ops, _ in batches:
            for op in ops:
                apply_op(run, op)
            run.commit()
        run.close()
        assert (
            log.begin_offset("app-s-changelog", 0) == 12
        )  # below the older of the two kept snapshots (12, 18)
        again = open_task(log, topology, Path(tmp) / "b", snapshot_interval=2)
        assert again.metrics.get("records-restored", 0) == 0
        assert dict(again.store("s").all()) == {"a": 5, "b": 5, "c": 5}
        again.close()
