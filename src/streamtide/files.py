"""Durable file replacement: readers see the old file or the whole new one, never a part."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _written_temp(path: Path, data: bytes, fsync: bool) -> str:
    """A temporary file beside ``path`` holding ``data`` (synced when ``fsync``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def _sync_directory(directory: Path) -> None:
    """Make a rename or link in ``directory`` survive a power loss."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str | Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data``: temporary file, fsync, rename, fsync of the directory
    (the last two make the replacement survive a power loss; ``fsync=False`` skips them)."""
    path = Path(path)
    tmp = _written_temp(path, data, fsync)
    try:
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if fsync:
        _sync_directory(path.parent)


def create_exclusively(path: str | Path, data: bytes, *, fsync: bool = True) -> bool:
    """Create ``path`` with ``data`` unless it exists; True if this call created it.

    The file appears whole or not at all (a fully written temporary file is hard-linked to
    the name, which fails if the name exists), and of concurrent creators exactly one wins.
    """
    path = Path(path)
    tmp = _written_temp(path, data, fsync)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        os.unlink(tmp)
    if fsync:
        _sync_directory(path.parent)
    return True
