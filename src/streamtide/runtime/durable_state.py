"""``DurableTaskStateManager``: a task's stores backed by changelogs in the log.

At ``open`` every logged store is brought to the committed changelog end: from the offset in
the task's checkpoint file when it can be trusted, else from a wiped local copy plus the newest
snapshot (see ``runtime.restore``). At the task's commit (``flush``) the buffered writes are
sent to the changelog through the task's ``RecordCollector`` and held: ``on_committed()``
applies them once the changelog holds exactly them, ``abort()`` drops them, and closing the
task without either drops them too, the next ``open`` replaying what was committed. RocksDB
only ever holds committed data.

Every ``snapshot_interval`` confirmed commits, stores are snapshotted next to the log; the two
newest snapshots are kept, and the changelog is truncated only below the older of them.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from streamtide.log.api import Log
from streamtide.runtime.committed import TaskCommittedState
from streamtide.runtime.restore import (
    SNAPSHOTS_TAKEN,
    ChangelogRestorer,
    StoreChangelog,
    default_snapshot_store,
)
from streamtide.runtime.state_manager import TaskStateManager
from streamtide.state.checkpoint import (
    CheckpointError,
    TaskCheckpoint,
    read_checkpoint,
    write_checkpoint,
)
from streamtide.state.snapshots import SnapshotStore

if TYPE_CHECKING:
    from streamtide.processor.topology import Topology
    from streamtide.runtime.collector import RecordCollector
    from streamtide.runtime.context import TaskContext

log = logging.getLogger(__name__)


def load_checkpoint(task_dir: Path) -> tuple[TaskCheckpoint | None, str | None]:
    """The task's checkpoint, or ``(None, why it is unusable)``."""
    try:
        return read_checkpoint(task_dir), None
    except CheckpointError as exc:
        return None, str(exc)


