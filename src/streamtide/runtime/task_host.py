"""``TaskHost``: the tasks one work-unit process runs, kept open between runs or not.

In micro-batch execution a work unit opens its tasks' stores, runs one stage of one batch and
closes them again (``run_work_unit``). In continuous execution one long-running work unit runs
many batches: its host keeps each active task (stores, processors, stream time) and each
standby open from one run to the next, so a batch costs neither a store open nor a replay of
the previous batch's changelog records.

Stores still hold only committed data (docs/engine.md, "Exactly-once"): a run leaves the
task's writes *held*; ``settle`` applies them when the driver sealed this attempt, and closes
the task otherwise (its next open replays what was committed). A run for a task whose last
attempt is unsettled, or whose committed state is not the one the held task reached, rebuilds
the task from the committed state first.

A task that changes role here (a standby promoted to active, an active task demoted to
standby) or is rebuilt from its commit closes its old copy and opens the new one within one
``rocksdb_handover.handover()`` block: the new copy takes the old one's open RocksDB databases
instead of reopening them, and starts from the checkpoint the old copy wrote, replaying only
what that lacks, exactly as after a reopen.

How a run's writes become committed is the log's (``runtime.run_commit``, one set of calls
for both logs): on Kafka the work unit commits its tasks' runs itself, all in one transaction
of the unit's producer (``begin_unit`` and ``write_outputs``), each task applies its writes
once Kafka confirmed the commit, and whether a task's run goes ahead is decided per task, by
what Kafka holds for it.
"""

from __future__ import annotations

import gc
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamtide.config import StreamsConfig
from streamtide.errors import StoreError
from streamtide.log.api import Log
from streamtide.log.source_marks import SourceMark
from streamtide.processor.topology import Topology
from streamtide.runtime.committed import TaskCommittedState
from streamtide.runtime.global_stores import GlobalStores
from streamtide.runtime.messages import StandbyReport
from streamtide.runtime.restore import RECORDS_RESTORED, STANDBY_LAG
from streamtide.runtime.run_commit import Run, TaskCommit, for_log
from streamtide.runtime.segment_collector import SegmentCollector
from streamtide.runtime.standby import StandbyTask
from streamtide.runtime.store_query import (
    StoreQuery,
    answer_on,
    committed_stream_time,
    query_kind,
)
from streamtide.runtime.stream_task import StreamTask, task_options
from streamtide.runtime.task_lifecycle import CloseReason, Lifecycle, PendingRun, TaskState
from streamtide.state.rocksdb_handover import handover
from streamtide.task_id import TaskId

log = logging.getLogger(__name__)

#: A task kept open checkpoints its stores after this many applied changelog records (and
#: when it closes) instead of at every commit, as Kafka Streams does under exactly-once; not
#: within a run or a settle, but once its work unit has replied (``checkpoint_due``): a
#: checkpoint syncs the stores' write-ahead logs and writes a file, fsyncs that would hold up
#: the batch.
KEPT_CHECKPOINT_RECORDS = 10_000


@dataclass
class _Held:
    """An open active task and what the host knows of its commit state."""

    task: StreamTask
    collector: SegmentCollector
    state: dict[str, Any]  # the committed state the task is at (when nothing is pending)
    commit: TaskCommit  # decides and prepares its runs (``runtime.run_commit``)
    lifecycle: Lifecycle
    pending: PendingRun | None = None  # its run whose writes wait for their commit

    def at(self, state: dict[str, Any]) -> bool:
        """Whether the task is at committed ``state`` (and nothing of it is pending)."""
        return self.lifecycle.state is TaskState.COMMITTED and self.state == state

    def committed(self) -> None:
        """Its pending run committed: the task is at the state the run reached."""
        assert self.pending is not None
        self.lifecycle.to(TaskState.COMMITTED)
        self.state, self.pending = self.pending.state, None


