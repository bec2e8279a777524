"""The embedded file log: topics as directories of immutable Arrow segments plus a manifest.

On-disk layout under the root::

    <topic>/topic.json                        name, partition count and manifest layout
                                              (created exclusively)
    <topic>/manifest/<G>.json                 group G of a grouped topic's manifest entries
                                              (of any of its partitions), naming group G-1's
                                              hash (``file_topic_manifest``)
    <topic>/checkpoints/<G>.json              a grouped topic's partitions after G groups
    <topic>/<p>/segments/<writer>+<id>.arrow  segment files, sealed or not
    <topic>/<p>/manifest/<N>.json             per-partition layout (topics of earlier
                                              releases): entry N seals a segment (with its
                                              crc32) or truncates; names entry N-1's hash
    <topic>/<p>/checkpoints/<N>.json          state after entries 0..N-1 (speeds up opening)
    <topic>/<p>/head.json                     the newest entry written (detects lost entries)
    .shared/<writer>+<id>.arrow               segments of many partitions in one file
                                              (``shared_segments``), sealed by slice
    .seals/<seq>-<boot id>.json               seal journal records: the manifest entries a
                                              group seal creates without fsyncs
                                              (``seal_journal``)

``partition.Partition`` owns one partition directory, ``file_topics.FileTopics`` (the base
class) the topics and partition handles; this module adds reading, writing, sealing, upkeep
and the rest of the ``Log`` interface.

``end_offset`` and reads trust the cached topic metadata until data turns up missing or the
handle is reopened: topics are not expected to be re-created under a running reader.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence

import pyarrow as pa

from streamtide.log.api import LogRecord, Records, SegmentRef
from streamtide.log.errors import (
    CorruptLogError,
    LogError,
    OffsetOutOfRangeError,
    SegmentError,
    UnknownPartitionError,
    UnknownTopicError,
)
from streamtide.log.file_topic_manifest import GROUPS_DIR
from streamtide.log.file_topics import FileTopics
from streamtide.log.manifest import PartitionState, SealedSegment
from streamtide.log.seal_journal import SEALS_DIR
from streamtide.log.sealing import replay_claims, same_seal, seal_group, seal_grouped
from streamtide.log.segments import READ_SCHEMA, iter_records, to_table, with_offsets
from streamtide.log.shared_segments import SHARED_DIR, SharedFile, SharedUpkeep, slice_name

log = logging.getLogger(__name__)

#: writer_id of the segments written by ``append``.
APPEND_WRITER = "append"


class FileLog(FileTopics):
    """The embedded log rooted at a local directory (created by the first ``create_topic``).

    ``fsync=False`` skips fsync calls: faster, still safe when a process dies, not when the
    machine loses power. ``checkpoint_every`` is how many manifest entries may accumulate
    before a partition's state is checkpointed. Thread-safe; one handle per process is enough.
    """

    def __init__(
        self,
        root: str,
        *,
        fsync: bool = True,
        checkpoint_every: int = 256,
        grouped_manifests: bool = True,
    ) -> None:
        super().__init__(
            root,
            fsync=fsync,
            checkpoint_every=checkpoint_every,
            grouped_manifests=grouped_manifests,
        )
        self._upkeep = SharedUpkeep(self._shared, self._slice_states)
        self._syncing: threading.Thread | None = None

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # Pickles as "open the same root" (e.g. in Spark closures); caches stay behind.
        return (
            FileLog._reopen,
            (self.root, self._storage.fsync, self._checkpoint_every, self._grouped_manifests),
        )

    @staticmethod
    def _reopen(
        root: str, fsync: bool, checkpoint_every: int, grouped_manifests: bool = True
    ) -> FileLog:
        return FileLog(
            root,
            fsync=fsync,
            checkpoint_every=checkpoint_every,
            grouped_manifests=grouped_manifests,
        )

    def __repr__(self) -> str:
        return f"FileLog({self.root!r})"

    # -- offsets -----------------------------------------------------------------------------

    def end_offset(self, topic: str, partition: int) -> int:
        with self._lock:
            return self._partition(topic, partition).refresh().end_offset

    def begin_offset(self, topic: str, partition: int) -> int:
        with self._lock:
            return self._partition(topic, partition).refresh().begin_offset

    def end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """See ``Log.end_offsets``: a grouped topic is refreshed once for all its partitions."""
        return {key: st.end_offset for key, st in self._states(partitions).items()}

    def begin_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """See ``Log.begin_offsets``: a grouped topic is refreshed once for all its partitions."""
        return {key: st.begin_offset for key, st in self._states(partitions).items()}

    def _states(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], PartitionState]:
        out: dict[tuple[str, int], PartitionState] = {}
        with self._lock:
            refreshed: set[str] = set()
            for topic, partition in partitions:
                part = self._partition(topic, partition)
                manifest = self._manifests.get(topic)
                if manifest is None:
                    out[(topic, partition)] = part.refresh()
                    continue
                if topic not in refreshed:
                    manifest.refresh()
                    refreshed.add(topic)
                out[(topic, partition)] = part.state
        return out

    # -- reading -----------------------------------------------------------------------------

    def read(
        self,
        topic: str,
        partition: int,
        start: int = 0,
        end: int | None = None,
        max_records: int | None = None,
    ) -> Iterator[LogRecord]:
        plan = self._plan_read(topic, partition, start, end, max_records)
        return self._iter_records(topic, partition, *plan)

    def read_table(
        self,
        topic: str,
        partition: int,
        start: int = 0,
        end: int | None = None,
        max_records: int | None = None,
    ) -> pa.Table:
        segments, lo, hi = self._plan_read(topic, partition, start, end, max_records)
        tables = [with_offsets(*self._slice(topic, partition, s, lo, hi)) for s in segments]
        return pa.concat_tables(tables) if tables else READ_SCHEMA.empty_table()

    def _iter_records(
        self, topic: str, partition: int, segments: list[SealedSegment], lo: int, hi: int
    ) -> Iterator[LogRecord]:
        for seg in segments:
            yield from iter_records(*self._slice(topic, partition, seg, lo, hi))

    def _plan_read(
        self, topic: str, partition: int, start: int, end: int | None, max_records: int | None
    ) -> tuple[list[SealedSegment], int, int]:
        start = _offset(start, "start")
        end = None if end is None else _offset(end, "end")
        if max_records is not None and (
            isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 0
        ):
            raise LogError(f"max_records must be a non-negative int, got {max_records!r}")
        with self._lock:
            return self._partition(topic, partition).plan_read(start, end, max_records)

    def _slice(
        self, topic: str, partition: int, seg: SealedSegment, lo: int, hi: int
    ) -> tuple[pa.Table, int]:
        with self._lock:
            part = self._partition(topic, partition)
        try:
            return part.read_slice(seg, lo, hi)
        except FileNotFoundError:
            with self._lock:
                if part.refresh().begin_offset > seg.base_offset:
                    raise OffsetOutOfRangeError(
                        f"offset {max(lo, seg.base_offset)} of {topic}/{partition} was "
                        "truncated while being read"
                    ) from None
                self._read_partition_count(topic)  # UnknownTopicError if deleted meanwhile
            raise CorruptLogError(
                f"sealed segment file {self._storage.path(part.where)}/segments/{seg.name} of "
                f"topic partition {part.where} is missing"
            ) from None

    # -- writing -----------------------------------------------------------------------------

    def append(self, topic: str, partition: int, records: Records) -> int:
        self._check_open()
        table = to_table(records)
        if table.num_rows == 0:
            return self.end_offset(topic, partition)
        name = self._write(topic, partition, table, APPEND_WRITER)
        seal_id = f"{APPEND_WRITER}/{uuid.uuid4().hex}"
        with self._lock:
            part = self._partition(topic, partition, verify=True)
            return part.seal(name, table.num_rows, APPEND_WRITER, seal_id)

    def write_segment(
        self, topic: str, partition: int, records: Records, *, writer_id: str
    ) -> SegmentRef:
        self._check_open()
        table = to_table(records)
        name = self._write(topic, partition, table, writer_id)
        return SegmentRef(topic, partition, name, writer_id, table.num_rows)

    def write_segments(
        self, parts: Sequence[tuple[str, int, Records, str]], *, writer_id: str
    ) -> list[SegmentRef]:
        """One shared file for all ``parts`` (see ``Log.write_segments``)."""
        self._check_open()
        tables = [(t, p, to_table(records), w) for t, p, records, w in parts]
        if not tables:
            return []
        with self._lock:
            for topic, partition in {(t, p) for t, p, _, _ in tables}:
                self._partition(topic, partition)  # the topic and partition exist
        name = self._shared.write(tables, writer_id)
        return [
            SegmentRef(t, p, slice_name(name, i), w, table.num_rows)
            for i, (t, p, table, w) in enumerate(tables)
        ]

    def _write(self, topic: str, partition: int, table: pa.Table, writer_id: str) -> str:
        with self._lock:
            part = self._partition(topic, partition)
        try:
            return part.write(table, writer_id)  # outside the lock: writers run in parallel
        except FileNotFoundError:
            with self._lock:
                self._forget(topic)
                self._read_partition_count(topic)  # UnknownTopicError if deleted meanwhile
            raise

    def read_segment(self, segment: SegmentRef) -> pa.Table:
        self._check_open()
        with self._lock:
            part = self._partition(segment.topic, segment.partition)
        table = part.read_unsealed(segment.name, segment.record_count)
        return table.replace_schema_metadata(None)

    def seal(self, topic: str, partition: int, segment: SegmentRef, *, seal_id: str) -> int:
        self._check_open()
        if not isinstance(seal_id, str) or not seal_id:
            raise LogError("seal_id must be a non-empty string")
        if (segment.topic, segment.partition) != (topic, partition):
            raise LogError(
                f"segment {segment.name} belongs to {segment.topic}/{segment.partition}, "
                f"not {topic}/{partition}"
            )
        with self._lock:
            part = self._partition(topic, partition, verify=True)
            existing = part.refresh().by_seal_id.get(seal_id)
            if existing is not None:
                return same_seal(existing, segment.name, seal_id)
            count, crc = part.inspect(segment.name)
            if count != segment.record_count:
                raise SegmentError(
                    f"segment {segment.name} of {part.where} holds {count} records, its "
                    f"reference says {segment.record_count}"
                )
            return part.seal(segment.name, count, segment.writer_id, seal_id, crc)

    def seal_many(self, seals: Sequence[tuple[SegmentRef, str]]) -> list[int]:
        """Seal many segments (of any partitions) for one durable seal journal record
        instead of two fsyncs per segment (``seal_journal``); see ``Log.seal_many``."""
        self._check_open()
        if not seals:
            return []
        for _, seal_id in seals:
            if not isinstance(seal_id, str) or not seal_id:
                raise LogError("seal_id must be a non-empty string")
        with self._lock:
            for topic in sorted({ref.topic for ref, _ in seals}):
                self._read_partition_count(topic)  # never into a deleted or re-created topic
            parts = {
                (r.topic, r.partition): self._partition(r.topic, r.partition) for r, _ in seals
            }
            grouped = [i for i, (r, _) in enumerate(seals) if self._manifests.get(r.topic)]
            bases: list[int] = [0] * len(seals)
            if grouped:  # topics of this release: one durable group per topic
                manifests = {t: m for t, m in self._manifests.items() if m is not None}
                found = seal_grouped(manifests, parts, [seals[i] for i in grouped])
                for index, base in zip(grouped, found):
                    bases[index] = base
            if len(grouped) < len(seals):  # topics of earlier releases: the seal journal
                rest = [i for i in range(len(seals)) if not self._manifests.get(seals[i][0].topic)]
                with self._journal.locked():
                    found = seal_group(parts, [seals[i] for i in rest], self._journal)
                for index, base in zip(rest, found):
                    bases[index] = base
                if self._journal.compact_due():
                    self._sync_in_background()
            return bases

    def sync_seals(self) -> int:
        """Make every group seal so far durable with one sync of the file system and drop
        their seal journal records; returns how many records went. Runs by itself every
        ``sync_interval_s`` (in the background) and when a handle that sealed closes."""
        with self._lock, self._journal.locked():
            names = self._journal.settled(self._replay_earlier_boot)
        self._storage.sync_all()
        with self._lock:
            return self._journal.drop(names)

    def _sync_in_background(self) -> None:
        if self._syncing is not None and self._syncing.is_alive():
            return
        self._syncing = threading.Thread(
            target=self._sync_quietly, name="streamtide-seal-sync", daemon=True
        )
        self._syncing.start()

    def _sync_quietly(self) -> None:
        try:
            self.sync_seals()
        except (OSError, LogError) as e:  # the records stay: the next sync drops them
            log.warning("syncing the file log's group seals at %s failed: %s", self.url, e)

    def _replay_earlier_boot(self, partitions: set[tuple[str, int]]) -> None:
        """Replay the seal journal's claims of earlier boots on ``partitions`` (caller holds
        the lock; opening a partition replays them)."""
        for topic, partition in sorted(partitions):
            try:
                cached = (topic, partition) in self._partitions
                part = self._partition(topic, partition, verify=True)
            except (UnknownTopicError, UnknownPartitionError):
                continue  # deleted since: nothing to bring back
            if cached:
                replay_claims(part, self._journal, everything=False)

    def list_unsealed(self, topic: str, partition: int) -> list[SegmentRef]:
        with self._lock:
            found = self._partition(topic, partition, verify=True).unsealed()
        return [SegmentRef(topic, partition, n, w, c) for n, w, c in found]

    def abort_unsealed(self, topic: str, partition: int, segment: SegmentRef) -> None:
        with self._lock:
            self._partition(topic, partition, verify=True).abort(segment.name)

    def abort_unsealed_by_prefix(
        self, writer_prefix: str, *, topics: Iterable[str] | None = None
    ) -> int:
        self._check_open()
        removed = 0
        wanted = None if topics is None else list(topics)
        for topic in self.list_topics() if wanted is None else wanted:
            with self._lock:  # the topic's metadata read once, as a write would
                count = self._read_partition_count(topic)
            for partition in range(count):
                with self._lock:
                    part = self._partition(topic, partition)
                    removed += part.abort_by_prefix(writer_prefix)
        with self._lock:
            return removed + self._upkeep.abort(
                lambda writer: writer.startswith(writer_prefix),
                lambda shared: wanted is None or {s.topic for s in shared.slices} <= set(wanted),
            )

    def truncate_before(self, topic: str, partition: int, offset: int) -> int:
        offset = _offset(offset, "offset")
        with self._lock:
            part = self._partition(topic, partition, verify=True)
            begin = part.truncate(offset)
            # the truncate entry is durable: delete the shared files it left without a slice
            dropped, part.dropped_shared = part.dropped_shared, set()
            for file in sorted(dropped):
                self._upkeep.delete_if_dead(file)
            return begin

    def abort_unsealed_shared(self, decided: Callable[[str], bool]) -> int:
        """Delete the shared files of writers that ``decided`` says are done (dead, or their
        batch decided) and of which no slice is sealed; returns how many slices went."""
        self._check_open()
        with self._lock:
            return self._upkeep.abort(decided)

    def list_unsealed_shared(self) -> list[str]:
        """Shared files of which no slice is sealed (file-log specific): what a sweep of
        decided writers deletes (``abort_unsealed_shared``)."""
        self._check_open()
        with self._lock:
            return [shared.name for shared in self._upkeep.unsealed()]

    def _slice_states(self, shared: SharedFile) -> Iterator[PartitionState]:
        """The current state of each partition a shared file has a slice for (caller holds
        the lock; a topic deleted or re-created without the partition has none)."""
        for topic in sorted({s.topic for s in shared.slices}):
            try:
                count = self._read_partition_count(topic)  # always the disk: deletions show
            except UnknownTopicError:
                continue
            for partition in sorted({s.partition for s in shared.slices if s.topic == topic}):
                if partition < count:
                    yield self._partition(topic, partition).refresh()

    # -- maintenance and lifecycle -----------------------------------------------------------

    def remove_stale_temp_files(self, max_age_s: float = 3600.0) -> int:
        """Delete temporary files older than ``max_age_s`` left by writers that died mid-write
        (file-log specific; safe at any time). Returns how many were deleted."""
        self._check_open()
        removed = self._storage.remove_stale_tmp("", max_age_s)
        removed += self._storage.remove_stale_tmp(SHARED_DIR, max_age_s)
        removed += self._storage.remove_stale_tmp(SEALS_DIR, max_age_s)
        for topic in self.list_topics():
            removed += self._storage.remove_stale_tmp(topic, max_age_s)
            removed += self._storage.remove_stale_tmp(f"{topic}/{GROUPS_DIR}", max_age_s)
            for p in range(self.partitions(topic)):
                with self._lock:
                    removed += self._partition(topic, p).remove_stale_tmp(max_age_s)
        with self._lock:  # orphans: of a truncation that died, of a lost work unit
            removed += self._upkeep.delete_stale(max_age_s)
        return removed

    def close(self) -> None:
        """Release the handle; group seals it made become durable first (one sync)."""
        if self._syncing is not None:
            self._syncing.join()
        if not self._closed and self._journal.unsynced():
            self._sync_quietly()
        with self._lock:
            self._closed = True
            self._partitions.clear()
            self._partition_counts.clear()
            self._topic_ids.clear()


def _offset(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise LogError(f"{what} must be an int offset, got {value!r}")
    if value < 0:
        raise OffsetOutOfRangeError(f"{what} offset must not be negative, got {value}")
    return value
