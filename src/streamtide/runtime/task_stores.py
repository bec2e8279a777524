"""``TaskStores``: the state stores of one task for one open period, and the one protocol by
which their writes are committed (docs/engine.md, "Exactly-once": local state never holds
uncommitted writes). Active, standby and warm-up tasks all use it.

- ``open`` (active) builds the task's stores and brings each logged one to the committed
  changelog end (checkpoint, snapshot, wipe-and-rebuild: ``runtime.restore``);
  ``open_standby`` (standby, warm-up) opens the logged stores only, checked the same way, and
  ``catch_up``, ``poll`` and ``update`` apply changelog records below an offset limit.
- ``commit`` sends the buffered writes to the changelogs and holds them; ``on_committed``
  applies them once the changelog holds exactly them, ``abort`` drops them, and so does closing
  without either (the next ``open`` replays what was committed).
- Every ``snapshot_interval`` confirmed commits, stores are snapshotted (``runtime.restore``).

Without a log (the test driver) the collector is the changelog and takes the records at once:
there is nothing to restore or checkpoint, and a confirmed commit applies what was sent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamtide.errors import StoreError, TopologyError
from streamtide.log.api import Log, LogRecord
from streamtide.processor.api import StateStore, StateStoreContext
from streamtide.runtime.collector import send_columns
from streamtide.runtime.committed import TaskCommittedState, offset_key
from streamtide.runtime.log_traits import traits_of
from streamtide.runtime.restore import (
    STANDBY_LAG,
    ChangelogRestorer,
    StoreChangelog,
    default_snapshot_store,
    ensure_changelog_topic,
    set_gauge,
)
from streamtide.state.changelogging import ChangeLoggingKeyValueBytesStore
from streamtide.state.checkpoint import TaskCheckpoint, load_checkpoint, write_checkpoint
from streamtide.state.snapshots import SnapshotStore
from streamtide.task_id import TaskId

if TYPE_CHECKING:
    from streamtide.processor.topology import Topology
    from streamtide.runtime.collector import RecordCollector

log = logging.getLogger(__name__)


def partition_of(task_id: str) -> int:
    """The input partition a task id ``"<subtopology>_<partition>"`` names."""
    return TaskId.parse(task_id).partition


class TaskStores:
    """One task's stores, their changelogs and checkpoint; see the module docstring."""

    def __init__(
        self,
        topology: Topology,
        store_names: list[str],
        log_: Log | None = None,
        *,
        snapshots: SnapshotStore | None = None,
        snapshot_interval: int = 0,
        truncate_changelog: bool = True,
        keep_snapshots: int = 2,
        committed: TaskCommittedState | None = None,
        batch: int = -1,
        restore_batch_size: int = 10_000,
        fsync: bool = True,
    ) -> None:
        self.topology = topology
        self.store_names = list(store_names)
        self.log = log_
        if log_ is not None and not traits_of(log_).snapshots:
            # (Kafka: no directory every executor shares for snapshots, and compacted
            # changelogs cannot be truncated; restores replay the changelog)
            snapshots, snapshot_interval = None, 0
        elif snapshots is None and log_ is not None:
            snapshots = default_snapshot_store(log_)
        self.snapshots = snapshots
        self.snapshot_interval = snapshot_interval
        self.truncate_changelog = truncate_changelog
        self.keep_snapshots = keep_snapshots
        self.committed = committed
        self.batch = batch
        self.restore_batch_size = restore_batch_size
        self.fsync = fsync
        self.stores: dict[str, StateStore] = {}
        self.logged: dict[str, ChangeLoggingKeyValueBytesStore] = {}
        self.changelogs: dict[str, StoreChangelog] = {}
        self.collector: RecordCollector | None = None
        self.context: StateStoreContext | None = None
        self.partition = 0
        self.standby = False
        self.checkpointed_state: TaskCommittedState | None = None
        self.task_dir: Path | None = None
        self.is_open = False
        self._commits = 0
        self._unsaved = False  # applied records the checkpoint does not name yet
        #: checkpoint a confirmed commit only once this many changelog records were applied
        #: since the last checkpoint (0: every commit); for stores kept open between commits
        self.checkpoint_records = 0
        #: a due checkpoint waits for ``checkpoint_if_due`` (called when the work unit that
        #: keeps the stores open has nothing else to do) instead of being written by the commit
        self.defer_checkpoints = False
        self._checkpointed_at = 0
        self._restorer: ChangelogRestorer | None = None
        self.input_offsets: dict[str, int] = {}

    @classmethod
    def for_task(
        cls, topology: Topology, subtopology_id: int, log_: Log | None = None, **options: Any
    ) -> TaskStores:
        """The stores of one sub-topology's task."""
        return cls(topology, topology.subtopology(subtopology_id).stores, log_, **options)

    # ---- open ----------------------------------------------------------------------------

    def open(
        self,
        context: StateStoreContext,
        collector: RecordCollector | None = None,
        partition: int | None = None,
        input_offsets: dict[str, int] | None = None,
    ) -> None:
        """Open every store for an active task and bring the logged ones to the committed
        changelog end; ``collector`` receives changelog records (none: not sent);
        ``input_offsets`` (``"topic:partition"`` -> next offset) are the task's committed
        input offsets, the committed end of source-table stores."""
        self.collector = collector
        self.input_offsets = dict(input_offsets or {})
        restorer = self._open(context, self.store_names, partition)
        if restorer is None:
            return
        started = time.perf_counter()
        restored = sum(restorer.replay(cl) for cl in self.changelogs.values())
        if self.changelogs:
            log.info(
                "task %s: %d store(s) at the committed changelog end after replaying %d "
                "record(s) in %.1f ms",
                context.task_id,
                len(self.changelogs),
                restored,
                (time.perf_counter() - started) * 1000,
            )
        if restored:
            self._commits += 1  # the previous batch's commit, applied here
        self.checkpoint()
        if restored:
            self._maybe_snapshot()

    def open_standby(
        self,
        context: StateStoreContext,
        partition: int,
        input_offsets: dict[str, int] | None = None,
    ) -> None:
        """Open the logged stores for a standby or warm-up task and check their local copies
        against the checkpoint; nothing is applied yet (the offset limits are the positions).
        ``input_offsets`` are the active task's committed input offsets: the committed end of
        source-table stores, which are left out without them."""
        self.standby = True
        self.input_offsets = dict(input_offsets or {})
        logged = [
            n
            for n in self.store_names
            if self.topology.store_builder(n).logging_enabled
            and (input_offsets is not None or self.topology.source_changelog_topic(n) is None)
        ]
        if self._open(context, logged, partition) is None:
            raise StoreError(f"standby {context.task_id} needs a log to read changelogs from")
        for cl in self.changelogs.values():
            cl.limit = cl.position
        self.checkpoint()

    def _open(
        self, context: StateStoreContext, names: list[str], partition: int | None
    ) -> ChangelogRestorer | None:
        self.context = context
        self.partition = partition_of(context.task_id) if partition is None else partition
        for name in names:
            store = self.topology.store_builder(name).build()
            store.init(context)
            self.stores[name] = store
        for name, store in self.logged.items():
            if name not in names:
                continue
            topic = self.changelog_topic(name)
            cl = StoreChangelog(name, store, topic, self.partition)
            if self.topology.source_changelog_topic(name) is not None:
                cl.source = True
                cl.committed_end = self.input_offsets.get(offset_key(topic, self.partition), 0)
            self.changelogs[name] = cl
        self.is_open = True
        if self.log is None:
            return None
        self.task_dir = Path(context.state_dir)
        restorer = self._restorer = ChangelogRestorer(
            self.log,
            context.application_id,
            context.task_id,
            context.metrics,
            snapshots=self.snapshots,
            batch_size=self.restore_batch_size,
        )
        checkpoint, problem = load_checkpoint(self.task_dir)
        if checkpoint is not None:
            self._commits = checkpoint.commits
            self.checkpointed_state = TaskCommittedState.from_dict(checkpoint.committed)
            if self.committed is None and checkpoint.committed:
                self.committed = self.checkpointed_state
            if self.batch < 0:
                self.batch = checkpoint.batch
        for cl in self.changelogs.values():
            if not self.standby and not cl.source:
                ensure_changelog_topic(self.log, self.topology, cl, context)
            restorer.initialize(cl, checkpoint, problem)
        return restorer

    def register(self, store: StateStore) -> None:
        """Called (through the context) by every store that opens; logged ones are tracked."""
        if isinstance(store, ChangeLoggingKeyValueBytesStore):
            self.logged[store.name] = store

    def get(self, name: str) -> StateStore:
        try:
            return self.stores[name]
        except KeyError:
            raise TopologyError(
                f"state store {name!r} does not belong to this task; "
                f"its stores: {sorted(self.stores) or 'none'}"
            ) from None

    def changelog_topic(self, store_name: str) -> str:
        application_id = self.context.application_id if self.context else "streamtide-app"
        return self.topology.changelog_topic(store_name, application_id)

    def set_input_offsets(self, input_offsets: dict[str, int]) -> None:
        """New committed input offsets of the task: the committed end of its stores whose
        changelog is a source topic (an open standby learns them each batch)."""
        self.input_offsets = dict(input_offsets)
        for cl in self.changelogs.values():
            if cl.source:
                key = offset_key(cl.topic, cl.partition)
                cl.committed_end = self.input_offsets.get(key, cl.committed_end)

    # ---- commit --------------------------------------------------------------------------

    def commit(self) -> None:
        """Send every logged store's buffered writes to its changelog (partition = task
        partition) and hold them until ``on_committed`` or ``abort``; flush the stores."""
        context = self.context
        timestamp = max(context.current_stream_time_ms(), 0) if context else 0
        for cl in self.changelogs.values():
            keys, values, headers = cl.store.take_changelog_columns()
            if cl.source:  # the input records are the changelog: nothing to send
                continue
            if keys and self.collector is not None:
                send_columns(
                    self.collector, cl.topic, self.partition, keys, values, headers, timestamp
                )
            cl.unconfirmed += len(keys)
        for store in self.stores.values():
            store.flush()

    def on_committed(
        self,
        committed: TaskCommittedState | None = None,
        batch: int | None = None,
        changelog_ends: dict[str, int] | None = None,
        *,
        sparse: bool = False,
    ) -> None:
        """This attempt's records are committed (sealed): apply them, record the task's
        committed metadata, and snapshot when due. Call ``abort`` instead when another
        attempt of the batch was committed.

        As a safety net, a store whose changelog end (read from the log unless given) is not
        its position plus the records it sent drops them and is brought to the committed end
        from the log instead. ``sparse``: the log's offsets have gaps (Kafka's transaction
        markers), so the end may lie past that sum; the ends given are where the task's own
        committed records end.
        """
        ends = changelog_ends or {}
        for cl in self.changelogs.values():
            if cl.source:
                cl.store.apply_sent()
                key = offset_key(cl.topic, cl.partition)
                if committed is not None and key in committed.offsets:
                    cl.position = cl.committed_end = committed.offsets[key]
                continue
            expected = cl.position + cl.unconfirmed
            if cl.name in ends:
                end = ends[cl.name]
            else:
                end = self._restorer.end(cl) if self._restorer is not None else expected
            if end == expected or (sparse and end >= expected):
                cl.store.apply_sent()
                cl.position = end
            else:
                restorer = self._require_restorer()
                log.warning(
                    "task %s: changelog %s ends at %d, not at %d as this task's %d record(s) "
                    "would make it; bringing store %r to the committed end from the log",
                    restorer.task_id,
                    cl.topic,
                    end,
                    expected,
                    cl.unconfirmed,
                    cl.name,
                )
                cl.store.discard_sent()
                restorer.replay(cl, end)
            cl.unconfirmed = 0
        if committed is not None:
            self.committed = committed
        if batch is not None:
            self.batch = batch
        self._commits += 1
        if not self.defer_checkpoints and self._checkpoint_due():
            self.checkpoint()
        else:
            self._unsaved = True  # written at the next due commit or at close
        self._maybe_snapshot()

    def checkpoint_if_due(self) -> bool:
        """Write a deferred checkpoint once it is due (``defer_checkpoints``); whether it did.
        The stores hold committed data only, so this may run while a run's writes are held
        (not yet settled): the checkpoint then names the last settled commit."""
        if self._unsaved and self._checkpoint_due():
            self.checkpoint()
            return True
        return False

    def _checkpoint_due(self) -> bool:
        """Whether a confirmed commit writes the checkpoint now: always, unless
        ``checkpoint_records`` lets stores that stay open skip it until that many changelog
        records were applied since the last one (a crash then replays those records again
        onto the store, which applying the changelog in order makes harmless)."""
        if self.checkpoint_records <= 0:
            return True
        applied = sum(cl.position for cl in self.changelogs.values())
        return applied - self._checkpointed_at >= self.checkpoint_records

    def abort(self) -> None:
        """Drop this attempt's writes and bring the stores to the committed changelog end
        (also right when another attempt of the batch was committed instead)."""
        for cl in self.changelogs.values():
            cl.store.discard_writes()
            cl.store.discard_sent()
            cl.unconfirmed = 0
            if self._restorer is not None:
                self._restorer.replay(cl)
        self.checkpoint()

    # ---- applying the changelog up to an offset limit (standby, warm-up, catch-up) --------

    def catch_up(self, deadline: float | None = None, at_least: int = 0) -> int:
        """Raise every limit to the committed changelog end and apply everything below it
        (stores holding sent records are left alone); returns how many records were applied.

        With a ``deadline`` (``time.perf_counter()``), each store applies at least
        ``at_least`` records, then more in steps of that size until the deadline: a replica
        built from scratch then takes several calls instead of holding up one."""
        restorer = self._require_restorer()
        applied = 0
        for cl in self.changelogs.values():
            if cl.unconfirmed:
                continue
            cl.limit = restorer.end(cl)
            applied += restorer.apply_below_limit(cl)
            if deadline is None or at_least < 1:
                applied += restorer.replay(cl, cl.limit)
                continue
            applied += restorer.replay(cl, min(cl.limit, cl.position + at_least))
            while cl.position < cl.limit and time.perf_counter() < deadline:
                applied += restorer.replay(cl, min(cl.limit, cl.position + at_least))
        if applied:
            self.checkpoint()
        self._report_lag()
        return applied

    def update(self, store: str, records: Iterable[LogRecord]) -> list[LogRecord]:
        """Apply ``records`` (changelog records of ``store`` in offset order) below the offset
        limit; keep and return the rest. Records the store already has are skipped."""
        cl = self._changelog(store)
        self._require_restorer().keep(cl, records)
        self._apply_below_limit(cl)
        return list(cl.pending)

    def set_offset_limit(self, limit: int, store: str | None = None) -> int:
        """Raise (or set) the offset limit of one store or all, applying the kept records now
        below it; returns how many were applied."""
        applied = 0
        for name in [store] if store is not None else list(self.changelogs):
            cl = self._changelog(name)
            cl.limit = limit
            applied += self._apply_below_limit(cl)
        return applied

    def poll(self, max_records: int | None = None) -> int:
        """Read the changelogs past what is applied or kept (up to their current end) and
        apply what lies below the limits; returns how many records were applied."""
        restorer = self._require_restorer()
        applied = 0
        for name, cl in self.changelogs.items():
            start = cl.pending[-1].offset + 1 if cl.pending else cl.position  # type: ignore[operator]
            end = restorer.end(cl)
            if start >= end:
                continue
            before = cl.position
            self.update(name, restorer.log.read(cl.topic, cl.partition, start, end, max_records))
            applied += cl.position - before
        self._report_lag()
        return applied

    # ---- reporting -----------------------------------------------------------------------

    @property
    def offset_limits(self) -> dict[str, int]:
        return {name: cl.limit for name, cl in self.changelogs.items()}

    def local_offsets(self) -> dict[str, int]:
        """Per logged store, the committed changelog offset its local copy is current to."""
        return {name: cl.position for name, cl in self.changelogs.items()}

    def offset_sum(self) -> int:
        return sum(cl.position for cl in self.changelogs.values() if cl.persistent)

    def lag(self) -> int:
        """Committed changelog end minus local offset, summed over the stores."""
        restorer = self._require_restorer()
        return sum(max(restorer.end(cl) - cl.position, 0) for cl in self.changelogs.values())

    # ---- checkpoint, snapshots, close ----------------------------------------------------

    def close(self) -> None:
        """Close the stores (held records are dropped; checkpointing what was applied)."""
        try:
            if self._unsaved:
                self.checkpoint()
        finally:
            self.is_open = False
            for store in self.stores.values():
                if store.is_open:
                    store.close()

    def checkpoint(self) -> None:
        """Record the persistent stores' local offsets and the committed metadata."""
        if self.task_dir is None:
            return
        offsets: dict[str, int] = {}
        for name, cl in self.changelogs.items():
            if not cl.persistent:
                continue
            sync = getattr(cl.local, "sync", None)
            if sync is not None and self.fsync:
                sync()
            offsets[name] = cl.position
        checkpoint = TaskCheckpoint(
            offsets=offsets,
            committed=self.committed.to_dict() if self.committed is not None else {},
            batch=self.batch,
            commits=self._commits,
        )
        write_checkpoint(self.task_dir, checkpoint, fsync=self.fsync)
        self._unsaved = False
        self._checkpointed_at = sum(cl.position for cl in self.changelogs.values())

    def _maybe_snapshot(self) -> None:
        if self.snapshot_interval <= 0 or self._commits % self.snapshot_interval:
            return
        restorer = self._require_restorer()
        for cl in self.changelogs.values():
            restorer.snapshot(cl, keep=self.keep_snapshots, truncate=self.truncate_changelog)

    # ---- internals -----------------------------------------------------------------------

    def _apply_below_limit(self, cl: StoreChangelog) -> int:
        applied = self._require_restorer().apply_below_limit(cl)
        if applied:
            self._unsaved = True
            self._report_lag()
        return applied

    def _report_lag(self) -> None:
        if self.standby and self._restorer is not None:
            set_gauge(self._restorer.metrics, STANDBY_LAG, self.lag())

    def _changelog(self, store: str) -> StoreChangelog:
        if not self.is_open:
            raise StoreError(f"the stores of task {self._task_id()} are not open")
        try:
            return self.changelogs[store]
        except KeyError:
            raise StoreError(f"task {self._task_id()} has no logged store {store!r}") from None

    def _task_id(self) -> str:
        return self.context.task_id if self.context is not None else "?"

    def _require_restorer(self) -> ChangelogRestorer:
        if self._restorer is None:
            raise StoreError("these stores are not open over a log")
        return self._restorer
