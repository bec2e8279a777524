"""The segment files of one partition directory of the file log, and its slices of shared
files: writing them, counting and checksumming them, and reading them checked.

A segment file is written under a temporary name and renamed (``LocalStorage``), so a name
always stands for a whole file; whether it is *sealed* is the manifest's business
(``partition.Partition``, which builds on this class). A sealed segment's crc32 is verified
the first time this process reads it; damage raises ``CorruptLogError`` (sealed) or
``SegmentError`` (unsealed) naming the file, and is never read as records.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TypeVar

import pyarrow as pa

from streamtide.log.errors import CorruptLogError, SegmentError
from streamtide.log.manifest import SealedSegment
from streamtide.log.segments import (
    SEGMENT_SCHEMA,
    count_from_schema,
    new_segment_name,
    with_metadata,
)
from streamtide.log.shared_segments import SharedSegments, parse_slice
from streamtide.log.storage import LocalStorage

T = TypeVar("T")


def delete_dropped(
    storage: LocalStorage, segments_dir: str, names: list[str], dropped_shared: set[str]
) -> None:
    """Delete the segment files a truncation dropped (``names``, of the partition whose
    segments are in ``segments_dir``); a slice of a shared file only adds the file to
    ``dropped_shared`` (``FileLog`` deletes it once no partition holds a slice of it).
    Whoever applies a truncation deletes its files, so a truncating process that died before
    deleting them leaves no orphans behind."""
    for name in names:
        parsed = parse_slice(name)
        if parsed is not None:
            dropped_shared.add(parsed[0])
            continue
        try:
            storage.delete_file(f"{segments_dir}/{name}")
        except OSError:
            pass


class PartitionSegments:
    """The segment files of ``<topic>/<number>`` (and its slices of shared files)."""

    def __init__(
        self, storage: LocalStorage, topic: str, number: int, shared: SharedSegments | None
    ) -> None:
        self.storage = storage
        self.topic, self.number = topic, number
        self.shared = shared or SharedSegments(storage)
        self.where = f"{topic}/{number}"
        self._segments = f"{topic}/{number}/segments"
        self._verified: set[str] = set()

    def write(self, table: pa.Table, writer_id: str) -> str:
        """Write ``table`` as a new (unsealed) segment file; returns its name."""
        name = new_segment_name(writer_id)
        self.storage.write_table(f"{self._segments}/{name}", with_metadata(table, writer_id))
        return name

    def has_segment(self, name: str) -> bool:
        """Whether the file of segment ``name`` (a shared one, for a slice) exists."""
        parsed = parse_slice(name)
        return self.storage.exists(
            self.shared.path(parsed[0]) if parsed else f"{self._segments}/{name}"
        )

    def inspect(self, name: str) -> tuple[int, int]:
        """A segment file's record count (from its footer, which checks the file is whole)
        and its crc32, from one read of the file (of the whole file, for a slice)."""
        if parse_slice(name) is not None:
            return self.shared.inspect(name, self.topic, self.number)

        def count_and_crc(rel: str) -> tuple[int, int]:
            buffer = self.storage.read_buffer(rel)
            return count_from_schema(self.storage.schema_of(buffer), rel), zlib.crc32(buffer)

        return self._read_segment_file(name, count_and_crc)

    def segment_count(self, name: str) -> int:
        """The record count in a segment file's footer (checks the file is whole)."""
        return self._read_segment_file(
            name, lambda rel: count_from_schema(self.storage.read_schema(rel), rel)
        )

    def _read_segment_file(self, name: str, read: Callable[[str], T]) -> T:
        """``read(path)`` of a segment file, its failures as ``SegmentError``."""
        rel = f"{self._segments}/{name}"
        try:
            return read(rel)
        except FileNotFoundError:
            raise SegmentError(
                f"segment {rel} does not exist (never written, aborted or truncated)"
            ) from None
        except (OSError, pa.ArrowInvalid) as e:
            raise SegmentError(f"segment {rel} is unreadable: {e}") from e

    def read_unsealed(self, name: str, expected_count: int) -> pa.Table:
        """All rows of a segment file by name (sealed or not), checked against its count."""
        rel = f"{self._segments}/{name}"
        try:
            if parse_slice(name) is not None:
                rel = f"shared segment {name}"
                table = self.shared.read_slice(name, self.topic, self.number)
            else:
                table = self.storage.read_table(rel)
        except FileNotFoundError:
            raise SegmentError(
                f"segment {rel} does not exist (never written, aborted or truncated)"
            ) from None
        except (OSError, pa.ArrowInvalid) as e:
            raise SegmentError(f"segment {rel} is unreadable: {e}") from e
        if table.num_rows != expected_count:
            raise SegmentError(
                f"segment {rel} holds {table.num_rows} records, expected {expected_count}"
            )
        return table

    def read_slice(self, seg: SealedSegment, lo: int, hi: int) -> tuple[pa.Table, int]:
        """The rows of sealed ``seg`` within offsets ``[lo, hi)`` and the offset of the first.
        FileNotFoundError if the file is gone (for example truncated meanwhile)."""
        rel = f"{self._segments}/{seg.name}"
        try:
            if parse_slice(seg.name) is not None:
                rel = self.shared.path(seg.name)
                table = self.shared.read_slice(seg.name, self.topic, self.number, seg.crc32)
            else:
                table = self._read_own(rel, seg)
        except (FileNotFoundError, CorruptLogError):
            raise
        except (OSError, pa.ArrowInvalid, SegmentError) as e:
            raise CorruptLogError(
                f"sealed segment {self.storage.path(rel)} of topic partition {self.where} is "
                f"unreadable: {e}"
            ) from e
        if table.num_rows != seg.record_count or not table.schema.equals(SEGMENT_SCHEMA):
            raise CorruptLogError(
                f"sealed segment {rel} holds {table.num_rows} records, the manifest says "
                f"{seg.record_count}"
            )
        first = max(lo, seg.base_offset)
        last = min(hi, seg.end_offset)
        return table.slice(first - seg.base_offset, last - first), first

    def _read_own(self, rel: str, seg: SealedSegment) -> pa.Table:
        """A segment file of this partition, its checksum verified on the first read."""
        buffer = self.storage.read_buffer(rel)
        if seg.crc32 is not None and seg.name not in self._verified:
            actual = zlib.crc32(buffer)
            if actual != seg.crc32:
                raise CorruptLogError(
                    f"segment file {self.storage.path(rel)} of topic partition "
                    f"{self.where} fails its checksum (crc32 {actual:08x}, sealed as "
                    f"{seg.crc32:08x}): it is damaged and is not read"
                )
            self._verified.add(seg.name)
        return self.storage.table_of(buffer)

    def _checksum(self, name: str) -> int:
        return self._read_segment_file(name, lambda rel: zlib.crc32(self.storage.read_buffer(rel)))
