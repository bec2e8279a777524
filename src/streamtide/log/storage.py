"""File access for the file log: everything goes through ``pyarrow.fs`` except a few local
steps.

The file log needs five primitives: read a small file, list a directory, write a file
atomically (readers see all of it or nothing), delete, and *create a file exclusively* (of two
writers creating the same name, exactly one succeeds). The last one arbitrates the manifest.
On the local file system it is a hard link of a fully written temporary file (``os.link`` fails
with EEXIST if the name exists); an object store would use a conditional put instead
(``If-None-Match: *``). Durability (``fsync``, and ``syncfs`` for everything at once) is also
done with ``os`` calls, since ``pyarrow.fs`` streams do not expose it, and so is the cheap
exclusive create of a file that readers can rebuild (``create_lazily``: ``O_EXCL``). The
local steps are in this module only, so an object store backend replaces this one class."""

from __future__ import annotations

import ctypes
import os
import time
import uuid

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.ipc as ipc

#: Prefix of temporary files; never a valid topic, entry or segment name.
TMP_PREFIX = ".tmp-"


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syncfs  # noqa: B018 - only Linux has it
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


class LocalStorage:
    """Files under one local root directory, addressed by ``/``-separated relative paths."""

    def __init__(self, root: str, *, fsync: bool = True) -> None:
        self.root = os.path.abspath(root)
        self.fsync = fsync
        # Memory-mapped input files make reading a segment zero-copy.
        self.fs = pafs.LocalFileSystem(use_mmap=True)

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    # -- reading -----------------------------------------------------------------------------

    def read_bytes(self, rel: str) -> bytes:
        """The whole file; FileNotFoundError if it does not exist."""
        with self.fs.open_input_stream(self.path(rel)) as f:
            data: bytes = f.read()
        return data

    def exists(self, rel: str) -> bool:
        found: bool = self.fs.get_file_info(self.path(rel)).type != pafs.FileType.NotFound
        return found

    def list_dir(self, rel: str) -> list[pafs.FileInfo]:
        """Entries of a directory (not recursive); empty if it does not exist."""
        selector = pafs.FileSelector(self.path(rel), allow_not_found=True, recursive=False)
        entries: list[pafs.FileInfo] = self.fs.get_file_info(selector)
        return entries

    def read_table(self, rel: str) -> pa.Table:
        """An Arrow IPC file as a table (memory-mapped, so no copy)."""
        with self.fs.open_input_file(self.path(rel)) as f:
            return ipc.open_file(f).read_all()

    def read_buffer(self, rel: str) -> pa.Buffer:
        """The whole file as a buffer (memory-mapped, so no copy)."""
        with self.fs.open_input_file(self.path(rel)) as f:
            return f.read_buffer()

    @staticmethod
    def schema_of(buffer: pa.Buffer) -> pa.Schema:
        """The schema (with metadata) of an Arrow IPC file's bytes."""
        return ipc.open_file(buffer).schema

    @staticmethod
    def table_of(buffer: pa.Buffer) -> pa.Table:
        """The table in an Arrow IPC file's bytes."""
        return ipc.open_file(buffer).read_all()

    def read_schema(self, rel: str) -> pa.Schema:
        """The schema (with metadata) of an Arrow IPC file; fails if the footer is missing."""
        with self.fs.open_input_file(self.path(rel)) as f:
            return ipc.open_file(f).schema

    # -- writing -----------------------------------------------------------------------------

    def make_dir(self, rel: str) -> None:
        self.fs.create_dir(self.path(rel), recursive=True)

    def write_table(self, rel: str, table: pa.Table) -> None:
        """Write an Arrow IPC file atomically: temporary name, fsync, rename."""
        self.write_batches(rel, table.schema, table.to_batches())

    def write_batches(self, rel: str, schema: pa.Schema, batches: list[pa.RecordBatch]) -> None:
        """Write record batches as one Arrow IPC file atomically (``write_table``)."""
        tmp = self._tmp_name(rel)
        try:
            with (
                self.fs.open_output_stream(self.path(tmp)) as sink,
                ipc.new_file(sink, schema) as writer,
            ):
                for batch in batches:
                    writer.write_batch(batch)
            self._sync_file(tmp)
            self.fs.move(self.path(tmp), self.path(rel))
        except BaseException:
            self._remove_quietly(tmp)
            raise
        self._sync_dir(rel)

    def write_bytes_atomic(self, rel: str, data: bytes, *, durable: bool = True) -> None:
        """Write (or replace) a small file atomically: temporary name, fsync, rename.
        ``durable=False`` skips the fsyncs (for hints that may be lost in a power failure)."""
        tmp = self._write_tmp(rel, data, sync=durable)
        try:
            self.fs.move(self.path(tmp), self.path(rel))
        except BaseException:
            self._remove_quietly(tmp)
            raise
        if durable:
            self._sync_dir(rel)

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Create ``rel`` with ``data`` unless it exists; True if this call created it.

        The file appears with its full contents or not at all, and of concurrent callers
        (threads or processes) exactly one gets True. Local step: ``os.link``.
        """
        tmp = self._write_tmp(rel, data)
        try:
            os.link(self.path(tmp), self.path(rel))
        except FileExistsError:
            return False
        finally:
            self._remove_quietly(tmp)
        self._sync_dir(rel)
        return True

    def create_lazily(self, rel: str, data: bytes) -> bool:
        """Create ``rel`` with ``data`` unless it exists (of concurrent callers exactly one
        gets True), with one file operation and no fsync: a concurrent reader may find it
        empty or partly written, and a power loss before ``sync_all`` may lose it or leave
        it empty. Only for files a reader can rebuild (manifest entries that a seal journal
        record claims). Local step: ``os.open`` with ``O_EXCL``."""
        try:
            fd = os.open(self.path(rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        return True

    def sync_all(self) -> None:
        """Make everything written under the root so far durable (local step: ``syncfs`` of
        the root's file system where the C library has it, else ``sync``)."""
        if not self.fsync:
            return
        fd = os.open(self.root, os.O_RDONLY)
        try:
            if _LIBC is None or _LIBC.syncfs(fd) != 0:
                os.sync()
        finally:
            os.close(fd)

    def delete_file(self, rel: str) -> bool:
        """Delete a file; False if it did not exist."""
        try:
            self.fs.delete_file(self.path(rel))
        except FileNotFoundError:
            return False
        return True

    def move(self, src: str, dst: str) -> None:
        """Rename a file or directory (atomic on a local file system)."""
        self.fs.move(self.path(src), self.path(dst))

    def delete_dir(self, rel: str) -> None:
        self.fs.delete_dir(self.path(rel))

    def remove_stale_tmp(self, rel_dir: str, max_age_s: float) -> int:
        """Delete temporary files in ``rel_dir`` older than ``max_age_s`` (left by writers that
        died mid-write); returns how many were deleted."""
        cutoff_ns = time.time_ns() - int(max_age_s * 1e9)
        removed = 0
        for info in self.list_dir(rel_dir):
            stale = info.mtime_ns is not None and info.mtime_ns < cutoff_ns
            if not (info.base_name.startswith(TMP_PREFIX) and stale):
                continue
            rel = f"{rel_dir}/{info.base_name}" if rel_dir else info.base_name
            if info.type == pafs.FileType.Directory:  # a deleted topic not yet removed
                self.delete_dir(rel)
                removed += 1
            else:
                removed += self.delete_file(rel)
        return removed

    # -- helpers -----------------------------------------------------------------------------

    @staticmethod
    def _tmp_name(rel: str) -> str:
        head, _, base = rel.rpartition("/")
        name = f"{TMP_PREFIX}{uuid.uuid4().hex}-{base}"
        return f"{head}/{name}" if head else name

    def _write_tmp(self, rel: str, data: bytes, *, sync: bool = True) -> str:
        tmp = self._tmp_name(rel)
        try:
            with self.fs.open_output_stream(self.path(tmp)) as f:
                f.write(data)
            if sync:
                self._sync_file(tmp)
        except BaseException:
            self._remove_quietly(tmp)
            raise
        return tmp

    def _remove_quietly(self, rel: str) -> None:
        try:
            os.unlink(self.path(rel))
        except OSError:
            pass

    def _sync_file(self, rel: str) -> None:
        if not self.fsync:
            return
        fd = os.open(self.path(rel), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _sync_dir(self, rel: str) -> None:
        """fsync the directory holding ``rel`` so a new name survives power loss."""
        if not self.fsync:
            return
        head = rel.rpartition("/")[0]
        fd = os.open(self.path(head), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
