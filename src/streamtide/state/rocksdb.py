"""The RocksDB bytes store (``rocksdict`` in raw bytes mode), registered as kind ``"rocksdb"``.

RocksDB allows one process per database, and a Spark executor runs several Python workers, so
a store is opened when its task starts and closed when it ends; an open handle is never kept
across tasks. Within a ``rocksdb_handover.handover()`` block, a closing store leaves its
database open for the next store opening the same directory in that process. Keys are ordered
by unsigned byte order, like the in-memory store.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rocksdict import Checkpoint, Options, Rdict, ReadOptions, WriteBatch

from streamtide.errors import StoreDamagedError, StoreError
from streamtide.processor.api import StateStoreContext
from streamtide.state import rocksdb_handover as handover
from streamtide.state import rocksdb_recovery as recovery
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.stores import register_key_value_store_kind

#: Entries per WriteBatch in ``put_all``: bounds the memory of one batch during restores.
WRITE_BATCH_SIZE = 50_000
#: How long opening waits for a database another process still holds (a task handed over
#: between work units: the old one is closing it) before reporting it as held.
LOCK_WAIT_S = 10.0


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_keep_log_file_num(2)
    options.set_max_log_file_size(1 << 20)
    return options


def _closer(path: Path | None) -> Any:
    """Closes a database opened at ``path`` (and records that it is no longer held here)."""

    def close(db: Rdict) -> None:
        try:
            db.close()
        finally:
            if path is not None:
                recovery.closed(path)

    return close


def _after(key: bytes) -> bytes:
    """The smallest key greater than ``key``."""
    return key + b"\x00"


def _prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: unbounded)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


class RocksDBKeyValueBytesStore(KeyValueBytesStore):
    """A persistent, ordered bytes store in ``<task state_dir>/<store name>``."""

    persistent = True

    def __init__(self, name: str) -> None:
        self.name = name
        self._db: Rdict | None = None
        self._path: Path | None = None
        self._own_dir: Path | None = None
        self._iterators: weakref.WeakSet[Iterator] = weakref.WeakSet()
        self.created_fresh = False
        self.wiped_reason: str | None = None  # set when damaged files were wiped at open
        #: the error a call on the open database raised: its files are wiped at close
        self.damage: BaseException | None = None

    # ---- lifecycle -----------------------------------------------------------------------

    def init(self, context: StateStoreContext) -> None:
        self._open_at(Path(context.state_dir) / self.name)
        context.register(self)

    def open_standalone(self, directory: str | Path | None = None) -> RocksDBKeyValueBytesStore:
        """Open without a task (tools, contract tests); without ``directory`` the store lives in
        a temporary directory removed by ``close``."""
        if directory is None:
            self._own_dir = Path(tempfile.mkdtemp(prefix=f"streamtide-{self.name}-"))
            directory = self._own_dir
        self._open_at(Path(directory))
        return self

    def _open_at(self, path: Path) -> None:
        if self._db is not None:
            raise StoreError(f"store {self.name!r} is already open at {self._path}")
        handed = handover.take(path)
        if handed is not None:  # a store of this directory closed within a handover block
            self._db, self._path, self.created_fresh = handed, path, False
            return
        path.mkdir(parents=True, exist_ok=True)
        self.created_fresh = not (path / "CURRENT").exists()
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                self._db = Rdict(str(path), _options())
                break
            except Exception as exc:
                if not recovery.held(path) or time.monotonic() > deadline:
                    error = exc
                    break
                time.sleep(0.05)  # a process handing the task over is closing it
        if self._db is None:
            if recovery.held(path):
                raise StoreError(
                    f"cannot open RocksDB store {self.name!r} at {path}: {error} (a database can "
                    "be open in one process only; is another worker or task still holding it?)"
                ) from error
            self.wiped_reason = recovery.wipe(path, self.name, error)
            self.created_fresh = True
            try:
                self._db = Rdict(str(path), _options())
            except Exception as again:
                raise StoreError(
                    f"cannot open RocksDB store {self.name!r} at {path}: {again}"
                ) from again
        recovery.opened(path)
        self._path = path

    @property
    def directory(self) -> Path:
        """Where the database files are (the store must have been opened once)."""
        if self._path is None:
            raise StoreError(f"store {self.name!r} has never been opened")
        return self._path

    @property
    def is_open(self) -> bool:
        return self._db is not None

    def _handle(self) -> Rdict:
        db = self._db
        if db is None:
            raise StoreError(f"store {self.name!r} is not open")
        return db

    def flush(self) -> None:
        """Hand buffered write-ahead-log data to the OS (enough to survive a process crash)."""
        if self._db is not None:
            self._db.flush_wal(False)

    def sync(self) -> None:
        """Sync the write-ahead log to disk, so a checkpoint written afterwards never names
        writes that a machine crash could lose."""
        if self._db is not None:
            self._db.flush_wal(True)

    def close(self) -> None:
        """Close the database (within a handover block: leave it open for the next store of
        this directory); iterators still open are closed first, since a live RocksDB iterator
        would keep the database (and its lock) alive."""
        self._close_db(hand_over=self._own_dir is None)
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
            self._own_dir = None

    def _close_db(self, hand_over: bool = False) -> None:
        for iterator in list(self._iterators):
            iterator.close()  # type: ignore[attr-defined]
        self._iterators = weakref.WeakSet()
        db, self._db = self._db, None
        if db is None:
            return
        damage, self.damage = self.damage, None
        if (
            damage is None
            and hand_over
            and self._path is not None
            and handover.shelve(self._path, db, _closer(self._path))
        ):
            return
        if damage is None:
            _closer(self._path)(db)
            return
        try:
            _closer(self._path)(db)
        except Exception:  # closing a damaged database can fail too: its files go anyway
            pass
        if self._path is not None:  # the next open rebuilds the store
            recovery.wipe(self._path, self.name, damage)

    def _damaged(self, exc: BaseException) -> StoreDamagedError:
        """A call on the open database failed: its files are damaged (a database this
        process holds fails only so). Remembered, so that closing wipes them."""
        self.damage = self.damage or exc
        return StoreDamagedError(
            f"store {self.name!r}: reading its local RocksDB files at {self._path} failed "
            f"({type(exc).__name__}: {exc}); they are wiped when the task closes and the "
            "store is rebuilt from its changelog"
        )

    # ---- point operations ----------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        db = self._handle()
        try:
            return db.get(key)
        except Exception as exc:
            raise self._damaged(exc) from exc

    def put(self, key: bytes, value: bytes | None) -> None:
        db = self._handle()
        if key is None:
            raise StoreError(f"store {self.name!r} does not accept a None key")
        try:
            if value is None:
                db.delete(key)
            else:
                db.put(key, value)
        except Exception as exc:
            raise self._damaged(exc) from exc

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Write ``entries`` in atomic WriteBatches of up to WRITE_BATCH_SIZE entries."""
        db = self._handle()
        batch = WriteBatch(raw_mode=True)
        count = 0  # entries in ``batch`` (counted here: len() is a call per entry)
        for key, value in entries:
            if key is None:
                raise StoreError(f"store {self.name!r} does not accept a None key")
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
            count += 1
            if count >= WRITE_BATCH_SIZE:
                self._write(db, batch)
                batch = WriteBatch(raw_mode=True)
                count = 0
        if count:
            self._write(db, batch)

    def _write(self, db: Rdict, batch: WriteBatch) -> None:
        try:
            db.write(batch)
        except Exception as exc:
            raise self._damaged(exc) from exc

    # ---- ordered reads -------------------------------------------------------------------

    def range(
        self, from_key: bytes | None, to_key: bytes | None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """A bounded native iterator: RocksDB is told both ends, so it never walks past the
        range over deleted entries (which made unbounded scans grow with every purge)."""
        db = self._handle()
        if from_key is not None and to_key is not None and from_key > to_key:
            return iter(())
        options = ReadOptions()
        if reverse:  # (rocksdict's lower bound misbehaves with seek_for_prev: stop by hand)
            return self._track(self._backward(db.iter(options), from_key, to_key, options))
        if to_key is not None:
            options.set_iterate_upper_bound(_after(to_key))
        return self._track(self._forward(db.iter(options), from_key, options))

    def _checked(self, raw: Any) -> None:
        """An iterator that stopped: at the end, or on an error (``valid()`` then answers
        False like at the end; only ``status()`` tells)."""
        try:
            raw.status()
        except Exception as exc:
            raise self._damaged(exc) from exc

    def _track(self, iterator: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
        self._iterators.add(iterator)
        return iterator

    def _forward(
        self, raw: Any, from_key: bytes | None, options: ReadOptions
    ) -> Iterator[tuple[bytes, bytes]]:
        # ``options`` (holding the bounds) must live as long as the native iterator
        if from_key is None:
            raw.seek_to_first()
        else:
            raw.seek(from_key)
        while raw.valid():
            yield raw.key(), raw.value()
            raw.next()
        self._checked(raw)
        del options

    def _backward(
        self, raw: Any, from_key: bytes | None, to_key: bytes | None, options: ReadOptions
    ) -> Iterator[tuple[bytes, bytes]]:
        if to_key is None:
            raw.seek_to_last()
        else:
            raw.seek_for_prev(to_key)
        while raw.valid():
            key = raw.key()
            if from_key is not None and key < from_key:
                break
            yield key, raw.value()
            raw.prev()
        else:
            self._checked(raw)
        del options

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        options = ReadOptions()
        upper = _prefix_end(prefix)
        if upper is not None:
            options.set_iterate_upper_bound(upper)
        return self._track(self._forward(self._handle().iter(options), prefix, options))

    def approximate_num_entries(self) -> int:
        """RocksDB's estimate: exact after inserts of distinct keys, above the true count
        while overwritten or deleted keys await compaction."""
        return self._handle().property_int_value("rocksdb.estimate-num-keys") or 0

    # ---- bulk deletes, checkpoints -------------------------------------------------------

    def delete_range(self, from_key: bytes | None, to_key: bytes | None) -> None:
        """One native range tombstone (plus a point delete when the range is unbounded)."""
        db = self._handle()
        begin = from_key if from_key is not None else b""
        if to_key is None:
            last = self._last_key()
            if last is None or last < begin:
                return
            if last > begin:
                db.delete_range(begin, last)
            db.delete(last)
        elif to_key > begin:
            db.delete_range(begin, to_key)

    def _last_key(self) -> bytes | None:
        it = self._handle().iter()
        it.seek_to_last()
        if it.valid():
            return it.key()
        self._checked(it)
        return None

    def clear(self) -> None:
        """Drop the database files and reopen empty (cheaper than deleting every key)."""
        path = self.directory
        was_open = self.is_open
        self._close_db()
        shutil.rmtree(path, ignore_errors=True)
        if was_open:
            self._open_at(path)

    def checkpoint_to(self, target: str | Path) -> Path:
        """A consistent copy of the open database in ``target`` (which must not exist), made
        with RocksDB's checkpoint (hard links where the file system allows)."""
        target = Path(target)
        Checkpoint(self._handle()).create_checkpoint(str(target))
        return target

    def replace_with(self, source: str | Path) -> None:
        """Replace the database by a copy of the database directory ``source`` (a checkpoint),
        reopening it if the store was open."""
        path = self.directory
        was_open = self.is_open
        self._close_db()
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(source, path)
        if was_open:
            self._open_at(path)


register_key_value_store_kind("rocksdb", RocksDBKeyValueBytesStore)
