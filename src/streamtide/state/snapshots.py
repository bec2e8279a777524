"""Store snapshots: a store's committed contents at a changelog offset, archived next to the log.

A snapshot bounds restore time: a task that must rebuild a store loads the newest snapshot and
replays only the changelog after it, and changelog segments older than the newest snapshot may
be deleted. Layout (``root`` is usually ``<log root>/_snapshots``)::

    <root>/<application>/<task>/<store>/<offset, 20 digits>.tar

The tar holds ``snapshot.json`` (format, store, offset) and either ``db/`` (a RocksDB
checkpoint of a RocksDB store) or ``entries.arrow`` (all entries of any other store). Archives
are written under a temporary name and renamed, so a listed snapshot is always whole. Files go
through ``pyarrow.fs``, so ``root`` may also be an object store URI.
"""

from __future__ import annotations

import json
import os
import tarfile
import tempfile
import uuid
from pathlib import Path
from typing import cast

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.ipc as ipc
from rocksdict import AccessType, Options, Rdict

from streamtide.errors import StoreError
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.rocksdb import WRITE_BATCH_SIZE, RocksDBKeyValueBytesStore

_SUFFIX = ".tar"
_META = "snapshot.json"
_ENTRIES_SCHEMA = pa.schema([pa.field("key", pa.binary()), pa.field("value", pa.binary())])


def capture(store: KeyValueBytesStore, offset: int, workdir: Path) -> Path:
    """Write a snapshot of ``store`` (current to changelog ``offset``) into ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    if isinstance(store, RocksDBKeyValueBytesStore):
        store.checkpoint_to(workdir / "db")
        fmt = "rocksdb-checkpoint"
    else:
        with ipc.new_file(str(workdir / "entries.arrow"), _ENTRIES_SCHEMA) as writer:
            keys: list[bytes] = []
            values: list[bytes] = []
            for key, value in store.all():
                keys.append(key)
                values.append(value)
                if len(keys) >= WRITE_BATCH_SIZE:
                    writer.write_batch(pa.record_batch([keys, values], schema=_ENTRIES_SCHEMA))
                    keys, values = [], []
            if keys:
                writer.write_batch(pa.record_batch([keys, values], schema=_ENTRIES_SCHEMA))
        fmt = "entries"
    meta = {"format": fmt, "store": store.name, "offset": offset}
    (workdir / _META).write_text(json.dumps(meta), encoding="utf-8")
    return workdir


def load(store: KeyValueBytesStore, snapshot_dir: Path) -> int:
    """Fill an *empty* ``store`` from an unpacked snapshot; returns the snapshot's offset."""
    meta = json.loads((snapshot_dir / _META).read_text(encoding="utf-8"))
    if meta.get("format") == "rocksdb-checkpoint":
        if isinstance(store, RocksDBKeyValueBytesStore):
            store.replace_with(snapshot_dir / "db")
        else:
            _copy_rocksdb(snapshot_dir / "db", store)
    elif meta.get("format") == "entries":
        table = ipc.open_file(str(snapshot_dir / "entries.arrow")).read_all()
        for batch in table.to_batches(WRITE_BATCH_SIZE):
            keys, values = batch.column(0).to_pylist(), batch.column(1).to_pylist()
            store.put_all(zip(keys, values))
    else:
        raise StoreError(f"unknown snapshot format {meta.get('format')!r} in {snapshot_dir}")
    return int(meta["offset"])


def _copy_rocksdb(db_dir: Path, store: KeyValueBytesStore) -> None:
    db = Rdict(str(db_dir), Options(raw_mode=True), access_type=AccessType.read_only(False))
    try:
        batch: list[tuple[bytes, bytes | None]] = []
        for key, value in db.items():
            batch.append((cast(bytes, key), value))  # raw mode: keys are bytes
            if len(batch) >= WRITE_BATCH_SIZE:
                store.put_all(batch)
                batch = []
        if batch:
            store.put_all(batch)
    finally:
        db.close()


