"""One partition directory of the file log: its manifest (its segment files:
``partition_segments``).

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
never read as records. Entries a group seal created without fsync and a power loss took (or
left empty) are rebuilt from the seal journal first (``seal_journal``, ``sealing``).
"""

from __future__ import annotations

import json
import logging
import time

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
from streamtide.log.partition_segments import PartitionSegments, delete_dropped
from streamtide.log.seal_journal import SealJournal
from streamtide.log.sealing import repair_claim, replay_claims, same_seal
from streamtide.log.segments import writer_of
from streamtide.log.shared_segments import SharedSegments, parse_slice
from streamtide.log.storage import TMP_PREFIX, LocalStorage

log = logging.getLogger(__name__)

SUBDIRS = ("segments", "manifest", "checkpoints")
_KEEP_CHECKPOINTS = 2


class Partition(PartitionSegments):
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
        super().__init__(storage, topic, number, shared)
        self.journal = journal
        #: the topic's id (``topic.json``): seal journal claims on a deleted topic of the
        #: same name are not this one's
        self.topic_id = topic_id
        #: shared files a truncation applied here dropped slices of (``FileLog`` deletes
        #: them once no partition holds a slice of them)
        self.dropped_shared: set[str] = set()
        self._manifest = f"{topic}/{number}/manifest"
        self._checkpoints = f"{topic}/{number}/checkpoints"
        self._checkpoint_every = checkpoint_every
        self._head = f"{topic}/{number}/head.json"
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
        took its number. ``durable=False``: no fsync, and readers may find the entry
        partly written until this returns (a seal journal record claims it: they rebuild it
        from there); ``head=False``: leave ``head.json`` to the caller (``write_head``)."""
        st = self.state
        rel = f"{self._manifest}/{entry_name(st.next_entry)}"
        create = self.storage.create_exclusive if durable else self.storage.create_lazily
        if not create(rel, data):
            return False
        self._delete_segments(st.apply(data, self.storage.path(rel)))
        if head:
            self.write_head()
        self._maybe_checkpoint()
        return True

    def prev_hash(self) -> str | None:
        """The hash the next entry is chained by (read from the file if not known; None:
        entries of this partition are not chained one by one)."""
        st = self.state
        if st.last_hash is None:
            rel = f"{self._manifest}/{entry_name(st.next_entry - 1)}"
            try:
                st.last_hash = entry_hash(self.storage.read_bytes(rel))
            except FileNotFoundError:
                raise CorruptLogError(f"manifest entry {rel} is missing") from None
        return st.last_hash

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

    def has_later_entry(self) -> bool:
        """Whether an entry after the next one exists (the next one is missing: a gap)."""
        return self.storage.exists(f"{self._manifest}/{entry_name(self.state.next_entry + 1)}")

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
            # not synced: the entries stay authoritative (durable, or claimed by a seal
            # journal record until synced), and a checkpoint lost or left empty by a power
            # loss only means opening from an older one, or from entry 0
            self.storage.write_bytes_atomic(rel, st.to_checkpoint(), durable=False)
            st.checkpointed_at = st.next_entry
            for n in self._checkpoint_numbers()[_KEEP_CHECKPOINTS:]:
                self.storage.delete_file(f"{self._checkpoints}/{entry_name(n)}")
        except OSError:
            pass  # checkpoints only speed up loading; the entries stay authoritative

    def _delete_segments(self, names: list[str]) -> None:
        delete_dropped(self.storage, self._segments, names, self.dropped_shared)

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