class TaskHost:
    """Runs work units for one executor slot; ``keep_open`` keeps tasks between runs."""

    def __init__(
        self,
        topology: Topology,
        config: StreamsConfig,
        log_: Log,
        stores_factory: Any,
        state_dir: Path,
        *,
        keep_open: bool = False,
        global_stores: GlobalStores | None = None,
    ) -> None:
        self.topology = topology
        self.config = config
        self.log = log_
        self.stores_factory = stores_factory
        self.state_dir = state_dir
        self.keep_open = keep_open
        self.global_stores = global_stores
        self._active: dict[str, _Held] = {}
        self._standby: dict[str, StandbyTask] = {}
        #: how the runs of the work units run here are committed (``runtime.run_commit``)
        self._commit = for_log(log_, topology, config)
        #: the runs of the running unit not written yet (``write_outputs``)
        self._runs: list[tuple[str, _Held, Run]] = []
        #: active tasks with stores opened so far (a run that opened one restored: work_unit)
        self.opened = 0

    @property
    def held(self) -> set[str]:
        """Ids of the tasks (active and standby) open here."""
        return set(self._active) | set(self._standby)

    def update_global_stores(self, ends: dict[str, list[int]]) -> None:
        """Bring the global tables to ``ends`` (the batch's recorded end offsets) before any
        task runs; the first call reads them from the beginning."""
        if self.global_stores is None:
            self.global_stores = new_global_stores(self.topology, self.config)
        self.global_stores.update(self.log, ends)

    # ---- active tasks --------------------------------------------------------------------

    def run_active(
        self,
        task_id: str,
        ranges: dict[str, list[int]],
        state: dict[str, Any],
        writer: str,
        batch: int,
    ) -> dict[str, Any]:
        """Process ``ranges`` from committed ``state``; write outputs as unsealed segments of
        ``writer``; return the task's report."""
        started = time.perf_counter()
        phases = _Phases()
        with handover():  # a copy closed here hands its open databases to the one opened
            if task_id in self._standby:  # promoted here: its standby copy holds the stores
                self._close_standby(task_id)
            held = self._active.get(task_id)
            if held is not None and not held.at(state):
                self._close_active(task_id, CloseReason.MOVED_ON)
                held = None
            before: dict[str, int] = {}  # a task opened now counts its restore in this run
            if held is None:
                held = self._open_active(task_id, state, batch)
            else:
                before = held.task.metrics.as_dict()
        phases.mark("restore")
        commit = held.commit
        decision = commit.decide(state, ranges, self._commit.committed)
        if decision.done:  # an earlier attempt committed this run; its report was lost
            self._close_active(task_id, CloseReason.ALREADY_COMMITTED)
            return _already_committed(task_id, writer, decision.state, started)
        ranges = decision.ranges  # from the log's committed offsets on
        if decision.state != TaskCommittedState.from_dict(state):  # start from the log's
            state = decision.state.to_dict()
            with handover():
                self._close_active(task_id, CloseReason.LOG_AHEAD)
                held = self._open_active(task_id, state, batch, commit)
            before = {}
        task = held.task
        held.lifecycle.to(TaskState.RUNNING)
        paused = _pause_cyclic_collector()
        try:
            read = 0
            partition = task.partition
            # the last record read from each partition (Kafka: committed with it)
            marks: dict[str, SourceMark] = {}
            for topic, (start, end) in ranges.items():
                if end > start:
                    table = self.log.read_table(topic, partition, start, end)
                    table = commit.read(topic, partition, table, marks)
                    read += task.add_table(topic, table)
            phases.mark("read")
            task.process()
            task.punctuate_wall_clock()
            phases.mark("process")
            task.commit()
            phases.mark("commit")
            for topic, (_start, end) in ranges.items():
                task.mark_consumed(topic, end)
            committed = task.committed_state().to_dict()
            output_counts = held.collector.counts()
            stores = task.stores
            changelogs = {cl.topic for cl in stores.changelogs.values()} if stores else set()
            # written or committed with the unit's other runs (``write_outputs``)
            run = commit.prepare(held.collector, committed, marks, writer, changelogs)
            self._runs.append((task_id, held, run))
            held.pending = PendingRun(writer, committed)
            held.lifecycle.to(TaskState.PENDING)
            phases.mark("write")
            local_offsets = task.stores.local_offsets() if task.stores.log is not None else {}
        except BaseException:
            self._close_active(task_id, CloseReason.FAILED)
            raise
        finally:
            if paused:
                gc.enable()
        metrics = _delta(before, task.metrics.as_dict())
        if not self.keep_open and not run.applies_on_commit:  # else once its unit committed
            self._close_active(task_id, CloseReason.DONE)
            phases.mark("close")
        return {
            "task": task_id,
            "writer": writer,
            "state": committed,
            "segments": run.segments,  # filled by ``write_outputs`` (file log)
            "input_records": read,
            "output_records": output_counts,
            "restored_records": metrics.get(RECORDS_RESTORED, 0),
            "metrics": metrics,
            "local_offsets": local_offsets,
            "phases_ms": phases.spent,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        }

    def begin_unit(self, transactional_id: str | None, task_ids: Iterable[str]) -> None:
        """Before a work unit runs ``task_ids``: drop what an abandoned unit left, and let the
        log's commit prepare (Kafka: get the producer of the unit's ``transactional_id``,
        which fences its earlier producers before any task restores, and read what Kafka
        holds for the tasks, in one request)."""
        self.discard_runs()
        self._commit.begin(transactional_id, task_ids)

    def write_outputs(self, writer_id: str) -> float:
        """Write what the runs since the last call produced (file log: two shared files for
        all of them, named by ``writer_id``; Kafka: the unit's transaction) into their
        reports; returns the milliseconds. A run that applies its writes on its unit's
        commit applies them then, at the offsets the log gave its changelog records (stores
        hold committed data only); if the write fails, every task of it is closed (its next
        run reopens it from what was committed)."""
        runs, self._runs = self._runs, []
        if not runs:
            return 0.0
        started = time.perf_counter()
        try:
            written = self._commit.write([run for _, _, run in runs], writer_id)
        except BaseException:
            for task_id, _, _ in runs:
                self._close_active(task_id, CloseReason.FAILED)
            raise
        for task_id, held, run in runs:
            if run.applies_on_commit:
                self._apply_committed(held, written)
                if not self.keep_open:
                    self._close_active(task_id, CloseReason.DONE)
        return (time.perf_counter() - started) * 1000

    def discard_runs(self) -> None:
        """Drop the runs a failed work unit did not write (their tasks are closed)."""
        runs, self._runs = self._runs, []
        for task_id, _, _ in runs:
            self._close_active(task_id, CloseReason.FAILED)
        self._commit.failed()

    def settle(self, winners: dict[str, str]) -> None:
        """The driver's decision for held runs: ``{task: winning writer id}``. A run that won
        reaches the stores; a run that lost (or a task the decision names another writer for)
        is dropped by closing the task."""
        for task_id, writer in winners.items():
            held = self._active.get(task_id)
            if held is None or held.pending is None:
                continue
            if held.pending.writer != writer:
                self._close_active(task_id, CloseReason.LOST)
                continue
            stores = held.task.stores
            if stores.log is not None:
                paused = _pause_cyclic_collector()  # a batch's writes: as many objects again
                try:
                    stores.on_committed(TaskCommittedState.from_dict(held.pending.state))
                finally:
                    if paused:
                        gc.enable()
            held.committed()

    def checkpoint_due(self) -> int:
        """Write the due checkpoints of the active tasks kept open (their stores defer them:
        ``KEPT_CHECKPOINT_RECORDS``); a long-running work unit calls this after it replied to
        a run, while the driver seals. Returns how many it wrote."""
        written = 0
        for held in self._active.values():
            stores = held.task.stores
            if stores is not None and held.lifecycle.state is not TaskState.RUNNING:
                written += stores.checkpoint_if_due()
        return written

    def _apply_committed(self, held: _Held, written: dict[tuple[str, int], int]) -> None:
        """A task's run committed in its unit's transaction: apply its writes to the stores at
        the offsets Kafka gave its changelog records (``written``)."""
        assert held.pending is not None
        state = TaskCommittedState.from_dict(held.pending.state)
        stores = held.task.stores
        if stores is not None and stores.log is not None:
            ends = {
                name: written[(cl.topic, cl.partition)] + 1
                if (cl.topic, cl.partition) in written
                else cl.position
                for name, cl in stores.changelogs.items()
            }
            stores.on_committed(state, changelog_ends=ends, sparse=True)
        held.committed()

    def _open_active(
        self,
        task_id: str,
        state: dict[str, Any],
        batch: int,
        commit: TaskCommit | None = None,
    ) -> _Held:
        """Open an active task at committed ``state`` (``commit``: the task's commit to keep,
        when it reopens; a new one otherwise)."""
        parsed = TaskId.parse(task_id)
        subtopology, partition = parsed.subtopology, parsed.partition
        collector = SegmentCollector(self.log)
        sub = self.topology.subtopology(subtopology)
        if commit is None:
            commit = self._commit.task(task_id)
        stores = None
        if self.stores_factory is not None and sub.stores:
            stores = self.stores_factory(
                topology=self.topology,
                config=self.config,
                log=self.log,
                store_names=list(sub.stores),
                batch=batch,
            )
        task = StreamTask(
            self.topology,
            subtopology,
            partition,
            collector,
            state_dir=self.state_dir,
            committed=TaskCommittedState.from_dict(state),
            stores=stores,
            global_stores=self.global_stores,
            **task_options(self.config),
        )
        if self.keep_open and stores is not None:
            stores.checkpoint_records = KEPT_CHECKPOINT_RECORDS
            stores.defer_checkpoints = True
        held = _Held(task, collector, state, commit, Lifecycle(task_id))
        self._active[task_id] = held
        if stores is not None:
            self.opened += 1
        try:
            task.initialize()
        except BaseException:
            self._close_active(task_id, CloseReason.FAILED)
            raise
        return held

    def _close_active(self, task_id: str, why: CloseReason) -> None:
        held = self._active.pop(task_id, None)
        if held is None:
            return
        held.lifecycle.close(why)
        held.task.close()

    # ---- standby tasks -------------------------------------------------------------------

    def update_standby(
        self,
        task_id: str,
        input_offsets: dict[str, int] | None = None,
        deadline: float | None = None,
        at_least: int = 0,
    ) -> dict[str, Any]:
        """Bring a standby (or warm-up) task's stores to the committed changelog end, or as
        close as ``deadline`` allows (at least ``at_least`` records per store);
        ``input_offsets`` are the active task's committed input offsets (how far stores whose
        changelog is a source topic may go)."""
        with handover():  # a demoted active copy hands its open databases to the standby
            if task_id in self._active:  # demoted here: its active copy holds the stores
                self._close_active(task_id, CloseReason.DEMOTED)
            standby = self._standby.get(task_id)
            if standby is None:
                standby = self._standby[task_id] = self._new_standby(task_id, input_offsets)
            elif input_offsets is not None:
                standby.set_input_offsets(input_offsets)
            before = standby.metrics.get(RECORDS_RESTORED)
            try:
                standby.initialize()
            except BaseException:
                self._close_standby(task_id)
                raise
        try:
            applied = standby.catch_up(deadline, at_least)
            report = StandbyReport(
                local_offsets=standby.local_offsets(),
                offset_sum=standby.offset_sum(),
                applied=applied,
                lag=standby.metrics.get(STANDBY_LAG),
                restored_records=standby.metrics.get(RECORDS_RESTORED) - before,
            ).as_dict()
        except BaseException:
            self._close_standby(task_id)
            raise
        if not self.keep_open:
            self._close_standby(task_id)
        return report

    def _new_standby(self, task_id: str, input_offsets: dict[str, int] | None) -> StandbyTask:
        """An unopened standby copy of ``task_id``'s logged stores, in the directory its
        active task uses."""
        parsed = TaskId.parse(task_id)
        subtopology, partition = parsed.subtopology, parsed.partition
        stores = self.stores_factory(
            topology=self.topology,
            config=self.config,
            log=self.log,
            store_names=list(self.topology.subtopology(subtopology).stores),
        )
        return StandbyTask(
            self.topology,
            subtopology,
            partition,
            self.log,
            application_id=self.config.application_id,
            state_dir=self.state_dir,
            default_key_serde=self.config.default_key_serde,
            default_value_serde=self.config.default_value_serde,
            stores=stores,
            input_offsets=input_offsets,
        )

    def _close_standby(self, task_id: str) -> None:
        standby = self._standby.pop(task_id, None)
        if standby is not None:
            standby.close()

    # ---- queries -------------------------------------------------------------------------

    def query(self, query: StoreQuery) -> dict[str, Any]:
        """Answer ``query`` for each task it names (``{task: answer}``) from the committed
        state the driver gives for it. An active task held here at exactly that state answers
        from its open stores (their local stores hold committed data only); any other task is
        opened as a standby would be (brought to the committed changelog end), read and closed,
        in the directory its active task uses."""
        if self.stores_factory is None:
            raise StoreError("this application keeps no durable stores to query")
        kind = query_kind(self.topology, query.store)
        answers: dict[str, Any] = {}
        for task_id, state in query.tasks.items():
            stream_time = committed_stream_time(state)
            held = self._active.get(task_id)
            if held is not None and not held.at(state):
                self._close_active(task_id, CloseReason.QUERY_BEHIND)
                held = None
            if held is not None:
                store = held.task.stores.get(query.store)
                answers[task_id] = answer_on(store, kind, query, stream_time)
                continue
            self._close_standby(task_id)  # one process per store: this copy is reopened below
            offsets = TaskCommittedState.from_dict(state).offsets
            standby = self._new_standby(task_id, offsets)
            try:
                standby.initialize()
                standby.catch_up()
                answers[task_id] = answer_on(standby.store(query.store), kind, query, stream_time)
            finally:
                standby.close()
        return answers

    # ---- the set of tasks held -----------------------------------------------------------

    def release(self, keep: Iterable[str]) -> list[str]:
        """Close every task not in ``keep`` (tasks that moved away); returns their ids."""
        wanted = set(keep)
        gone = sorted(self.held - wanted)
        for task_id in gone:
            self._close_active(task_id, CloseReason.RELEASED)
            self._close_standby(task_id)
        return gone

    def close(self) -> None:
        """Close every task (held writes not settled are dropped)."""
        self.release(())
        self._runs.clear()
        self._commit.close()


