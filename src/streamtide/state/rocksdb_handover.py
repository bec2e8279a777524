"""Handing an open RocksDB database from a store that closes to the next store that opens the
same directory in the same process and thread, instead of closing and reopening it.

A task that changes role inside a long-running work unit (a standby promoted to active, an
active task demoted to standby, an active task rebuilt from its commit after a failed attempt)
closes its stores and builds them again. Closing a database flushes its memtables to disk and
reopening reads the files back, which for a large store costs far more than the rest of the
rebuild. Inside ``handover()``, a RocksDB store that closes leaves its database open on a
shelf, keyed by its directory, and a store opening at that directory takes it from there;
whatever nobody took is closed when the block ends.

Only the handle moves. Everything built on it (the store layers, the changelog position read
from the checkpoint, the restore of what the checkpoint lacks) is built anew, exactly as for a
database opened from disk, and the database holds the same data either way: the closing
task's checkpoint (with the write-ahead log synced) is written before its stores close, and
stores never hold uncommitted writes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_local = threading.local()


def _shelf() -> dict[str, Any] | None:
    return getattr(_local, "shelf", None)


@contextmanager
def handover() -> Iterator[None]:
    """Within the block, RocksDB stores closing on this thread leave their database open for
    a store opening the same directory; at its end, every database left over is closed. A
    nested block shares the outer one's shelf."""
    if _shelf() is not None:
        yield
        return
    shelf: dict[str, Any] = {}
    _local.shelf = shelf
    try:
        yield
    finally:
        _local.shelf = None
        for close in shelf.values():
            close()


def shelve(path: Path, db: Any, close: Any) -> bool:
    """Leave ``db`` (open at ``path``) for the next store opening ``path`` within the current
    ``handover()`` block, ``close()`` closing it if none does; False outside a block (the
    caller closes it itself)."""
    shelf = _shelf()
    if shelf is None:
        return False
    key = str(path.resolve())
    left = shelf.pop(key, None)
    if left is not None:  # cannot happen (one open store per directory); never leak one
        left()
    shelf[key] = _Shelved(db, close)
    return True


def take(path: Path) -> Any | None:
    """The database a closed store left open at ``path`` in the current block, or None."""
    shelf = _shelf()
    if shelf is None:
        return None
    shelved = shelf.pop(str(path.resolve()), None)
    return None if shelved is None else shelved.db


class _Shelved:
    """A database waiting on the shelf; calling it closes the database."""

    def __init__(self, db: Any, close: Any) -> None:
        self.db = db
        self._close = close

    def __call__(self) -> None:
        self._close(self.db)
