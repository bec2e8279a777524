"""Durable file replacement: readers see the old file or the whole new one, never a part."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: str | Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data``: temporary file, fsync, rename, fsync of the directory
    (the last two make the replacement survive a power loss; ``fsync=False`` skips them)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if fsync:
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def create_exclusively(path: str | Path, data: bytes, *, fsync: bool = True) -> bool:
    """Create ``path`` with ``data`` unless it exists; True if this call created it.

    The file appears whole or not at all (a fully written temporary file is hard-linked to
    the name, which fails if the name exists), and of concurrent creators exactly one wins.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        os.unlink(tmp)
    if fsync:
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    return True