class DurableTaskStateManager(TaskStateManager):
    """Checkpoints, restore, deferred commits and snapshots; see the module docstring."""

    def __init__(
        self,
        topology: Topology,
        store_names: list[str],
        log_: Log,
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
        super().__init__(topology, store_names)
        self.log = log_
        self.snapshots = snapshots if snapshots is not None else default_snapshot_store(log_)
        self.snapshot_interval = snapshot_interval
        self.truncate_changelog = truncate_changelog
        self.keep_snapshots = keep_snapshots
        self.committed = committed
        self.batch = batch
        self.restore_batch_size = restore_batch_size
        self.fsync = fsync
        self.changelogs: dict[str, StoreChangelog] = {}
        self.checkpointed_state: TaskCommittedState | None = None
        self.task_dir: Path | None = None
        self._commits = 0
        self._restorer: ChangelogRestorer | None = None

    @classmethod
    def for_task(
        cls, topology: Topology, subtopology_id: int, log_: Log, **options: object
    ) -> DurableTaskStateManager:
        """A manager for the stores of one sub-topology's task."""
        stores = topology.subtopology(subtopology_id).stores
        return cls(topology, stores, log_, **options)  # type: ignore[arg-type]

    # ---- open: restore -------------------------------------------------------------------

    def open(
        self,
        context: TaskContext,
        collector: RecordCollector | None = None,
        partition: int | None = None,
    ) -> None:
        super().open(context, collector, partition)
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
        started = time.perf_counter()
        restored = 0
        for name, store in self.logged.items():
            cl = StoreChangelog(name, store, self.changelog_topic(name), self.partition)
            self.changelogs[name] = cl
            self._ensure_topic(cl, context.task_id)
            restorer.initialize(cl, checkpoint, problem)
            restored += restorer.replay(cl)
        if self.logged:
            log.info(
                "task %s: %d store(s) at the committed changelog end after replaying %d "
                "record(s) in %.1f ms",
                context.task_id,
                len(self.logged),
                restored,
                (time.perf_counter() - started) * 1000,
            )
        if restored:
            self._commits += 1  # the previous batch's commit, applied here
        self._write_checkpoint()
        if restored:
            self._maybe_snapshot()

    # ---- commit --------------------------------------------------------------------------

    def flush(self) -> None:
        """Send the buffered writes to the changelogs and hold them until confirmed."""
        for name, count in self.send_changelogs().items():
            self.changelogs[name].unconfirmed += count
        for store in self.stores.values():
            store.flush()

    def on_committed(
        self,
        committed: TaskCommittedState | None = None,
        batch: int | None = None,
        changelog_ends: dict[str, int] | None = None,
    ) -> None:
        """This attempt's records are committed (sealed): apply them, record the
        task's committed metadata, and snapshot when due. Call ``abort`` instead when another
        attempt of the batch was committed.

        As a safety net, a store whose changelog end (read from the log unless given) is not
        its position plus the records it sent drops its held records and is brought to the
        committed end from the log instead.
        """
        restorer = self._require_restorer()
        for cl in self.changelogs.values():
            ends = changelog_ends or {}
            end = ends[cl.name] if cl.name in ends else restorer.end(cl)
            if end == cl.position + cl.unconfirmed:
                cl.store.apply_sent()
                cl.position = end
            else:
                log.warning(
                    "task %s: changelog %s ends at %d, not at %d as this task's %d record(s) "
                    "would make it; bringing store %r to the committed end from the log",
                    restorer.task_id,
                    cl.topic,
                    end,
                    cl.position + cl.unconfirmed,
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
        self._write_checkpoint()
        self._maybe_snapshot()

    def abort(self) -> None:
        """Drop this attempt's writes and bring the stores to the committed changelog end
        (also right when another attempt of the batch was committed instead)."""
        restorer = self._require_restorer()
        for cl in self.changelogs.values():
            cl.store.discard_writes()
            cl.store.discard_sent()
            cl.unconfirmed = 0
            restorer.replay(cl)
        self._write_checkpoint()

    def catch_up(self) -> int:
        """Replay what others committed to the changelogs since (stores holding no sent
        records only)."""
        restorer = self._require_restorer()
        applied = 0
        for cl in self.changelogs.values():
            if not cl.unconfirmed:
                applied += restorer.replay(cl)
        if applied:
            self._write_checkpoint()
        return applied

    # ---- reporting -----------------------------------------------------------------------

    def local_offsets(self) -> dict[str, int]:
        """Per logged store, the committed changelog offset its local copy is current to."""
        return {name: cl.position for name, cl in self.changelogs.items()}

    def offset_sum(self) -> int:
        return sum(cl.position for cl in self.changelogs.values() if cl.persistent)

    # ---- internals -----------------------------------------------------------------------

    def _ensure_topic(self, cl: StoreChangelog, task_id: str) -> None:
        """Create a missing changelog topic with one partition per task of the sub-topology
        (the partition count of its widest source topic)."""
        if self.log.has_topic(cl.topic):
            return
        sub = self.topology.subtopology(int(task_id.split("_")[0]))
        application_id = self.context.application_id if self.context else ""
        counts = [cl.partition + 1]
        for topic in sub.source_topics:
            physical = self.topology.resolve_topic(topic, application_id)
            if self.log.has_topic(physical):
                counts.append(self.log.partitions(physical))
        self.log.create_topic(cl.topic, max(counts), exist_ok=True)

    def _require_restorer(self) -> ChangelogRestorer:
        if self._restorer is None:
            raise RuntimeError("the state manager has not been opened")
        return self._restorer

    def _write_checkpoint(self) -> None:
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

    def _maybe_snapshot(self) -> None:
        interval, snapshots = self.snapshot_interval, self.snapshots
        if interval <= 0 or snapshots is None or self._commits % interval:
            return
        restorer = self._require_restorer()
        app, task = restorer.application_id, restorer.task_id
        for cl in self.changelogs.values():
            if cl.position == 0:
                continue
            existing = snapshots.offsets(app, task, cl.name)
            if existing and existing[-1] >= cl.position:
                continue
            started = time.perf_counter()
            snapshots.take(app, task, cl.local, cl.position)
            restorer.metrics.increment(SNAPSHOTS_TAKEN)
            log.info(
                "task %s: snapshot of store %r at changelog offset %d took %.1f ms",
                task,
                cl.name,
                cl.position,
                (time.perf_counter() - started) * 1000,
            )
            # Keep at least two snapshots and the changelog from the oldest kept one on, so a
            # damaged newest snapshot still leaves a way to rebuild the store.
            snapshots.prune(app, task, cl.name, keep=max(2, self.keep_snapshots))
            kept = snapshots.offsets(app, task, cl.name)
            if self.truncate_changelog and len(kept) >= 2 and self.log.has_topic(cl.topic):
                self.log.truncate_before(cl.topic, cl.partition, kept[0])
