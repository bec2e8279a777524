"""Store snapshots (state/snapshots.py): capture, archive, list, load, prune."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from streamtide.errors import StoreError
from streamtide.state import InMemoryKeyValueBytesStore, RocksDBKeyValueBytesStore
from streamtide.state.snapshots import SnapshotStore

ENTRIES = [(b"%03d" % i, b"v%d" % i) for i in range(120)]


def _rocks(path: Path) -> RocksDBKeyValueBytesStore:
    return RocksDBKeyValueBytesStore("kv").open_standalone(path)


@pytest.mark.parametrize("source_kind", ["rocksdb", "in_memory"])
@pytest.mark.parametrize("target_kind", ["rocksdb", "in_memory"])
def test_snapshot_round_trips_between_store_kinds(
    tmp_path: Path, source_kind: str, target_kind: str
) -> None:
    snapshots = SnapshotStore(tmp_path / "snapshots")
    source = (
        _rocks(tmp_path / "src")
        if source_kind == "rocksdb"
        else InMemoryKeyValueBytesStore("kv").open_standalone()
    )
    source.put_all(ENTRIES)
    snapshots.take("app", "0_1", source, 120)
    source.put(b"later", b"not in the snapshot")
    source.close()
    target = (
        _rocks(tmp_path / "dst")
        if target_kind == "rocksdb"
        else InMemoryKeyValueBytesStore("kv").open_standalone()
    )
    assert snapshots.restore_into("app", "0_1", target, 120) == 120
    assert list(target.all()) == ENTRIES
    target.put(b"writable", b"yes")
    target.close()


def test_listing_newest_and_prune(tmp_path: Path) -> None:
    snapshots = SnapshotStore(f"file://{tmp_path / 'snapshots'}")
    store = InMemoryKeyValueBytesStore("kv").open_standalone()
    assert snapshots.offsets("app", "0_0", "kv") == []
    for offset in (5, 50, 17):
        store.put(b"k", b"%d" % offset)
        snapshots.take("app", "0_0", store, offset)
    assert snapshots.offsets("app", "0_0", "kv") == [5, 17, 50]
    assert snapshots.newest("app", "0_0", "kv", at_most=49) == 17
    assert snapshots.newest("app", "0_0", "kv", at_least=18, at_most=49) is None
    assert snapshots.prune("app", "0_0", "kv", keep=2) == 1
    assert snapshots.offsets("app", "0_0", "kv") == [17, 50]
    assert not [
        p
        for p in (tmp_path / "snapshots" / "app" / "0_0" / "kv").iterdir()
        if p.name.startswith(".tmp")
    ]


def test_unsafe_archive_members_are_refused(tmp_path: Path) -> None:
    snapshots = SnapshotStore(tmp_path / "snapshots")
    directory = tmp_path / "snapshots" / "app" / "0_0" / "kv"
    directory.mkdir(parents=True)
    with tarfile.open(directory / f"{3:020d}.tar", "w") as tar:
        info = tarfile.TarInfo("../../escape.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    store = InMemoryKeyValueBytesStore("kv").open_standalone()
    with pytest.raises(StoreError, match="unsafe"):
        snapshots.restore_into("app", "0_0", store, 3)
    assert not (tmp_path / "escape.txt").exists()