def _already_committed(
    task_id: str, writer: str, state: TaskCommittedState, started: float
) -> dict[str, Any]:
    """The report of a run an earlier attempt committed: its state, nothing new written."""
    return {
        "task": task_id,
        "writer": writer,
        "state": state.to_dict(),
        "segments": [],
        "input_records": 0,
        "output_records": {},
        "restored_records": 0,
        "metrics": {},
        "local_offsets": {},
        "already_committed": True,
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
    }


def _pause_cyclic_collector() -> bool:
    """Pause Python's cyclic garbage collector for one run; True if it was running.

    A run holds every record of its batch, their decoded values and its outputs at once:
    hundreds of thousands of objects, which the collector would walk again and again as
    the batch allocates (it halved dedup's throughput at 100,000-record batches). The batch's
    garbage is freed by reference counting as usual; objects in cycles wait for the
    collector's next pass after the run."""
    if not gc.isenabled():
        return False
    gc.disable()
    return True


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Counters gained during one run (a kept task's counters accumulate over runs)."""
    return {name: value - before.get(name, 0) for name, value in after.items()}


class _Phases:
    """Wall time spent in each phase of a task's run, for the report."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._last = time.perf_counter()

    def mark(self, phase: str) -> None:
        now = time.perf_counter()
        self.spent[phase] = round((now - self._last) * 1000, 3)
        self._last = now


def new_global_stores(topology: Topology, config: StreamsConfig) -> GlobalStores:
    """An empty copy of the topology's global tables (filled by ``GlobalStores.update``)."""
    return GlobalStores(
        topology,
        config.application_id,
        config.default_key_serde,
        config.default_value_serde,
    )


def new_attempt() -> str:
    """A token naming one attempt of a work unit (part of its writer ids)."""
    return uuid.uuid4().hex[:12]
