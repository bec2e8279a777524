"""Telling a corrupt RocksDB database from one that is merely in use, and wiping the former.

RocksDB reports both as an exception with a message. Rather than read messages, the store asks
whether the database is *held*: open in this process (a registry of open paths) or locked by
another process (a non-blocking ``fcntl`` probe of its ``LOCK`` file, the lock RocksDB takes).
A database nobody holds that still cannot be opened is damaged: its directory is wiped, the
store opens empty and the task rebuilds it from the newest valid snapshot and the changelog,
as for any local copy that cannot be trusted. The local copy is only ever a cache of the
changelog, so wiping it loses nothing.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)

_OPEN: set[str] = set()


def opened(path: Path) -> None:
    """Record that this process opened the database at ``path``."""
    _OPEN.add(str(path.resolve()))


def closed(path: Path) -> None:
    _OPEN.discard(str(path.resolve()))


def held(path: Path) -> bool:
    """Whether the database at ``path`` is open in this process or locked by another one."""
    if str(path.resolve()) in _OPEN:
        return True
    lock = path / "LOCK"
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def wipe(path: Path, store: str, error: BaseException) -> str:
    """Delete a damaged database directory (and recreate it empty); returns why, for the
    rebuild's log line."""
    why = f"its local RocksDB files at {path} are damaged ({type(error).__name__}: {error})"
    log.warning("store %r: %s; wiping them to rebuild the store", store, why)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    return why
