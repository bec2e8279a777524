"""One partition directory of the file log: its segment files and its manifest.

A segment is visible exactly when a manifest entry names it. Segment files are written under a
temporary name and renamed before any entry can name them, and manifest entries are created
exclusively (``LocalStorage.create_exclusive``), so any number of processes may write and seal
into one partition: the entry number decides the order and hence the base offsets.

The manifest state is cached and refreshed by probing for the next entry file, so when nothing
changed a refresh costs one failed file open. Not thread-safe: ``FileLog`` serialises calls.

Integrity: seal entries carry the segment file's crc32, verified the first time this process
reads the segment; entries are hash-chained (``manifest``); and ``head.json`` names the newest
entry a writer created, so opening a partition detects a lost tail or a gap in the entries.
Each check raises ``CorruptLogError`` naming the topic, partition and file: damaged data is
never read as records.
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from collections.abc import Callable
from typing import TypeVar

import pyarrow as pa

from streamtide.log.errors import (
    CorruptLogError,
    LogError,
    OffsetOutOfRangeError,
    SealConflictError,
    SegmentError,
)
from streamtide.log.manifest import (
    PartitionState,
    SealedSegment,
    checkpoint_number,
    entry_hash,
    entry_name,
    seal_entry,
    truncate_entry,
)
from streamtide.log.seal_journal import SealJournal
from streamtide.log.sealing import repair_claim, replay_claims, same_seal
from streamtide.log.segments import (
    SEGMENT_SCHEMA,
    count_from_schema,
    new_segment_name,
    with_metadata,
    writer_of,
)
from streamtide.log.shared_segments import SharedSegments, parse_slice
from streamtide.log.storage import TMP_PREFIX, LocalStorage

log = logging.getLogger(__name__)
T = TypeVar("T")

SUBDIRS = ("segments", "manifest", "checkpoints")
_KEEP_CHECKPOINTS = 2


class Partition:
    """Segments and manifest of ``<topic>/<number>`` under a storage root."""

    def __init__(
        self,
        storage: LocalStorage,
        topic: str,
        number: int,
        checkpoint_every: int,
        shared: SharedSegments | None = None,
        journal: SealJournal | None = None,
        topic_id: str | None = None,
    ) -> None:
        self.storage = storage
        self.topic, self.number = topic, number
        self.shared = shared or SharedSegments(storage)
        self.journal = journal
        #: the topic's id (``topic.json``): seal journal claims on a deleted topic of the
        #: same name are not this one's
        self.topic_id = topic_id
        #: shared files a truncation applied here dropped slices of (``FileLog`` deletes
        #: them once no partition holds a slice of them)
        self.dropped_shared: set[str] = set()
        self.where = f"{topic}/{number}"
        self._segments = f"{topic}/{number}/segments"
        self._manifest = f"{topic}/{number}/manifest"
        self._checkpoints = f"{topic}/{number}/checkpoints"
        self._checkpoint_every = checkpoint_every
        self._head = f"{topic}/{number}/head.json"
        self._verified: set[str] = set()
        self.state = self._load()
        if journal is not None and journal.has_earlier_boot():
            replay_claims(self, journal, everything=False)  # entries a power loss took
        self._check_complete()

    # -- manifest ----------------------------------------------------------------------------

    def refresh(self) -> PartitionState:
        """Apply the entries other writers created since the last refresh."""
        st = self.state
        while True:
            rel = f"{self._manifest}/{entry_name(st.next_entry)}"
            try:
                data = self.storage.read_bytes(rel)
            except FileNotFoundError:
                break
            try:
                dropped = st.apply(data, self.storage.path(rel))
            except CorruptLogError:
                repaired = self._repaired(rel)  # an entry a power loss left empty or torn
                if repaired is None:
                    raise
                dropped = st.apply(repaired, self.storage.path(rel))
            self._delete_segments(dropped)
        self._maybe_checkpoint()
        return st

    def _repaired(self, rel: str) -> bytes | None:
        """The next entry rewritten (durably) from the seal journal's claim on it; None if
        no claim chains to the entry before it."""
        data = None if self.journal is None else repair_claim(self, self.journal)
        if data is not None:
            self.storage.write_bytes_atomic(rel, data)
        return data

    def seal(
        self, name: str, count: int, writer_id: str, seal_id: str, crc: int | None = None
    ) -> int:
        """Create the seal entry for a written segment (retrying after lost races); returns its
        base offset, or the first one if ``seal_id`` was sealed before. ``crc``: the file's
        crc32, if the caller read it already (``inspect``)."""
        st = self.refresh()
        crc = self._checksum(name) if crc is None else crc
        while True:
            existing = st.by_seal_id.get(seal_id)
            if existing is not None:
                return same_seal(existing, name, seal_id)
            other = st.by_name.get(name)
            if other is not None:
                raise SealConflictError(
                    f"segment {name} of {self.where} is already sealed as {other.seal_id!r}; "
                    f"cannot seal it again as {seal_id!r}"
                )
            sealed = SealedSegment(name, st.end_offset, count, seal_id, crc)
            data = seal_entry(sealed, writer_id, time.time_ns() // 1_000_000, self.prev_hash())
            if self._create_entry(data):
                return sealed.base_offset
            self.refresh()  # another writer took that entry number

    def truncate(self, offset: int) -> int:
        """Drop the segments entirely below ``offset``; returns the new begin offset."""
        st = self.refresh()
        while True:
            if offset > st.end_offset:
                raise OffsetOutOfRangeError(
                    f"cannot truncate {self.where} before {offset}: it ends at {st.end_offset}"
                )
            begin, dropped = st.plan_truncation(offset)
            if begin <= st.begin_offset and not dropped:
                return st.begin_offset
            if self._create_entry(truncate_entry(begin, dropped, self.prev_hash())):
                return st.begin_offset
            self.refresh()

    def _create_entry(self, data: bytes) -> bool:
        return self.create_entry(data)

    def create_entry(self, data: bytes, *, durable: bool = True, head: bool = True) -> bool:
        """Create the next manifest entry exclusively and apply it; False if another writer
        took its number. ``durable=False``: no fsync (a seal journal record covers it);
        ``head=False``: leave ``head.json`` to the caller (``write_head``)."""
        st = self.state
        rel = f"{self._manifest}/{entry_name(st.next_entry)}"
        if not self.storage.create_exclusive(rel, data, durable=durable):
            return False
        self._delete_segments(st.apply(data, self.storage.path(rel)))
        if head:
            self.write_head()
        self._maybe_checkpoint()
        return True

    def prev_hash(self) -> str:
        """The hash the next entry is chained by (read from the file if not known)."""
        st = self.state
        if st.last_hash is None:
            rel = f"{self._manifest}/{entry_name(st.next_entry - 1)}"
            try:
                st.last_hash = entry_hash(self.storage.read_bytes(rel))
            except FileNotFoundError:
                raise CorruptLogError(f"manifest entry {rel} is missing") from None
        return st.last_hash

    def _checksum(self, name: str) -> int:
        return self._read_segment_file(name, lambda rel: zlib.crc32(self.storage.read_buffer(rel)))

    def write_head(self) -> None:
        st = self.state
        head = {"v": 1, "next_entry": st.next_entry, "hash": st.last_hash}
        try:
            # a hint, not a record: losing it in a power failure only skips one check
            self.storage.write_bytes_atomic(self._head, json.dumps(head).encode(), durable=False)
        except OSError:
            pass  # the head only helps detect lost entries; the entries stay authoritative

    def _check_complete(self) -> None:
        """Raise CorruptLogError if entries the head names, or entries before an existing
        one, are missing (read the head first: entries it counts existed before it)."""
        try:
            head = json.loads(self.storage.read_bytes(self._head))
            expected = int(head["next_entry"])
        except FileNotFoundError:
            expected = 0  # written before heads existed, or nothing sealed yet
        except (ValueError, KeyError, TypeError) as e:  # a torn hint: skip the tail check
            log.warning("ignoring the unreadable head %s: %s", self.storage.path(self._head), e)
            expected = 0
        found = self.refresh().next_entry
        if self.journal is not None and self._incomplete(found, expected):
            replay_claims(self, self.journal, everything=True)  # a gap a power loss left
            found = self.refresh().next_entry
        missing = self.storage.path(f"{self._manifest}/{entry_name(found)}")
        later = f"{self._manifest}/{entry_name(found + 1)}"
        # (refresh again: the entry may have been created just now, with the later one)
        if self.storage.exists(later) and self.refresh().next_entry == found:
            raise CorruptLogError(
                f"manifest of topic partition {self.where} has a gap: entry {missing} is "
                "missing, later entries exist"
            )
        if found < expected:
            raise CorruptLogError(
                f"manifest of topic partition {self.where} is truncated: entry {missing} is "
                f"missing, but {expected} entries were written"
            )

    def _incomplete(self, found: int, expected: int) -> bool:
        later = f"{self._manifest}/{entry_name(found + 1)}"
        return found < expected or self.storage.exists(later)

    def _load(self) -> PartitionState:
        for n in self._checkpoint_numbers():
            rel = f"{self._checkpoints}/{entry_name(n)}"
            try:
                return PartitionState.from_checkpoint(
                    self.storage.read_bytes(rel), self.storage.path(rel)
                )
            except (FileNotFoundError, LogError):
                continue  # removed meanwhile, or damaged: fall back to an older one
        return PartitionState()

    def _checkpoint_numbers(self) -> list[int]:
        infos = self.storage.list_dir(self._checkpoints)
        numbers = (checkpoint_number(i.base_name) for i in infos)
        return sorted((n for n in numbers if n is not None), reverse=True)

    def _maybe_checkpoint(self) -> None:
        st = self.state
        if st.next_entry - st.checkpointed_at < self._checkpoint_every:
            return
        try:
            rel = f"{self._checkpoints}/{entry_name(st.next_entry)}"
            self.storage.write_bytes_atomic(rel, st.to_checkpoint())
            st.checkpointed_at = st.next_entry
            for n in self._checkpoint_numbers()[_KEEP_CHECKPOINTS:]:
                self.storage.delete_file(f"{self._checkpoints}/{entry_name(n)}")
        except OSError:
            pass  # checkpoints only speed up loading; the entries stay authoritative

    def _delete_segments(self, names: list[str]) -> None:
        # Whoever applies a truncate entry deletes its segments, so a truncating process that
        # died before deleting them leaves no orphans behind.
        for name in names:
            parsed = parse_slice(name)
            if parsed is not None:
                self.dropped_shared.add(parsed[0])
                continue
            try:
                self.storage.delete_file(f"{self._segments}/{name}")
            except OSError:
                pass

    def plan_read(
        self, start: int, end: int | None, max_records: int | None
    ) -> tuple[list[SealedSegment], int, int]:
        """The segments to read for offsets ``[start, end)`` (``end=None``: the current end)
        capped at ``max_records``, with the effective start and stop; checks the range."""
        st = self.refresh()
        stop = st.end_offset if end is None else end
        if start < st.begin_offset:
            raise OffsetOutOfRangeError(
                f"offset {start} of {self.where} was truncated; the first readable offset is "
                f"{st.begin_offset}"
            )
        if max(start, stop) > st.end_offset:
            raise OffsetOutOfRangeError(
                f"offsets [{start}, {stop}) of {self.where} reach beyond its end offset "
                f"{st.end_offset}"
            )
        if stop < start:
            raise LogError(f"end offset {stop} is before start offset {start}")
        if max_records is not None:
            stop = min(stop, start + max_records)
        return st.covering(start, stop), start, stop

    # -- segment files -----------------------------------------------------------------------

    def write(self, table: pa.Table, writer_id: str) -> str:
        """Write ``table`` as a new (unsealed) segment file; returns its name."""
        name = new_segment_name(writer_id)
        self.storage.write_table(f"{self._segments}/{name}", with_metadata(table, writer_id))
        return name

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

    def unsealed(self) -> list[tuple[str, str, int]]:
        """(name, writer_id, record count) of every unsealed segment file."""
        sealed = set(self.refresh().by_name)
        out = []
        for info in self.storage.list_dir(self._segments):
            writer = writer_of(info.base_name)
            if writer is None or info.base_name in sealed:
                continue
            try:
                out.append((info.base_name, writer, self.segment_count(info.base_name)))
            except SegmentError:
                if self.storage.exists(f"{self._segments}/{info.base_name}"):
                    raise  # damaged, not just aborted meanwhile
        return sorted(out)

    def abort(self, name: str) -> None:
        """Delete an unsealed segment file (a no-op if it is gone). A slice of a shared file
        is only checked: the file goes as a whole (``FileLog``) once no slice is sealed."""
        if writer_of(name) is None and parse_slice(name) is None:
            raise SegmentError(f"{name!r} is not a segment name")
        sealed = self.refresh().by_name.get(name)
        if sealed is not None:
            raise SegmentError(
                f"segment {name} of {self.where} is sealed ({sealed.seal_id!r}) and cannot be "
                "aborted"
            )
        if parse_slice(name) is None:
            self.storage.delete_file(f"{self._segments}/{name}")

    def abort_by_prefix(self, writer_prefix: str) -> int:
        """Delete unsealed segments (and temporary files) of writers matching the prefix;
        returns how many segments were deleted."""
        sealed = set(self.refresh().by_name)
        removed = 0
        for info in self.storage.list_dir(self._segments):
            name = info.base_name
            is_tmp = name.startswith(TMP_PREFIX)
            # A temporary file is ".tmp-<32 hex>-<segment name>".
            writer = writer_of(name[len(TMP_PREFIX) + 33 :] if is_tmp else name)
            if writer is None or not writer.startswith(writer_prefix) or name in sealed:
                continue
            if self.storage.delete_file(f"{self._segments}/{name}") and not is_tmp:
                removed += 1
        return removed

    def remove_stale_tmp(self, max_age_s: float) -> int:
        return sum(
            self.storage.remove_stale_tmp(f"{self.where}/{sub}", max_age_s) for sub in SUBDIRS
        )
