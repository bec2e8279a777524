"""``StandbyTask``: a replica of one task's logged stores on another executor (docs/assignment.md).

A standby (or warm-up) task is a ``TaskStores`` opened with a standby context: it applies
changelog records whose offset is below its *offset limit* (the committed end of the
changelog) and keeps the records at or beyond it, applying them once a later commit raises the
limit. It opens its stores in the same directory an active task of the same id would use, with
the same checkpoint file, so when the task moves here the active task restores only the lag.
Like an active task it opens its stores at the start of a work unit and closes them at the end
(RocksDB allows one process per database); a long-running work unit keeps it open between
runs and, when the task is promoted there, hands its open databases to the active task
(``TaskHost``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from streamtide.log.api import Log, LogRecord
from streamtide.processor.api import StateStore
from streamtide.processor.topology import Topology
from streamtide.runtime.metrics import TaskMetrics
from streamtide.runtime.store_context import DelegatingStoreContext
from streamtide.runtime.stream_task import task_name
from streamtide.runtime.task_stores import TaskStores
from streamtide.serde import Serde, Serdes
from streamtide.state.snapshots import SnapshotStore


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
        default_key_serde: Serde[Any] | None = None,
        default_value_serde: Serde[Any] | None = None,
        snapshots: SnapshotStore | None = None,
        restore_batch_size: int = 10_000,
        fsync: bool = True,
        stores: TaskStores | None = None,
        input_offsets: dict[str, int] | None = None,
    ) -> None:
        self.partition = partition
        #: the active task's committed input offsets (how far source-table stores may go)
        self.input_offsets = input_offsets
        self.task_id = task_name(subtopology_id, partition)
        self.application_id = application_id
        self.state_dir = Path(state_dir) / application_id / self.task_id
        self.default_key_serde = default_key_serde or Serdes.bytes()
        self.default_value_serde = default_value_serde or Serdes.bytes()
        self.metrics = TaskMetrics()
        self.stores = stores or TaskStores.for_task(
            topology,
            subtopology_id,
            log_,
            snapshots=snapshots,
            restore_batch_size=restore_batch_size,
            fsync=fsync,
        )

    def initialize(self) -> StandbyTask:
        """Open the logged stores and check their local copies against the checkpoint
        (rebuilding from a snapshot or the beginning where it cannot be trusted)."""
        if not self.stores.is_open:
            self.stores.open_standby(_StandbyContext(self), self.partition, self.input_offsets)
        return self

    def set_input_offsets(self, input_offsets: dict[str, int]) -> None:
        """The active task's newer committed input offsets (for an open standby)."""
        self.input_offsets = input_offsets
        self.stores.set_input_offsets(input_offsets)

    def close(self) -> None:
        """Checkpoint and close the stores; records kept above the limit are dropped (they
        are read again from the log next time)."""
        self.stores.close()

    # ---- the TaskStores operations a standby offers --------------------------------------

    @property
    def offset_limits(self) -> dict[str, int]:
        return self.stores.offset_limits

    def update(self, store: str, records: Iterable[LogRecord]) -> list[LogRecord]:
        return self.stores.update(store, records)

    def set_offset_limit(self, limit: int, store: str | None = None) -> int:
        return self.stores.set_offset_limit(limit, store)

    def poll(self, max_records: int | None = None) -> int:
        return self.stores.poll(max_records)

    def catch_up(self, deadline: float | None = None, at_least: int = 0) -> int:
        """Apply the committed changelog (bounded by ``deadline``: ``TaskStores.catch_up``)."""
        return self.stores.catch_up(deadline, at_least)

    def local_offsets(self) -> dict[str, int]:
        return self.stores.local_offsets()

    def offset_sum(self) -> int:
        return self.stores.offset_sum()

    def lag(self) -> int:
        return self.stores.lag()

    def store(self, name: str) -> StateStore:
        return self.stores.get(name)


class _StandbyContext(DelegatingStoreContext):
    """The StateStoreContext a standby gives its stores."""

    def __init__(self, task: StandbyTask) -> None:
        self._task = task
        self._standby = task

    @property
    def cache_enabled(self) -> bool:
        return False

    def current_stream_time_ms(self) -> int:
        return -1

    def register(self, store: StateStore) -> None:
        self._standby.stores.register(store)
