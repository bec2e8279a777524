"""Shared segment files: the unsealed segments of many partitions in one file.

A work unit of the engine writes every task's outputs and changelog records of a batch at
once. As one file per partition that costs a file, two fsyncs and a directory entry per
partition and batch (most of a busy task's cost with a few records each); a shared file
costs them once for all of them.

A shared file is an Arrow IPC file under ``<root>/.shared/`` holding one record batch per
*slice*, each slice the records of one topic partition. Its footer names the writer and, in
order, each slice's topic, partition, writer id and record count. A partition's manifest
seals a slice like a segment of its own, by the name ``<file>#<index>``, with the crc32 of
the whole file (verified once per file by each reader, since the file is read through a
memory map anyway).

Deletion. A slice dropped by a truncation cannot delete the file while other slices of it
are still sealed in their partitions. The file log deletes a shared file once none of its
slices is *live* (sealed and not truncated away) and all are *decided*: a slice that is not
sealed now will never be (the engine decides a whole stage's slices in one prepare record,
and truncates only after its commit; an abort says so explicitly; a file older than the
stale-file age counts as decided). Every process that truncates checks the files it dropped
after its truncate entry is durable, so of two concurrent truncations at least one sees
both entries and deletes the file; a process that dies in between leaves an orphan that the
stale-file sweep removes.
"""

from __future__ import annotations

import json
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa
import pyarrow.ipc as ipc

from streamtide.log.errors import SegmentError
from streamtide.log.manifest import PartitionState
from streamtide.log.segments import SEGMENT_SCHEMA, new_segment_name, writer_of
from streamtide.log.storage import LocalStorage

#: The directory of shared files under the log's root (never a topic name: topics do not
#: start with ".").
SHARED_DIR = ".shared"
_META_FORMAT = b"streamtide.shared"
_FORMAT_VERSION = b"1"
_META_WRITER = b"streamtide.writer_id"
_META_SLICES = b"streamtide.slices"
#: How many described files a handle remembers (files are immutable: a name never changes
#: its contents, so the crc32 and the slice list computed once stay right).
_KNOWN_FILES = 1024


def slice_name(file: str, index: int) -> str:
    """The name a manifest seals slice ``index`` of shared ``file`` by."""
    return f"{file}#{index}"


def parse_slice(name: str) -> tuple[str, int] | None:
    """``(file, index)`` of a slice name; None for the name of a partition's own segment
    (those never contain ``#``: writer ids are percent-encoded in file names)."""
    file, sep, index = name.rpartition("#")
    if not sep or not index.isdigit():
        return None
    return file, int(index)


@dataclass(frozen=True, slots=True)
class SliceInfo:
    """One slice of a shared file, as its footer names it."""

    topic: str
    partition: int
    writer_id: str
    record_count: int


@dataclass(frozen=True, slots=True)
class SharedFile:
    """A shared file's footer and checksum."""

    name: str
    writer_id: str
    slices: tuple[SliceInfo, ...]

    def partitions(self) -> set[tuple[str, int]]:
        return {(s.topic, s.partition) for s in self.slices}

    def slice_names(self) -> set[str]:
        return {slice_name(self.name, i) for i in range(len(self.slices))}


#: A slice to write: topic, partition, its records (a segment table) and its writer id.
Part = tuple[str, int, pa.Table, str]


