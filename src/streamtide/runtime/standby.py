"""``StandbyTask``: a replica of one task's logged stores on another executor (docs/assignment.md).

A standby applies changelog records whose offset is below its *offset limit* (the committed
end of the changelog) and keeps the records at or beyond it, applying them once a later commit
raises the limit. It opens its stores in the same directory an active task of the same id
would use, with the same checkpoint file, so when the task moves here the active task restores
only the lag. Like an active task it opens its stores at the start of a work unit and closes
them at the end (RocksDB allows one process per database). The engine should start updating
standbys on an executor only after its active tasks have finished restoring.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from streamtide.errors import StoreError
from streamtide.log.api import Log, LogRecord
from streamtide.processor.api import StateStore
from streamtide.processor.topology import Topology
from streamtide.runtime.durable_state import load_checkpoint
from streamtide.runtime.metrics import TaskMetrics
from streamtide.runtime.restore import (
    STANDBY_LAG,
    ChangelogRestorer,
    StoreChangelog,
    default_snapshot_store,
    set_gauge,
)
from streamtide.runtime.store_context import DelegatingStoreContext
from streamtide.runtime.stream_task import task_name
from streamtide.serde import Serde, Serdes
from streamtide.state.changelogging import ChangeLoggingKeyValueBytesStore
from streamtide.state.checkpoint import TaskCheckpoint, write_checkpoint
from streamtide.state.snapshots import SnapshotStore

log = logging.getLogger(__name__)


class StandbyTask:
    """Keeps the logged stores of one task close to the committed changelog end."""

    def __init__(
        self,
        topology: Topology,
        subtopology_id: int,
        partition: int,
        log_: Log,
        *,
        application_id: str = "streamtide-app",
        state_dir: Path | str = "./streamtide-state",
        default_key_serde: Serde | None = None,
        default_value_serde: Serde | None = None,
        snapshots: SnapshotStore | None = None,
        restore_batch_size: int = 10_000,
        fsync: bool = True,
    ) -> None:
        self.topology = topology
        self.subtopology = topology.subtopology(subtopology_id)
        self.partition = partition
        self.task_id = task_name(subtopology_id, partition)
        self.application_id = application_id
        self.log = log_
        self.state_dir = Path(state_dir) / application_id / self.task_id
        self.default_key_serde = default_key_serde or Serdes.bytes()
        self.default_value_serde = default_value_serde or Serdes.bytes()
        self.metrics = TaskMetrics()
        self.fsync = fsync
        self.changelogs: dict[str, StoreChangelog] = {}
        self.offset_limits: dict[str, int] = {}
        self._pending: dict[str, list[LogRecord]] = {}
        self._stores: list[StateStore] = []
        self._logged: dict[str, ChangeLoggingKeyValueBytesStore] = {}
        self._restorer = ChangelogRestorer(
            log_,
            application_id,
            self.task_id,
            self.metrics,
            snapshots=snapshots if snapshots is not None else default_snapshot_store(log_),
            batch_size=restore_batch_size,
        )
        self._open = False

    def register(self, store: StateStore) -> None:
        """Called (through the stores' context) by every store that opens."""
        if isinstance(store, ChangeLoggingKeyValueBytesStore):
            self._logged[store.name] = store

    # ---- lifecycle -----------------------------------------------------------------------

    def initialize(self) -> StandbyTask:
        """Open the logged stores and check their local copies against the checkpoint
        (rebuilding from a snapshot or the beginning where it cannot be trusted)."""
        if self._open:
            return self
        context = _StandbyContext(self)
        for name in self.subtopology.stores:
            builder = self.topology.store_builder(name)
            if not builder.logging_enabled:
                continue
            store = builder.build()
            store.init(context)  # type: ignore[arg-type]
            self._stores.append(store)
        checkpoint, problem = load_checkpoint(self.state_dir)
        for name, store in self._logged.items():
            topic = self.topology.changelog_topic(name, self.application_id)
            cl = StoreChangelog(name, store, topic, self.partition)
            self._restorer.initialize(cl, checkpoint, problem)
            self.changelogs[name] = cl
            self._pending[name] = []
            self.offset_limits[name] = cl.position
        self._open = True
        self.checkpoint()
        return self

    def close(self) -> None:
        """Checkpoint and close the stores; records kept above the limit are dropped (they
        are read again from the log next time)."""
        if not self._open:
            return
        try:
            self.checkpoint()
        finally:
            self._open = False
            for store in self._stores:
                if store.is_open:
                    store.close()
            self._stores.clear()
            self._pending.clear()

    # ---- updating ------------------------------------------------------------------------

    def update(self, store: str, records: Iterable[LogRecord]) -> list[LogRecord]:
        """Apply ``records`` (changelog records of ``store`` in offset order) below the offset
        limit; keep and return the rest. Records the store already has are skipped."""
        cl = self._changelog(store)
        pending = self._pending[store]
        expected = pending[-1].offset + 1 if pending else cl.position  # type: ignore[operator]
        fresh = [r for r in records if r.offset >= expected]  # type: ignore[operator]
        if fresh and fresh[0].offset != expected:
            raise StoreError(
                f"standby {self.task_id}: changelog records of store {store!r} skip from "
                f"offset {expected} to {fresh[0].offset}"
            )
        pending.extend(fresh)
        self._drain(cl)
        return list(self._pending[store])

    def set_offset_limit(self, limit: int, store: str | None = None) -> int:
        """Raise (or set) the offset limit of one store or all, applying the kept records now
        below it; returns how many were applied."""
        applied = 0
        for name in [store] if store is not None else list(self.changelogs):
            cl = self._changelog(name)
            self.offset_limits[name] = limit
            applied += self._drain(cl)
        return applied

    def refresh_offset_limits(self) -> int:
        """Set every store's limit to its changelog's committed end."""
        applied = 0
        for name, cl in self.changelogs.items():
            applied += self.set_offset_limit(self._restorer.end(cl), name)
        return applied

    def poll(self, max_records: int | None = None) -> int:
        """Read the changelogs past what is applied or kept (up to their current end) and
        apply what lies below the limits; returns how many records were applied."""
        applied = 0
        for name, cl in self.changelogs.items():
            pending = self._pending[name]
            start = pending[-1].offset + 1 if pending else cl.position  # type: ignore[operator]
            end = self._restorer.end(cl)
            if start >= end:
                continue
            before = cl.position
            self.update(name, self.log.read(cl.topic, cl.partition, start, end, max_records))
            applied += cl.position - before
        self._report_lag()
        return applied

    def catch_up(self) -> int:
        """Raise the limits to the committed ends and apply everything up to them."""
        applied = self.refresh_offset_limits()
        applied += self.poll()
        return applied

    # ---- reporting -----------------------------------------------------------------------

    def local_offsets(self) -> dict[str, int]:
        return {name: cl.position for name, cl in self.changelogs.items()}

    def offset_sum(self) -> int:
        return sum(cl.position for cl in self.changelogs.values() if cl.persistent)

    def lag(self) -> int:
        """Committed changelog end minus local offset, summed over the stores."""
        return sum(max(self._restorer.end(cl) - cl.position, 0) for cl in self.changelogs.values())

    def store(self, name: str) -> StateStore:
        for store in self._stores:
            if store.name == name:
                return store
        raise StoreError(f"standby {self.task_id} has no logged store {name!r}")

    def checkpoint(self) -> None:
        """Record the local offsets of the persistent stores in the task's checkpoint."""
        offsets: dict[str, int] = {}
        for name, cl in self.changelogs.items():
            if cl.persistent:
                sync = getattr(cl.local, "sync", None)
                if sync is not None and self.fsync:
                    sync()
                offsets[name] = cl.position
        write_checkpoint(self.state_dir, TaskCheckpoint(offsets=offsets), fsync=self.fsync)

    # ---- internals -----------------------------------------------------------------------

    def _changelog(self, store: str) -> StoreChangelog:
        if not self._open:
            raise StoreError(f"standby {self.task_id} is not open")
        try:
            return self.changelogs[store]
        except KeyError:
            raise StoreError(f"standby {self.task_id} has no logged store {store!r}") from None

    def _drain(self, cl: StoreChangelog) -> int:
        pending = self._pending[cl.name]
        limit = self.offset_limits[cl.name]
        cut = 0
        while cut < len(pending) and pending[cut].offset < limit:  # type: ignore[operator]
            cut += 1
        if not cut:
            return 0
        applied = self._restorer.apply_records(cl, pending[:cut])
        del pending[:cut]
        self._report_lag()
        return applied

    def _report_lag(self) -> None:
        set_gauge(self.metrics, STANDBY_LAG, self.lag())


class _StandbyContext(DelegatingStoreContext):
    """The StateStoreContext a standby gives its stores."""

    def __init__(self, task: StandbyTask) -> None:
        self._task = task

    @property
    def cache_enabled(self) -> bool:
        return False

    def current_stream_time_ms(self) -> int:
        return -1

    def register(self, store: StateStore) -> None:
        self._task.register(store)