class SnapshotStore:
    """Snapshot archives under ``root`` (a local directory or a ``pyarrow.fs`` URI)."""

    def __init__(self, root: str | Path) -> None:
        root = str(root)
        if "://" in root and not root.startswith("file://"):
            self.fs, self.root = pafs.FileSystem.from_uri(root)
            self._local = False
        else:
            path = root[len("file://") :] if root.startswith("file://") else root
            self.fs, self.root = pafs.LocalFileSystem(), os.path.abspath(path)
            self._local = True

    def __repr__(self) -> str:
        return f"SnapshotStore({self.root!r})"

    def _dir(self, application_id: str, task_id: str, store: str) -> str:
        return f"{self.root}/{application_id}/{task_id}/{store}"

    def offsets(self, application_id: str, task_id: str, store: str) -> list[int]:
        """Offsets of the store's snapshots, oldest first."""
        selector = pafs.FileSelector(
            self._dir(application_id, task_id, store), allow_not_found=True
        )
        found = []
        for info in self.fs.get_file_info(selector):
            name = info.base_name
            if name.endswith(_SUFFIX) and name[: -len(_SUFFIX)].isdigit():
                found.append(int(name[: -len(_SUFFIX)]))
        return sorted(found)

    def newest(
        self, application_id: str, task_id: str, store: str, *, at_least: int = 0, at_most: int
    ) -> int | None:
        """The newest snapshot offset in ``[at_least, at_most]``, or None."""
        usable = [
            o for o in self.offsets(application_id, task_id, store) if at_least <= o <= at_most
        ]
        return usable[-1] if usable else None

    def upload(self, application_id: str, task_id: str, store: str, offset: int, src: Path) -> str:
        """Archive the directory ``src`` as the store's snapshot at ``offset``."""
        directory = self._dir(application_id, task_id, store)
        self.fs.create_dir(directory, recursive=True)
        final = f"{directory}/{offset:020d}{_SUFFIX}"
        tmp = f"{directory}/.tmp-{uuid.uuid4().hex}"
        try:
            with (
                self.fs.open_output_stream(tmp) as out,
                tarfile.open(fileobj=out, mode="w|") as tar,
            ):
                tar.add(str(src), arcname=".")
            if self._local:
                _fsync(tmp)
            self.fs.move(tmp, final)
            if self._local:
                _fsync(directory)
        finally:
            if self.fs.get_file_info(tmp).type != pafs.FileType.NotFound:
                self.fs.delete_file(tmp)
        return final

    def download(
        self, application_id: str, task_id: str, store: str, offset: int, dest: Path
    ) -> Path:
        """Unpack the snapshot at ``offset`` into the new directory ``dest``."""
        path = f"{self._dir(application_id, task_id, store)}/{offset:020d}{_SUFFIX}"
        dest.mkdir(parents=True)
        with self.fs.open_input_stream(path) as src, tarfile.open(fileobj=src, mode="r|") as tar:
            for member in tar:
                if not (member.isfile() or member.isdir()) or not _inside(dest, member.name):
                    raise StoreError(f"unsafe member {member.name!r} in snapshot {path}")
                tar.extract(member, str(dest))
        return dest

    def restore_into(
        self, application_id: str, task_id: str, store: KeyValueBytesStore, offset: int
    ) -> int:
        """Download the snapshot at ``offset`` and load it into the empty ``store``."""
        with tempfile.TemporaryDirectory(prefix="streamtide-snapshot-") as tmp:
            unpacked = self.download(application_id, task_id, store.name, offset, Path(tmp) / "s")
            return load(store, unpacked)

    def take(
        self, application_id: str, task_id: str, store: KeyValueBytesStore, offset: int
    ) -> str:
        """Snapshot ``store`` (which must be current to changelog ``offset``) and upload it."""
        with tempfile.TemporaryDirectory(prefix="streamtide-snapshot-") as tmp:
            workdir = capture(store, offset, Path(tmp) / "s")
            return self.upload(application_id, task_id, store.name, offset, workdir)

    def prune(self, application_id: str, task_id: str, store: str, keep: int = 2) -> int:
        """Delete all but the ``keep`` newest snapshots; returns how many were deleted."""
        doomed = self.offsets(application_id, task_id, store)[:-keep] if keep > 0 else []
        directory = self._dir(application_id, task_id, store)
        for offset in doomed:
            self.fs.delete_file(f"{directory}/{offset:020d}{_SUFFIX}")
        return len(doomed)


def _inside(dest: Path, name: str) -> bool:
    target = (dest / name).resolve()
    return target == dest.resolve() or dest.resolve() in target.parents


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