class SharedSegments:
    """Writes and reads the shared files under one storage root."""

    def __init__(self, storage: LocalStorage) -> None:
        self.storage = storage
        self._known: OrderedDict[str, SharedFile] = OrderedDict()
        self._crcs: OrderedDict[str, int] = OrderedDict()
        self._dir_made = False

    def path(self, file: str) -> str:
        return f"{SHARED_DIR}/{file}"

    # -- writing -----------------------------------------------------------------------------

    def write(self, parts: Sequence[Part], writer_id: str) -> str:
        """Write ``parts`` as one shared file (one fsync for all); returns the file's name."""
        name = new_segment_name(writer_id)
        slices = [
            [topic, partition, writer, table.num_rows] for topic, partition, table, writer in parts
        ]
        meta = {
            _META_FORMAT: _FORMAT_VERSION,
            _META_WRITER: writer_id.encode(),
            _META_SLICES: json.dumps(slices, separators=(",", ":")).encode(),
        }
        schema = SEGMENT_SCHEMA.with_metadata(meta)
        batches = [_one_batch(table) for _, _, table, _ in parts]
        if not self._dir_made:
            self.storage.make_dir(SHARED_DIR)
            self._dir_made = True
        self.storage.write_batches(self.path(name), schema, batches)
        return name

    # -- reading -----------------------------------------------------------------------------

    def describe(self, file: str) -> SharedFile:
        """The file's slices (its footer, read once per handle). FileNotFoundError if it is
        gone; SegmentError if it is not a whole shared file."""
        known = self._known.get(file)
        if known is not None:
            if not self.storage.exists(self.path(file)):
                raise FileNotFoundError(self.storage.path(self.path(file)))
            self._known.move_to_end(file)
            return known
        try:
            meta = self.storage.read_schema(self.path(file)).metadata or {}
            if meta.get(_META_FORMAT) != _FORMAT_VERSION:
                raise ValueError("not a shared segment file of this format")
            slices = tuple(
                SliceInfo(str(t), int(p), str(w), int(n))
                for t, p, w, n in json.loads(meta[_META_SLICES])
            )
            described = SharedFile(file, meta[_META_WRITER].decode(), slices)
        except FileNotFoundError:
            raise
        except (pa.ArrowInvalid, OSError, ValueError, KeyError, TypeError) as e:
            raise SegmentError(f"shared segment {self.path(file)} is unreadable: {e}") from e
        _remember(self._known, file, described)
        return described

    def crc32(self, file: str) -> int:
        """The crc32 of the whole file (computed once per handle: the file is immutable)."""
        crc = self._crcs.get(file)
        if crc is None:
            crc = zlib.crc32(self.storage.read_buffer(self.path(file)))
            _remember(self._crcs, file, crc)
        return crc

    def inspect(self, name: str, topic: str, partition: int) -> tuple[int, int]:
        """Record count and file crc32 of slice ``name``, which must belong to ``topic``/
        ``partition``; SegmentError if the file is gone, damaged or holds no such slice."""
        file, index = _parsed(name)
        try:
            described = self.describe(file)
        except FileNotFoundError:
            raise SegmentError(
                f"shared segment {self.path(file)} does not exist (never written, aborted or "
                "truncated)"
            ) from None
        count = _slice_of(described, index, topic, partition).record_count
        try:
            return count, self.crc32(file)
        except FileNotFoundError:
            raise SegmentError(f"shared segment {self.path(file)} was deleted meanwhile") from None

    def read_slice(
        self, name: str, topic: str, partition: int, crc32: int | None = None
    ) -> pa.Table:
        """The records of slice ``name`` (checked against ``crc32`` when given).
        FileNotFoundError if the file is gone; SegmentError if it is damaged."""
        file, index = _parsed(name)
        described = self.describe(file)
        actual = None if crc32 is None else self.crc32(file)
        if actual is not None and actual != crc32:
            raise SegmentError(
                f"shared segment file {self.storage.path(self.path(file))} fails its checksum "
                f"(crc32 {actual:08x}, sealed as {crc32:08x}): it is damaged and is not read"
            )
        info = _slice_of(described, index, topic, partition)
        buffer = self.storage.read_buffer(self.path(file))
        try:
            batch = ipc.open_file(buffer).get_batch(index)
        except (pa.ArrowInvalid, OSError) as e:
            raise SegmentError(f"shared segment {self.path(file)} is unreadable: {e}") from e
        table = pa.Table.from_batches([batch])
        if table.num_rows != info.record_count:
            raise SegmentError(
                f"slice {name} holds {table.num_rows} records, its footer says {info.record_count}"
            )
        return table

    def files(self) -> list[str]:
        """Names of the shared files (temporary files excluded)."""
        return sorted(
            info.base_name
            for info in self.storage.list_dir(SHARED_DIR)
            if writer_of(info.base_name) is not None
        )

    def age_s(self, file: str, now_ns: int) -> float:
        """Seconds since the file was written (0 if that is unknown)."""
        info = self.storage.fs.get_file_info(self.storage.path(self.path(file)))
        return 0.0 if info.mtime_ns is None else (now_ns - info.mtime_ns) / 1e9

    def delete(self, file: str) -> bool:
        self._known.pop(file, None)
        self._crcs.pop(file, None)
        return self.storage.delete_file(self.path(file))


