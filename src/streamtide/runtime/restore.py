"""Bringing a logged store's local copy to the committed changelog end.

One code path serves an active task's restore at open, its catch-up after a deferred commit,
and standby and warm-up updates (which apply records below an offset limit): check the
checkpointed offset against the changelog, wipe the local copy (and load the newest usable
snapshot) when the offset cannot be trusted, then replay the changelog from there. The log
only shows sealed segments, so everything replayed is committed. Snapshots are taken here too,
and the changelog truncated below the oldest one kept.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from streamtide.errors import StoreError
from streamtide.log.api import Log, LogRecord
from streamtide.log.factory import log_path
from streamtide.processor.api import Metrics, StateStoreContext
from streamtide.processor.topology import Topology
from streamtide.runtime.log_traits import traits_of
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.changelogging import (
    ChangeLoggingKeyValueBytesStore,
    ChangelogRecord,
    apply_changelog,
)
from streamtide.state.checkpoint import TaskCheckpoint
from streamtide.state.snapshots import SnapshotStore
from streamtide.state.timestamped import encode
from streamtide.task_id import TaskId

log = logging.getLogger(__name__)

RECORDS_RESTORED = "records-restored"
RESTORE_DURATION_MS = "restore-duration-ms"
STANDBY_LAG = "standby-lag"
SNAPSHOTS_TAKEN = "snapshots-taken"


def set_gauge(metrics: Metrics, name: str, value: int) -> None:
    """Set a counter to ``value`` (TaskMetrics only counts up or down)."""
    metrics.increment(name, value - metrics.get(name))


def default_snapshot_store(log_: Log) -> SnapshotStore:
    """Snapshots live next to the changelogs: ``<log root>/_snapshots``."""
    root = getattr(log_, "root", None) or os.path.abspath(log_path(log_.url))
    return SnapshotStore(Path(root) / "_snapshots")


@dataclass
class StoreChangelog:
    """A logged store with its changelog partition and local position.

    ``position`` is the changelog offset the local copy is current to (committed data only);
    ``unconfirmed`` counts the changelog records sent since the last confirmation; ``limit`` is
    the offset below which records read ahead (``pending``, in offset order) may be applied.

    A ``source`` changelog is the input topic of a source table: nothing is sent to it, its
    committed end is the task's committed input offset (``committed_end``), not the topic's
    end, and its records become store entries as ``source_table_records`` says.
    """

    name: str
    store: ChangeLoggingKeyValueBytesStore
    topic: str
    partition: int
    position: int = 0
    unconfirmed: int = 0
    limit: int = 0
    pending: list[LogRecord] = field(default_factory=list)
    source: bool = False
    committed_end: int = 0

    @property
    def local(self) -> KeyValueBytesStore:
        return self.store.inner

    @property
    def persistent(self) -> bool:
        return bool(self.store.persistent)


def source_table_records(
    keys: list[bytes | None], values: list[bytes | None], timestamps: list[int]
) -> Iterator[ChangelogRecord]:
    """The store entries a source table's input records stand for: the value with the
    record's timestamp (a timestamped store), a tombstone as a delete; records without key
    were never stored (the table drops them)."""
    for key, value, timestamp in zip(keys, values, timestamps):
        if key is None:
            continue
        yield key, (None if value is None else encode(value, timestamp)), ()


def ensure_changelog_topic(
    log_: Log, topology: Topology, cl: StoreChangelog, context: StateStoreContext
) -> None:
    """Create a missing changelog topic with one partition per task of the sub-topology (the
    partition count of its widest source topic)."""
    if log_.has_topic(cl.topic):
        return
    sub = topology.subtopology(TaskId.parse(context.task_id).subtopology)
    counts = [cl.partition + 1]
    for topic in sub.source_topics:
        physical = topology.resolve_topic(topic, context.application_id)
        if log_.has_topic(physical):
            counts.append(log_.partitions(physical))
    log_.create_topic(cl.topic, max(counts), exist_ok=True)


class ChangelogRestorer:
    """Validates, wipes, loads snapshots and replays changelogs for the stores of one task."""

    def __init__(
        self,
        log_: Log,
        application_id: str,
        task_id: str,
        metrics: Metrics,
        *,
        snapshots: SnapshotStore | None = None,
        batch_size: int = 10_000,
    ) -> None:
        self.log = log_
        self.offset_gaps = traits_of(log_).offset_gaps
        self.application_id = application_id
        self.task_id = task_id
        self.metrics = metrics
        self.snapshots = snapshots
        self.batch_size = batch_size

    # ---- the changelog -------------------------------------------------------------------

    def end(self, cl: StoreChangelog) -> int:
        """The committed end of the store's changelog partition (0 if the topic is missing;
        the task's committed input offset for a source changelog)."""
        if cl.source:
            return cl.committed_end
        if not self.log.has_topic(cl.topic):
            return 0
        return self.log.end_offset(cl.topic, cl.partition)

    def begin(self, cl: StoreChangelog) -> int:
        if not self.log.has_topic(cl.topic):
            return 0
        return self.log.begin_offset(cl.topic, cl.partition)

    # ---- validation ----------------------------------------------------------------------

    def problem(
        self,
        cl: StoreChangelog,
        checkpoint: TaskCheckpoint | None,
        checkpoint_problem: str | None,
        begin: int,
        end: int,
    ) -> tuple[int | None, str | None, int]:
        """``(offset, None, 0)`` when the checkpointed offset can be trusted, else
        ``(None, why, log level)``: INFO when the task simply has no local state here yet (it
        moved, or is new), WARNING when local state exists but cannot be trusted."""
        info, warning = logging.INFO, logging.WARNING
        if not cl.persistent:
            return None, "it is an in-memory store", logging.DEBUG
        if checkpoint_problem is not None:
            return None, f"the checkpoint file is unusable ({checkpoint_problem})", warning
        wiped = getattr(cl.local, "wiped_reason", None)
        if wiped is not None:
            return None, wiped, warning
        if getattr(cl.local, "created_fresh", False) and end > 0:
            why = "its local copy is missing (the state directory was deleted or never existed)"
            return None, why, info
        if checkpoint is None:
            if getattr(cl.local, "created_fresh", True):
                return None, "there is no checkpoint file", info
            return None, "there is no checkpoint file to vouch for its local copy", warning
        if cl.name not in checkpoint.offsets:
            return None, "the checkpoint has no offset for it", info
        offset = checkpoint.offsets[cl.name]
        if offset > end:
            why = f"the checkpoint offset {offset} is ahead of the changelog end {end}"
            return None, why, warning
        if offset < begin and not cl.source:
            why = (
                f"the changelog was truncated: it begins at {begin}, after the checkpoint "
                f"offset {offset}"
            )
            return None, why, warning
        return offset, None, 0

    def initialize(
        self,
        cl: StoreChangelog,
        checkpoint: TaskCheckpoint | None,
        checkpoint_problem: str | None = None,
    ) -> None:
        """Set ``cl.position`` from the checkpoint, or rebuild the local copy when the
        checkpoint cannot be trusted (wipe, then the newest usable snapshot)."""
        begin, end = self.begin(cl), self.end(cl)
        offset, why, level = self.problem(cl, checkpoint, checkpoint_problem, begin, end)
        if why is None:
            cl.position = int(offset)  # type: ignore[arg-type]
            return
        fresh = bool(getattr(cl.local, "created_fresh", False))  # created empty by this open
        self.rebuild(cl, why, begin, end, level=level, empty=fresh)

    def rebuild(
        self,
        cl: StoreChangelog,
        why: str,
        begin: int | None = None,
        end: int | None = None,
        *,
        level: int = logging.WARNING,
        empty: bool = False,
    ) -> None:
        """Wipe the local copy (unless ``empty``: it was just created) and restart from the
        newest usable snapshot (an unreadable one is skipped for the next older) or the
        beginning, logging why at ``level`` (DEBUG when there is nothing to restore)."""
        begin = self.begin(cl) if begin is None else begin
        end = self.end(cl) if end is None else end
        if not empty:
            cl.local.clear()
        if end == 0:
            level = logging.DEBUG
        for snapshot in self._usable_snapshots(cl, begin, end):
            log.log(
                level,
                "task %s: rebuilding store %r from the snapshot at offset %d and changelog %s "
                "[%d, %d) because %s",
                self.task_id,
                cl.name,
                snapshot,
                cl.topic,
                snapshot,
                end,
                why,
            )
            started = time.perf_counter()
            try:
                cl.position = self.snapshots.restore_into(  # type: ignore[union-attr]
                    self.application_id, self.task_id, cl.local, snapshot
                )
            except Exception as exc:
                log.warning(
                    "task %s: cannot load the snapshot of store %r at offset %d (%s: %s); "
                    "trying an older one",
                    self.task_id,
                    cl.name,
                    snapshot,
                    type(exc).__name__,
                    exc,
                )
                cl.local.clear()
                continue
            took = round((time.perf_counter() - started) * 1000)
            self.metrics.increment(RESTORE_DURATION_MS, took)
            return
        if cl.source:
            begin = min(begin, end)
            log.log(
                level,
                "task %s: rebuilding store %r from its source topic %s [%d, %d) because %s",
                self.task_id,
                cl.name,
                cl.topic,
                begin,
                end,
                why,
            )
            cl.position = begin
            return
        if begin > 0:
            raise StoreError(
                f"task {self.task_id}: cannot rebuild store {cl.name!r} ({why}): changelog "
                f"{cl.topic} partition {cl.partition} begins at {begin} and no snapshot covers "
                f"the offsets before it"
            )
        log.log(
            level,
            "task %s: rebuilding store %r from the beginning of changelog %s (%d records) "
            "because %s",
            self.task_id,
            cl.name,
            cl.topic,
            end,
            why,
        )
        cl.position = 0

    def _usable_snapshots(self, cl: StoreChangelog, begin: int, end: int) -> list[int]:
        """Snapshot offsets from which the changelog still continues, newest first."""
        if self.snapshots is None or end == 0:
            return []
        offsets = self.snapshots.offsets(self.application_id, self.task_id, cl.name)
        return [o for o in reversed(offsets) if begin <= o <= end]

    # ---- replay --------------------------------------------------------------------------

    def replay(self, cl: StoreChangelog, end: int | None = None) -> int:
        """Apply the changelog from ``cl.position`` to ``end`` (default: the committed end)
        to the local copy; returns the number of records applied."""
        end = self.end(cl) if end is None else end
        if cl.position >= end:
            return 0
        if cl.source:  # a source topic's retention may have deleted what the task read
            cl.position = max(cl.position, min(self.begin(cl), end))
        started = time.perf_counter()
        applied = 0
        while cl.position < end:
            table = self.log.read_table(
                cl.topic, cl.partition, cl.position, end, max_records=self.batch_size
            )
            if table.num_rows == 0:
                # nothing committed is left below ``end``: the rest are gaps (transaction
                # markers, aborted records of a log with transactions)
                if self.offset_gaps:
                    cl.position = end
                break
            keys = table.column("key").to_pylist()
            values = table.column("value").to_pylist()
            if cl.source:
                timestamps = table.column("timestamp").to_pylist()
                applied += apply_changelog(cl.local, source_table_records(keys, values, timestamps))
            else:
                headers = [
                    tuple((h["key"], h["value"]) for h in hs) if hs else ()
                    for hs in table.column("headers").to_pylist()
                ]
                applied += apply_changelog(cl.local, zip(keys, values, headers), cl.store.derived)
            cl.position = int(table.column("offset")[-1].as_py()) + 1
        self.metrics.increment(RECORDS_RESTORED, applied)
        self.metrics.increment(f"{RECORDS_RESTORED}.{cl.name}", applied)
        self.metrics.increment(RESTORE_DURATION_MS, round((time.perf_counter() - started) * 1000))
        return applied

    def apply_records(self, cl: StoreChangelog, records: Iterable[LogRecord]) -> int:
        """Apply already-read changelog records (in offset order, none below the position)."""
        batch = list(records)
        if not batch:
            return 0
        if cl.source:
            entries = source_table_records(
                [r.key for r in batch], [r.value for r in batch], [r.timestamp for r in batch]
            )
            count = apply_changelog(cl.local, entries)
        else:
            count = apply_changelog(
                cl.local,
                ((r.key, r.value, r.headers) for r in batch),  # type: ignore[misc]  # changelog records are keyed
                cl.store.derived,
            )
        cl.position = int(batch[-1].offset) + 1  # type: ignore[arg-type]
        self.metrics.increment(RECORDS_RESTORED, count)
        self.metrics.increment(f"{RECORDS_RESTORED}.{cl.name}", count)
        return count

    def apply_below_limit(self, cl: StoreChangelog) -> int:
        """Apply the records kept in ``cl.pending`` whose offset is below ``cl.limit``."""
        pending, limit = cl.pending, cl.limit
        cut = 0
        while cut < len(pending) and pending[cut].offset < limit:  # type: ignore[operator]
            cut += 1
        if not cut:
            return 0
        applied = self.apply_records(cl, pending[:cut])
        del pending[:cut]
        return applied

    def keep(self, cl: StoreChangelog, records: Iterable[LogRecord]) -> None:
        """Add read-ahead records to ``cl.pending``, skipping those the store already has;
        a gap after what it has is an error."""
        expected = cl.pending[-1].offset + 1 if cl.pending else cl.position  # type: ignore[operator]
        fresh = [r for r in records if r.offset >= expected]  # type: ignore[operator]
        if fresh and fresh[0].offset != expected:
            raise StoreError(
                f"task {self.task_id}: changelog records of store {cl.name!r} skip from "
                f"offset {expected} to {fresh[0].offset}"
            )
        cl.pending.extend(fresh)

    # ---- snapshots -----------------------------------------------------------------------

    def snapshot(self, cl: StoreChangelog, *, keep: int = 2, truncate: bool = True) -> None:
        """Snapshot the local copy at its position (unless one exists there); keep the
        ``keep`` newest (at least two) and truncate the changelog below the oldest kept."""
        snapshots = self.snapshots
        if snapshots is None or cl.position == 0:
            return
        app, task = self.application_id, self.task_id
        existing = snapshots.offsets(app, task, cl.name)
        if existing and existing[-1] >= cl.position:
            return
        started = time.perf_counter()
        snapshots.take(app, task, cl.local, cl.position)
        self.metrics.increment(SNAPSHOTS_TAKEN)
        log.info(
            "task %s: snapshot of store %r at changelog offset %d took %.1f ms",
            task,
            cl.name,
            cl.position,
            (time.perf_counter() - started) * 1000,
        )
        # Keep at least two snapshots and the changelog from the oldest kept one on, so a
        # damaged newest snapshot still leaves a way to rebuild the store.
        snapshots.prune(app, task, cl.name, keep=max(2, keep))
        kept = snapshots.offsets(app, task, cl.name)
        if truncate and not cl.source and len(kept) >= 2 and self.log.has_topic(cl.topic):
            self.log.truncate_before(cl.topic, cl.partition, kept[0])