class SharedUpkeep:
    """Deletes shared files that no partition holds a slice of (see the module docstring).
    ``states(file)`` gives the current manifest state of each partition the file has slices
    for that still exists; callers serialise calls (the file log's lock)."""

    def __init__(
        self, shared: SharedSegments, states: Callable[[SharedFile], Iterable[PartitionState]]
    ) -> None:
        self.shared = shared
        self._states = states

    def is_live(self, described: SharedFile) -> bool:
        """Whether a partition holds a slice of the file sealed now."""
        names = described.slice_names()
        return any(not names.isdisjoint(state.by_name) for state in self._states(described))

    def delete_if_dead(self, file: str) -> bool:
        """Delete ``file`` if none of its slices is sealed now (the caller knows none will
        be any more). A damaged file stays: a reader must find it damaged, not missing."""
        try:
            described = self.shared.describe(file)
        except (FileNotFoundError, SegmentError):
            return False
        return not self.is_live(described) and self.shared.delete(file)

    def unsealed(self) -> list[SharedFile]:
        """The files of which no slice is sealed now (written, never sealed nor deleted)."""
        out = []
        for file in self.shared.files():
            try:
                described = self.shared.describe(file)
            except FileNotFoundError:
                continue
            if not self.is_live(described):
                out.append(described)
        return out

    def abort(
        self,
        writer_decided: Callable[[str], bool],
        accept: Callable[[SharedFile], bool] = lambda shared: True,
    ) -> int:
        """Delete the files whose writer ``writer_decided`` (read from the file name, so
        other files are not opened) and ``accept`` accept, of which no slice is sealed;
        returns how many slices went."""
        removed = 0
        for file in self.shared.files():
            writer = writer_of(file)
            if writer is None or not writer_decided(writer):
                continue
            try:
                described = self.shared.describe(file)
            except (FileNotFoundError, SegmentError):
                continue  # deleted meanwhile, or a damaged leftover a sweep must not stop on
            if accept(described) and self.delete_if_dead(file):
                removed += len(described.slices)
        return removed

    def delete_stale(self, max_age_s: float) -> int:
        """Delete files older than ``max_age_s`` of which no slice is sealed (orphans)."""
        now_ns = time.time_ns()
        return sum(
            self.delete_if_dead(file)
            for file in self.shared.files()
            if self.shared.age_s(file, now_ns) > max_age_s
        )


_V = TypeVar("_V")


def _remember(cache: OrderedDict[str, _V], key: str, value: _V) -> None:
    cache[key] = value
    if len(cache) > _KNOWN_FILES:
        cache.popitem(last=False)


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    combined = table.combine_chunks()
    batches = combined.to_batches()
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=SEGMENT_SCHEMA)
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def _parsed(name: str) -> tuple[str, int]:
    parsed = parse_slice(name)
    if parsed is None:
        raise SegmentError(f"{name!r} is not the name of a slice of a shared segment")
    return parsed


def _slice_of(described: SharedFile, index: int, topic: str, partition: int) -> SliceInfo:
    if index >= len(described.slices):
        raise SegmentError(f"shared segment {described.name} has no slice {index}")
    info = described.slices[index]
    if (info.topic, info.partition) != (topic, partition):
        raise SegmentError(
            f"slice {index} of shared segment {described.name} belongs to "
            f"{info.topic}/{info.partition}, not {topic}/{partition}"
        )
    return info
