"""``StreamsApp``: runs a topology on Spark as a sequence of exactly-once batches, on
long-running work units (continuous execution) or as a Spark job each (micro-batch)."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from typing import Any

from streamtide.assignment import Assignment, AssignmentInfo, SubscriptionInfo, assign
from streamtide.config import StreamsConfig, check_master
from streamtide.engine.app_dir import AppDirectory, app_dir_for
from streamtide.engine.assignment_history import Placement, TaskRestore, changes
from streamtide.engine.batch_size import BatchSizeController
from streamtide.engine.committer import BatchCommitter
from streamtide.engine.continuous import ContinuousWorkers, SlotKey, WorkerLostError
from streamtide.engine.cyclic_gc import cyclic_gc_paused
from streamtide.engine.failures import RemoteTraceback, rebuild
from streamtide.engine.global_offsets import global_ends
from streamtide.engine.interop import (
    ExecutorInfo,
    PinnedExecutorLostError,
    build_session,
    list_executors,
    run_pinned_watched,
    spark_context,
)
from streamtide.engine.kafka_committer import KafkaBatchCommitter
from streamtide.engine.launcher import SparkLauncher, WorkUnitLauncher
from streamtide.engine.metrics import AppMetrics, MetricsServer
from streamtide.engine.placement import (
    Assignor,
    ClientReport,
    compute_assignment,
    record_stage_reports,
    reports_from,
    slot_units,
    standby_shortfall,
    subscriptions,
)
from streamtide.engine.plan import Stage, make_plan
from streamtide.engine.progress import BatchProgress, RunningBatch
from streamtide.engine.protocol import (
    CommitRecord,
    OffsetsRecord,
    PrepareRecord,
    Ranges,
    resume_batch,
)
from streamtide.engine.queryable import (
    ReadOnlyKeyValueStore,
    ReadOnlySessionStore,
    ReadOnlyVersionedKeyValueStore,
    ReadOnlyWindowStore,
    ask_pinned_jobs,
    ask_work_units,
    store_route,
    store_view,
)
from streamtide.engine.ranges import aligned_ends
from streamtide.engine.shipping import ship_user_modules
from streamtide.engine.slots import TaskSlotsHeldError
from streamtide.engine.sources import SourcePosition, input_start
from streamtide.engine.status import read_status
from streamtide.engine.topology_names import check_resource_names
from streamtide.engine.unit_ids import UnitKey
from streamtide.engine.worker import make_work
from streamtide.errors import ConfigError, FencedError, InvalidStateStoreError, StreamtideError
from streamtide.log import open_log
from streamtide.log.errors import LogError
from streamtide.processor.punctuation import is_wall_clock_schedule
from streamtide.processor.topology import Topology
from streamtide.runtime.committed import TaskCommittedState, offset_key
from streamtide.runtime.kafka_task_commit import source_partitions
from streamtide.runtime.restore import RESTORE_DURATION_MS
from streamtide.runtime.store_query import QueryOp, StoreQuery
from streamtide.runtime.work_unit import ActiveSpec, WorkUnitSpec

log = logging.getLogger("streamtide.engine")

MAX_STAGE_ATTEMPTS = 3
#: How long a retry after a lost work unit waits for Spark to drop a dead executor.
EXECUTOR_LOSS_WAIT_S = 2.0


class StreamsApp:
    """A running Streamtide application; see docs/engine.md, "One batch"."""

    def __init__(
        self,
        topology: Topology,
        config: StreamsConfig | None = None,
        spark: Any = None,
        *,
        master: str = "local[2]",
        assignor: Assignor = assign,
        stores_factory: Any = "durable",
        launcher: WorkUnitLauncher | None = None,
    ) -> None:
        self.topology = topology
        self.config = config or StreamsConfig()
        self._spark = spark
        self._master = check_master(master)
        self._owns_spark = spark is None
        self.assignor = assignor
        if stores_factory == "durable":
            from streamtide.runtime.state_factory import make_task_stores

            stores_factory = make_task_stores
        self.stores_factory = stores_factory
        #: Where work units run (``engine.launcher``): Spark's executors unless given; another
        #: launcher runs continuous execution only.
        self._launcher = launcher
        self.sc: Any = None
        self.log = open_log(self.config.log, **self.config.log_options)
        self.app_dir = AppDirectory(app_dir_for(self.config), self.config.application_id)
        #: On Kafka each task commits in its own transaction (engine.kafka_committer).
        self.kafka = self.log.transactional
        committer = KafkaBatchCommitter if self.kafka else BatchCommitter
        self.committer = committer(self.app_dir, self.log, self.config.application_id)
        self._topic_ids: dict[str, str] = {}
        self._global_ends: dict[str, list[int]] = {}  # this batch's (engine.global_offsets)
        self.stages: list[Stage] = []
        self.history: deque[BatchProgress] = deque(maxlen=100)
        #: The batch being run, if any (read by progress displays from other threads).
        self.running: RunningBatch | None = None
        self._task_states: dict[str, TaskCommittedState] = {}
        self._reports: dict[str, ClientReport] = {}
        self._next_batch = 0
        self._batch_size = BatchSizeController(
            self.config.max_records_per_batch,
            self.config.adaptive_batch_size_limit,
            self.config.commit_interval,
            enabled=self.config.adaptive_batch_size,
        )
        self._batch_full = False
        self._started = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._batch_lock = threading.Lock()  # one batch loop per application, ever
        self._batch_done = threading.Condition()
        self._completed = 0
        self._error: BaseException | None = None
        self._executors: list[ExecutorInfo] = []
        self._assignment: Assignment | None = None
        self._blob: bytes | None = None
        self._metrics = AppMetrics()
        self._metrics_server: MetricsServer | None = None
        #: Continuous execution: the long-running work units, which slot holds which tasks,
        #: and which slot last ran each task (to tell it the outcome).
        self._workers: ContinuousWorkers | None = None
        self._pinned_wait_s = 0.0  # micro-batch: time spent in the work units' Spark jobs
        self._retried: set[int] = set()  # stages of this batch that ran more than once
        self._layout: dict[SlotKey, set[str]] = {}
        self._ran_in: dict[str, SlotKey] = {}
        #: the executor each task last committed on (where micro-batch queries read it)
        self._owners: dict[str, str] = {}
        self._stopped = False
        #: The assignment history (engine.assignment_history): the last batch's placement,
        #: the changelog lags the last assignment saw, executors being removed by ``scale``
        #: (no longer assigned anything) and those removed so far.
        self._placement = Placement()
        self._assign_lags: dict[tuple[str, str], int] = {}
        self._changelog_ends: dict[tuple[str, int], int] = {}  # this batch's
        self._draining: set[str] = set()
        self._removed: set[str] = set()
        self._standby_note: str | None = None  # said once, again when it changes
        #: pattern sources: their topics are matched again before every batch
        self._patterns = list(topology.pattern_sources)

    # ---- lifecycle -----------------------------------------------------------------------

    @property
    def spark(self) -> Any:
        if self._spark is None:
            from pyspark.sql import SparkSession

            active = SparkSession.getActiveSession()
            if active is not None:  # someone else's session: use it, never stop it
                self._owns_spark = False
                self._spark = active
            else:
                self._spark = build_session(
                    self._master,
                    f"streamtide-{self.config.application_id}",
                    **{"spark.locality.wait": f"{self.config.locality_wait}ms"},
                )
        return self._spark

    def _ensure_started(self) -> None:
        if self._started:
            return
        if self._launcher is None:
            self.sc = spark_context(self.spark)
            self._launcher = SparkLauncher(self.sc)
        elif self.sc is None and self.config.execution != "continuous":
            raise ConfigError("a work-unit launcher other than Spark runs continuous execution")
        self._plan()
        last = self.committer.start()  # takes an epoch: any older driver is fenced now
        if isinstance(self.committer, KafkaBatchCommitter):
            self.committer.fence_work_units(t for stage in self.stages for t in stage.task_ids)
        check_resource_names(self.app_dir, self.topology, self.config)
        self._next_batch = resume_batch(last)
        self._task_states = self.committer.resume_states(last, self._task_sources)
        if last is not None:
            batch = last.batch
            self._topic_ids = dict(last.topic_ids)
            stored = self.app_dir.read_assignment(batch)
            if stored is not None:
                subs = {c: SubscriptionInfo.decode(b) for c, b in stored["subscriptions"].items()}
                self._reports = reports_from(subs)
            else:  # no records (an older application directory): owners only
                for task, owner in last.owners.items():
                    self._reports.setdefault(owner, ClientReport()).running.add(task)
            self._metrics.remember_owners(last.owners)
            self._owners = dict(last.owners)
            self._placement = _stored_placement(last.owners, stored)
            log.info("resuming %s after committed batch %d", self.config.application_id, batch)
        if self.config.execution == "continuous" and self._workers is None:
            self._launch_workers()
        if self.config.metrics_port is not None and self._metrics_server is None:
            self._metrics_server = MetricsServer(
                self._metrics.registry, self.config.metrics_port, self.config.metrics_bind_address
            )
        self._started = True
        self._stopped = False

    def _plan(self) -> None:
        """The stages, their tasks' metrics and the topology shipped to work units."""
        self.stages = make_plan(self.topology, self.config, self.log)
        self._metrics.declare(
            (t for stage in self.stages for t in stage.task_ids),
            (store for stage in self.stages for store in stage.changelog_topics),
            self._stateful_tasks() if self.config.num_standby_replicas else (),
        )
        from pyspark import cloudpickle

        ship_user_modules(self.topology)
        self._blob = cloudpickle.dumps((self.topology, self.config, self.stores_factory))

    def _launch_workers(self) -> None:
        assert self._launcher is not None and self._blob is not None
        self._workers = ContinuousWorkers(
            self._launcher,
            self._blob,
            self.config.application_id,
            str(self.app_dir.root),
            self.committer.epoch,
            max_age=self.config.work_unit_max_age / 1000,
        )

    def _follow_topic_patterns(self) -> None:
        """Between batches: when the topics a pattern source matches changed (one was
        created or deleted), plan anew and rebuild the work units with the topology that
        reads them; the assignor then places any new task like any other."""
        if not self._patterns or not self.topology.match_topics(
            self.log.list_topics(), self.config.application_id
        ):
            return
        before = {t for stage in self.stages for t in stage.task_ids}
        self._plan()
        tasks = [t for stage in self.stages for t in stage.task_ids]
        log.info(
            "%s: pattern sources now read %s (%d new tasks)",
            self.config.application_id,
            {n: self.topology.nodes[n].topics for n in self._patterns},  # type: ignore[attr-defined]
            len(set(tasks) - before),
        )
        # (Kafka: a new task was never held by any work unit, so no transactional id needs
        # fencing for it; the rebuilt work units' ids follow ``engine.unit_ids``)
        if self._workers is not None:
            self._workers.close()
            self._layout, self._ran_in = {}, {}
            self._launch_workers()

    def start(self) -> StreamsApp:
        """Run batches in a background thread until ``stop``."""
        self._ensure_started()
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._loop, name="streamtide-driver", daemon=True
            )
            self._thread.start()
        return self

    def _loop(self) -> None:
        interval = self.config.commit_interval / 1000
        ran = False
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                waiting = self.input_waiting()
                due = self.next_wall_clock_punctuation()
                if not ran or waiting or (due is not None and due <= time.time() * 1000):
                    self.run_batch()
                    ran = True
                    waiting = self.input_waiting()
                if not waiting:  # idle: no Spark job until input arrives or a punctuator is due
                    pause = interval - (time.monotonic() - began)
                    due = self.next_wall_clock_punctuation()
                    if due is not None:
                        pause = min(pause, due / 1000 - time.time())
                    self._stop.wait(max(0.0, pause))
        except BaseException as exc:  # reported by await_termination
            self._error = exc
            log.error("application %s stopped: %s", self.config.application_id, exc)

    def stop(self) -> None:
        """Stop after the running batch; release the SparkSession if this app made it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._metrics_server is not None:
            self._metrics_server.close()
            self._metrics_server = None
        if self._workers is not None:
            self._workers.close()
            self._workers = None
            self._layout = {}
        self.committer.close()
        if self._owns_spark and self._spark is not None:
            self._spark.stop()
            self._spark = None
        self._started = False
        self._stopped = True

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until the app stops (True) or ``timeout`` passes (False); re-raise its error."""
        if self._thread is not None:
            self._thread.join(timeout)
        if self._error is not None:
            raise self._error
        return self._thread is None or not self._thread.is_alive()

    def __enter__(self) -> StreamsApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- batches -------------------------------------------------------------------------

    @property
    def last_progress(self) -> BatchProgress | None:
        return self.history[-1] if self.history else None

    def metrics(self) -> dict[str, float]:
        """Every metric sample, keyed by name and labels in Prometheus text form, e.g.
        ``'streamtide_records_consumed_total{partition="0",topic="clicks"}'``."""
        return self._metrics.as_dict()

    @property
    def metrics_url(self) -> str | None:
        """Where the metrics are served while the app runs (None without ``metrics_port``)."""
        return None if self._metrics_server is None else self._metrics_server.url

    def next_wall_clock_punctuation(self) -> int | None:
        """When the earliest committed wall-clock punctuator of any task is due (epoch ms;
        None: there is none). An idle application runs a batch only then."""
        due = [
            when
            for state in self._task_states.values()
            for key, when in state.schedules.items()
            if is_wall_clock_schedule(key)
        ]
        return min(due) if due else None

    def input_waiting(self) -> bool:
        """Whether any source partition has records past its committed offset (or a topic
        a pattern source matches was created or deleted)."""
        if self._patterns and self._matched_topics_changed():
            return True
        return any(n for rows in self._source_lags().values() for _, n in rows)

    def _matched_topics_changed(self) -> bool:
        found = self.topology.matching_topics(self.log.list_topics(), self.config.application_id)
        nodes = self.topology.nodes
        return any(nodes[name].topics != topics for name, topics in found.items())  # type: ignore[attr-defined]

    def run_until_caught_up(
        self, timeout: float | None = None, max_batches: int = 10_000
    ) -> list[BatchProgress]:
        """Run batches until no input is waiting (at least one batch); return their progress.

        On an app started in the background this waits for the background loop instead:
        one application never runs two batch loops."""
        self._ensure_started()
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._thread is not None and self._thread.is_alive():
            return self._await_caught_up(deadline, timeout)
        done = [self.run_batch()]
        while self.input_waiting() and len(done) < max_batches:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"input still waiting after {timeout} s")
            done.append(self.run_batch())
        return done

    def _await_caught_up(
        self, deadline: float | None, timeout: float | None
    ) -> list[BatchProgress]:
        """Wait until the background loop has run a batch and no input is waiting."""
        first = seen = self._completed
        while True:
            with self._batch_done:
                self._batch_done.wait_for(
                    lambda seen=seen: self._completed > seen or self._error is not None,
                    timeout=0.5,
                )
                now = self._completed
            if self._error is not None:
                raise self._error
            if now > seen:
                seen = now
                with self._batch_lock:  # between two batches of the loop
                    if not self.input_waiting():
                        return list(self.history)[-min(now - first, len(self.history)) :]
            elif self._thread is None or not self._thread.is_alive():
                raise StreamtideError(
                    f"application {self.config.application_id!r} stopped while waiting for it "
                    "to catch up"
                )
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"input still waiting after {timeout} s")

    def run_batch(self) -> BatchProgress:
        """Plan, run and commit one batch (after the running one, if the app was started in
        the background: batches of one application never overlap)."""
        self._ensure_started()
        with self._batch_lock, cyclic_gc_paused():
            self._follow_topic_patterns()
            self.running = RunningBatch(self._next_batch, time.monotonic(), len(self.stages))
            try:
                progress = self._run_batch()
            finally:
                self.running = None
        with self._batch_done:
            self._completed += 1
            self._batch_done.notify_all()
        return progress

    def _run_batch(self) -> BatchProgress:
        batch = self._next_batch
        started = time.perf_counter()
        waited = self._work_unit_wait_s()
        self._retried = set()
        progress = BatchProgress(batch)
        if isinstance(self.committer, KafkaBatchCommitter):
            self.committer.check_fence(batch)  # a newer driver took over: stop before work
        executors = self._live_executors()
        self._note_standby_shortfall(executors, progress)
        assignment = self._assign(executors)
        self._executors, self._assignment = executors, assignment
        self._global_ends = global_ends(
            self.app_dir, self.log, self.topology, self.config.application_id, batch
        )
        if self.running is not None:
            self.running.restore_planned = self._restore_bound(assignment)
        progress.add_phase("plan", (time.perf_counter() - started) * 1000)
        ran: dict[int, list[tuple[str, dict[str, Any]]]] | None = None
        if self.config.stages_in_one_job and len(self.stages) > 1:
            ran = self._run_all_stages(batch, executors, assignment, progress)
        for stage in self.stages:
            stage_started = time.perf_counter()
            self._run_stage(batch, stage, executors, assignment, progress, ran)
            progress.stage_ms.append(round((time.perf_counter() - stage_started) * 1000, 3))
            if self.running is not None:
                self.running.stages_done += 1
                self.running.records_done = progress.input_records
                self.running.restored_done = progress.restored_records
        # a retried stage may have re-assigned (an executor died during the batch)
        executors, assignment = self._executors, self._assignment
        assert assignment is not None
        lags = self._source_lags()
        progress.lag = {sys.intern(t): sum(n for _, n in rows) for t, rows in lags.items()}
        partition_lags = {key: n for rows in lags.values() for key, n in rows}
        progress.partition_lag = {sys.intern(f"{t}:{p}"): n for (t, p), n in partition_lags.items()}
        progress.standbys = {
            c: sorted(
                sys.intern(str(t))
                for t in assignment.standby.get(c, set()) | assignment.warmup.get(c, set())
            )
            for c in assignment.standby
        }
        progress.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        progress.work_unit_wait_ms = round((self._work_unit_wait_s() - waited) * 1000, 3)
        self._batch_size.observe(progress.duration_ms, self._batch_full)
        self._batch_full = False
        records_started = time.perf_counter()
        self._write_assignment_records(batch, executors, assignment)
        commit_started = time.perf_counter()
        progress.committed_at = round(time.time() * 1000)
        self.committer.commit(
            CommitRecord(
                batch=batch,
                epoch=self.committer.epoch,
                tasks={t: s.to_dict() for t, s in self._task_states.items()},
                owners=progress.owners,
                progress=progress.as_dict(),
                assignment=assignment.describe()
                if hasattr(assignment, "describe")
                else str(assignment),
                topic_ids=dict(self._topic_ids),
            )
        )
        if isinstance(self.committer, KafkaBatchCommitter):
            self._purge_repartition_topics()
        progress.commit_ms += round((time.perf_counter() - commit_started) * 1000, 3)
        progress.add_phase("commit", (time.perf_counter() - records_started) * 1000)
        self._record_history(progress, executors, assignment)
        elapsed = time.perf_counter() - started
        self._metrics.record_batch(
            elapsed,
            progress.commit_ms / 1000,
            partition_lags,
            progress.owners,
            driver_s=elapsed - (self._work_unit_wait_s() - waited),
        )
        self._next_batch = batch + 1
        self.history.append(progress)
        log.info("%s %s", self.config.application_id, progress.summary())
        if batch % 50 == 0:
            self.app_dir.prune()
        return progress

    def _note_standby_shortfall(
        self, executors: list[ExecutorInfo], progress: BatchProgress
    ) -> None:
        """Say (once, and when it changes) why fewer standbys than configured are kept; the
        commit record keeps it for ``status``."""
        wanted = self.config.num_standby_replicas if self._stateful_tasks() else 0
        note = standby_shortfall(wanted, executors)
        if note is not None and note != self._standby_note:
            log.warning("%s", note)
        self._standby_note = progress.standby_note = note

    def _work_unit_wait_s(self) -> float:
        """Seconds this driver has waited for work units so far (to start and to reply)."""
        return self._pinned_wait_s + (self._workers.waited_s if self._workers is not None else 0)

    def _stateful_tasks(self) -> set[str]:
        return {t for stage in self.stages if stage.changelog_topics for t in stage.task_ids}

    def _live_executors(self) -> list[ExecutorInfo]:
        """The executors to assign tasks to: the live ones not being removed by ``scale``."""
        assert self._launcher is not None
        return [e for e in self._launcher.executors() if e.id not in self._draining]

    def _assign(self, executors: list[ExecutorInfo]) -> Assignment:
        live = {e.id for e in executors}
        for client in list(self._reports):
            if client not in live:
                del self._reports[client]
        stateful = self._stateful_tasks()
        subs = subscriptions(executors, self._reports, stateful)
        self._fetch_changelog_ends()
        ends: dict[str, int] = {}

        def end_sum(task: str) -> int:
            if task not in ends:
                ends[task] = self._changelog_end_sum(task)
            return ends[task]

        assignment = compute_assignment(self.stages, subs, end_sum, self.config, self.assignor)
        self._assign_lags = {
            (client, task): 0 if task in report.running else max(0, end_sum(task) - held)
            for client, report in self._reports.items()
            for task, held in report.offset_sums.items()
            if task in stateful
        }
        return assignment

    def _record_history(
        self, progress: BatchProgress, executors: list[ExecutorInfo], assignment: Assignment
    ) -> None:
        """Append what changed since the last batch to the assignment history."""
        learners = {c: {str(t) for t in ts} for c, ts in assignment.learners.items()}
        after = Placement(
            {e.id for e in executors},
            dict(progress.owners),
            {
                c: {str(t) for t in ts} - learners.get(c, set())
                for c, ts in assignment.standby.items()
            },
            {
                c: {str(t) for t in ts} | learners.get(c, set())
                for c, ts in assignment.warmup.items()
            },
        )
        restores = {
            t: TaskRestore(n, progress.restore_ms_by_task.get(t, 0))
            for t, n in progress.restored_by_task.items()
        }
        events = changes(
            progress.batch,
            progress.committed_at,
            self._placement,
            after,
            removed=frozenset(self._removed | self._draining),
            lags=self._assign_lags,
            restores=restores,
        )
        self.app_dir.append_history([e.as_dict() for e in events])
        self._placement = after

    def _write_assignment_records(
        self, batch: int, executors: list[ExecutorInfo], assignment: Assignment
    ) -> None:
        """This batch's assignment and each executor's subscription for the next batch, as
        versioned records, so a restarted driver (of this or a later release) resumes them."""
        subs = subscriptions(executors, self._reports, self._stateful_tasks())
        self.app_dir.write_assignment(
            batch,
            {c: sub.encode() for c, sub in subs.items()},
            {c: AssignmentInfo.for_client(assignment, c).encode() for c in assignment.active},
        )

    def _restore_bound(self, assignment: Assignment) -> int:
        """Changelog records the active tasks may restore this batch: committed end minus
        what their executor last reported holding (snapshots can make it less)."""
        stateful = self._stateful_tasks()
        total = 0
        for client, tasks in assignment.active.items():
            held = self._reports.get(client, ClientReport()).offset_sums
            for task in map(str, tasks):
                if task in stateful:
                    total += max(0, self._changelog_end_sum(task) - held.get(task, 0))
        return total

    def _changelog_end_sum(self, task: str) -> int:
        return sum(self._changelog_end(task).values())

    def _fetch_changelog_ends(self) -> None:
        """Ask the log for the committed end of every changelog partition at once (one
        request on Kafka), for this batch's assignment (``_changelog_end``)."""
        self._changelog_ends = self.log.end_offsets(
            (topic, partition)
            for stage in self.stages
            for store, topic in stage.changelog_topics.items()
            if self.topology.source_changelog_topic(store) is None
            for partition in range(stage.partitions)
        )

    def _changelog_end(self, task: str) -> dict[str, int]:
        """Committed changelog end per store (as of ``_fetch_changelog_ends``); a source
        table's is the committed input offset (its changelog is the source topic, read no
        further than processed)."""
        sub, partition = (int(x) for x in task.split("_"))
        stage = self.stages[sub]
        ends = {}
        for store, topic in stage.changelog_topics.items():
            if self.topology.source_changelog_topic(store) is None:
                known = self._changelog_ends.get((topic, partition))
                ends[store] = self.log.end_offset(topic, partition) if known is None else known
            else:
                ends[store] = self._committed_offsets(task).get(offset_key(topic, partition), 0)
        return ends

    def _committed_offsets(self, task: str) -> dict[str, int]:
        state = self._task_states.get(task)
        return dict(state.offsets) if state is not None else {}

    def _source_lags(self) -> dict[str, list[tuple[tuple[str, int], int]]]:
        """End offset minus committed offset of each task's source partitions (the log asked
        for all partitions at once)."""
        committed: dict[str, list[tuple[tuple[str, int], int | None]]] = {}
        for stage in self.stages:
            counts = {topic: self.log.partitions(topic) for topic in stage.source_topics}
            for task in stage.task_ids:
                partition = int(task.split("_")[1])
                state = self._task_states.get(task)
                committed[task] = [
                    (
                        (topic, partition),
                        state.offsets.get(offset_key(topic, partition)) if state else None,
                    )
                    for topic in stage.source_topics
                    if partition < counts[topic]
                ]
        keys = [key for rows in committed.values() for key, _ in rows]
        ends = self.log.end_offsets(keys)
        begins = self.log.begin_offsets(
            k for rows in committed.values() for k, o in rows if o is None
        )
        return {
            task: [
                (key, max(0, ends[key] - (begins[key] if offset is None else offset)))
                for key, offset in rows
            ]
            for task, rows in committed.items()
        }

    def _task_sources(self, stage: Stage | None = None) -> dict[str, list[tuple[str, int]]]:
        """Each task's source partitions (of one stage, or of all)."""
        app = self.config.application_id
        return {
            task: source_partitions(self.topology, app, self.log, task)
            for each in ([stage] if stage is not None else self.stages)
            for task in each.task_ids
        }

    def _purge_repartition_topics(self) -> None:
        """Kafka: delete the repartition records every consuming task has committed."""
        assert isinstance(self.committer, KafkaBatchCommitter)
        internal = self._repartition_topics
        consumed = {}
        for task, partitions in self._task_sources().items():
            state = self._task_states.get(task)
            for topic, partition in partitions:
                key = offset_key(topic, partition)
                if topic in internal and state is not None and key in state.offsets:
                    consumed[(topic, partition)] = state.offsets[key]
        self.committer.purge(consumed)

    @property
    def _repartition_topics(self) -> set[str]:
        app = self.config.application_id
        return {self.topology.resolve_topic(t, app) for t in self.topology.internal_topics}

    def _internal_sinks(self, stage: Stage) -> list[str]:
        """Repartition topics this stage writes (their segments get interleaved)."""
        sub = self.topology.subtopology(stage.subtopology)
        app = self.config.application_id
        return [
            self.topology.resolve_topic(t, app)
            for t in sub.sink_topics
            if t in self.topology.internal_topics
        ]

    def _fix_ranges(self, stage: Stage) -> tuple[Ranges, dict[str, str]]:
        """Each task's input ``{topic: (start, end)}``: from its committed offsets (checked
        against the topic's identity and extent, ``engine.sources``), at most
        ``max_records_per_batch`` per partition, cut at one event time (``engine.ranges``).

        On Kafka a repartition partition is read whole, up to what the earlier batches
        committed (``KafkaBatchCommitter.settled_end``): its records lie in blocks, one per
        writing task and batch, each in time order but not ordered among each other (the
        reading task merges them by time). A cap or a cut would take the head of one block
        and leave the others' earlier records for a later batch, behind stream time."""
        cap = self._batch_size.cap
        topic_ids = {t: i for t in stage.source_topics if (i := self.log.topic_id(t)) is not None}
        whole = self._repartition_topics if self.kafka else set()
        counts = {topic: self.log.partitions(topic) for topic in stage.source_topics}
        keys = [
            (topic, int(task.split("_")[1]))
            for task in stage.task_ids
            for topic in stage.source_topics
            if int(task.split("_")[1]) < counts[topic]
        ]
        # every partition's offsets at once (one request each on Kafka)
        begins = self.log.begin_offsets(keys)
        available = self.log.end_offsets(k for k in keys if k[0] not in whole)
        if whole:
            assert isinstance(self.committer, KafkaBatchCommitter)
            available.update(self.committer.settled_ends(k for k in keys if k[0] in whole))
        windows = {}
        moved_by_task: dict[str, set[str]] = {}  # offsets auto_offset_reset moved, per task
        for topic, partition in keys:
            task = f"{stage.subtopology}_{partition}"
            state = self._task_states.get(task)
            end = available[(topic, partition)]
            committed = state.offsets.get(offset_key(topic, partition)) if state else None
            lost = None
            if isinstance(self.committer, KafkaBatchCommitter) and topic not in whole:
                lost = self.committer.changed_source(topic, partition, committed, end)
            start = input_start(
                SourcePosition(
                    topic,
                    partition,
                    committed,
                    begins[(topic, partition)],
                    end,
                    self._topic_ids.get(topic),
                    topic_ids.get(topic),
                    lost.describe() if lost is not None else None,
                ),
                self.config.auto_offset_reset,
            )
            if committed is not None and start != committed:
                moved_by_task.setdefault(task, set()).add(offset_key(topic, partition))
            if topic in whole:
                windows[(topic, partition)] = (start, max(start, end))
                continue
            capped = min(end, start + cap)
            self._batch_full = self._batch_full or end > capped
            windows[(topic, partition)] = (start, max(start, capped))
        if isinstance(self.committer, KafkaBatchCommitter):
            for task, moved in moved_by_task.items():
                state = self._task_states.get(task)
                if state is not None:
                    self._commit_reset(task, state, windows, moved)
        ends = aligned_ends(
            self.log, {k: w for k, w in windows.items() if k[0] not in whole}, available
        )
        ends.update({k: end for k, (_, end) in windows.items() if k[0] in whole})
        ranges: Ranges = {task: {} for task in stage.task_ids}
        for (topic, partition), (start, _) in windows.items():
            ranges[f"{stage.subtopology}_{partition}"][topic] = (start, ends[(topic, partition)])
        return ranges, topic_ids

    def _commit_reset(
        self,
        task: str,
        state: TaskCommittedState,
        windows: dict[tuple[str, int], tuple[int, int]],
        moved: set[str],
    ) -> None:
        """Kafka: the offsets ``auto_offset_reset`` chose become the task's committed ones
        before it runs (a run starts at Kafka's committed offsets)."""
        assert isinstance(self.committer, KafkaBatchCommitter)
        offsets = dict(state.offsets)
        for (topic, partition), (start, _) in windows.items():
            if offset_key(topic, partition) in moved:
                offsets[offset_key(topic, partition)] = start
        reset = TaskCommittedState(
            offsets, state.stream_time, state.schedules, state.partition_times
        )
        self.committer.commit_reset(task, self._task_sources()[task], reset, moved)
        self._task_states[task] = reset

    def _run_all_stages(
        self,
        batch: int,
        executors: list[ExecutorInfo],
        assignment: Assignment,
        progress: BatchProgress,
    ) -> dict[int, list[tuple[str, dict[str, Any]]]]:
        """Fix every stage's input ranges first, then run all stages that need running in
        one Spark job. A stage after a repartition then reads what earlier batches sealed into
        the repartition topic (records sealed by this batch wait for the next one)."""
        plans: dict[int, Ranges] = {}
        for stage in self.stages:
            began = time.perf_counter()
            planned = self.committer.plan_stage(
                batch, stage.subtopology, lambda stage=stage: self._planned_ranges(stage)
            )
            progress.add_phase("plan", (time.perf_counter() - began) * 1000)
            if planned.resumed:
                progress.resumed = True
            if planned.offsets is not None:
                self._topic_ids.update(planned.offsets.topic_ids)
                plans[stage.subtopology] = planned.offsets.ranges
        if not plans:
            return {}
        began = time.perf_counter()
        try:
            return self._execute_stages(batch, plans, executors, assignment, progress)
        finally:
            progress.add_phase("run", (time.perf_counter() - began) * 1000)

    def _planned_ranges(self, stage: Stage) -> tuple[Ranges, dict[str, str]]:
        if isinstance(self.committer, KafkaBatchCommitter):  # plan from what Kafka holds
            sources = self._task_sources(stage)
            found = self.committer.committed_states(sources)
            for task in sources:
                self._task_states.pop(task, None)
            self._task_states.update(found)
        ranges, topic_ids = self._fix_ranges(stage)
        if self.running is not None:
            self.running.planned_records += sum(
                end - start for topics in ranges.values() for start, end in topics.values()
            )
        return ranges, topic_ids

    def _run_stage(
        self,
        batch: int,
        stage: Stage,
        executors: list[ExecutorInfo],
        assignment: Assignment,
        progress: BatchProgress,
        ran: dict[int, list[tuple[str, dict[str, Any]]]] | None = None,
    ) -> None:
        """Bring one stage of the batch to sealed; its work units already ran when ``ran``
        holds its reports (``_run_all_stages``)."""
        execute_ms = plan_ms = 0.0

        def fix() -> tuple[Ranges, dict[str, str]]:
            nonlocal plan_ms
            began = time.perf_counter()
            try:
                return self._planned_ranges(stage)
            finally:
                plan_ms += (time.perf_counter() - began) * 1000

        def execute(ranges: Ranges) -> list[tuple[str, dict[str, Any]]]:
            nonlocal execute_ms
            if ran is not None and stage.subtopology in ran:
                return ran[stage.subtopology]
            began = time.perf_counter()
            try:
                return self._execute(batch, stage, executors, assignment, ranges, progress)
            finally:
                execute_ms += (time.perf_counter() - began) * 1000

        began = time.perf_counter()
        result = self.committer.run_stage(
            batch,
            stage.subtopology,
            fix,
            execute,
            self._internal_sinks(stage),
            # continuous execution sees every attempt; Spark may retry a pinned task unseen
            others_ran=lambda: self._workers is None or stage.subtopology in self._retried,
        )
        spent = (time.perf_counter() - began) * 1000
        progress.commit_ms += round(spent - execute_ms, 3)
        progress.add_phase("plan", plan_ms)
        progress.add_phase("run", execute_ms)
        progress.add_phase("seal", spent - execute_ms - plan_ms)
        if ran is None:
            progress.resumed = progress.resumed or result.resumed
        if result.offsets is not None:
            self._topic_ids.update(result.offsets.topic_ids)
        if self._workers is not None and not self.kafka:  # on Kafka tasks commit themselves
            self._settle(result.prepare)
        self._take_over(stage, result.prepare, progress, result.offsets)

    def _take_over(
        self,
        stage: Stage,
        prepare: PrepareRecord,
        progress: BatchProgress,
        offsets: OffsetsRecord | None = None,
    ) -> None:
        """Adopt a sealed stage's outcome: task states, owners, reports, progress, metrics."""
        changelogs = set(stage.changelog_topics.values())
        # task and executor ids are interned: the progress of the last batches keeps them in
        # several maps each, which then share one string instead of one per batch and map
        for task, entry in prepare.tasks.items():
            task, client = sys.intern(task), sys.intern(entry.client)
            self._task_states[task] = TaskCommittedState.from_dict(entry.state)
            progress.owners[task] = client
            self._owners[task] = client
        units = [u.as_dict() for u in prepare.reports]
        record_stage_reports(self._reports, stage.task_ids, units)
        self._metrics.record_stage(offsets.ranges if offsets is not None else {}, units, changelogs)
        for unit in prepare.reports:
            executor = sys.intern(unit.executor)
            for result in unit.tasks:
                task = sys.intern(result.task)
                progress.ran_on[task] = executor
                progress.restored_by_task[task] = result.restored_records
                progress.restore_ms_by_task[task] = result.metrics.get(RESTORE_DURATION_MS, 0)
                progress.input_records += result.input_records
                progress.restored_records += result.restored_records
                progress.output_records += sum(
                    n for t, n in result.output_records.items() if t not in changelogs
                )
                progress.changelog_records += sum(
                    n for t, n in result.output_records.items() if t in changelogs
                )

    def _execute(
        self,
        batch: int,
        stage: Stage,
        executors: list[ExecutorInfo],
        assignment: Assignment,
        ranges: Ranges,
        progress: BatchProgress | None = None,
    ) -> list[tuple[str, dict[str, Any]]]:
        """Run one stage's work units as one Spark job; see ``_execute_stages``."""
        done = self._execute_stages(
            batch, {stage.subtopology: ranges}, executors, assignment, progress
        )
        return done[stage.subtopology]

    def _execute_stages(
        self,
        batch: int,
        plans: dict[int, Ranges],
        executors: list[ExecutorInfo],
        assignment: Assignment,
        progress: BatchProgress | None = None,
    ) -> dict[int, list[tuple[str, dict[str, Any]]]]:
        """Run the work units of every planned stage (``{stage: ranges}``) in one Spark job
        and return each stage's reports (their phases added to ``progress``). A failed job is
        re-planned with the same ranges, up to ``MAX_STAGE_ATTEMPTS`` times; a failure no
        retry can help (user code's, or fatal: ``engine.failures``) is reported at once."""
        import json

        last_error: Exception | None = None
        cause: BaseException | None = None
        for attempt in range(MAX_STAGE_ATTEMPTS):
            if attempt:
                self._retried.update(plans)
                executors = self._live_executors()
                assignment = self._assign(executors)
                self._executors, self._assignment = executors, assignment  # what the batch used
                log.warning(
                    "batch %d stage(s) %s: retrying (attempt %d) after: %s",
                    batch,
                    ", ".join(map(str, plans)),
                    attempt + 1,
                    str(last_error).splitlines()[0] if str(last_error) else repr(last_error),
                )
            units: list[tuple[int, dict[str, Any], ExecutorInfo, int]] = []
            try:
                unit_ids = self._unit_ids(plans, executors, assignment)
            except LogError as exc:  # the broker, while fencing a moved task's unit: re-plan
                last_error, cause = exc, None
                continue
            for subtopology, ranges in plans.items():
                stage = self.stages[subtopology]
                for executor, slot, actives, standbys in slot_units(assignment, executors, stage):
                    spec = WorkUnitSpec(
                        batch,
                        subtopology,
                        executor.id,
                        [
                            ActiveSpec(
                                t,
                                ranges[t],
                                (self._task_states.get(t) or TaskCommittedState()).to_dict(),
                            )
                            for t in actives
                        ],
                        standbys,
                        standby_offsets={t: self._committed_offsets(t) for t in standbys},
                        global_ends=self._global_ends,
                        transactional_id=unit_ids.get(UnitKey(executor.id, slot, subtopology)),
                    )
                    units.append((subtopology, spec.to_dict(), executor, slot))
            try:
                if self._workers is not None:
                    reports = self._run_continuous(units, executors, assignment)
                else:
                    payloads = [(json.dumps(spec), ex) for _, spec, ex, _ in units]
                    assert self._launcher is not None
                    self._launcher.check_slots_free(
                        self.config.application_id, [(u[2], u[3]) for u in units]
                    )
                    began = time.monotonic()
                    try:
                        outputs = run_pinned_watched(self.sc, payloads, make_work(self._blob))
                    finally:
                        self._pinned_wait_s += time.monotonic() - began
                    reports = [json.loads(out) for out in outputs]
            except TaskSlotsHeldError:
                raise  # another application holds the slots until it stops: no retry helps
            except (WorkerLostError, PinnedExecutorLostError) as exc:  # an executor left: re-plan
                last_error, cause = exc, None
                self._await_executors_gone(exc.executors)
                continue
            except Exception as exc:  # a failed Spark job (a worker died): re-plan, same ranges
                last_error = _explain(exc)
                cause = RemoteTraceback("\n".join(str(exc).splitlines()[-25:]))
                continue
            results = [(sub, ex.id, report) for (sub, _, ex, _), report in zip(units, reports)]
            failures = [r["failure"] for _, _, r in results if "failure" in r]
            if not failures:
                if progress is not None:
                    progress.add_work_unit_reports(reports)
                done: dict[int, list[tuple[str, dict[str, Any]]]] = {sub: [] for sub in plans}
                for sub, client, report in results:
                    done[sub].append((client, report))
                return done
            failure = failures[0]
            last_error, cause = rebuild(failure), RemoteTraceback(failure["trace"])
            if self.kafka and isinstance(last_error, FencedError):
                # a task's producer was fenced: by a newer driver (then this check raises),
                # or by an older one that reopened the task (then the retry takes it back)
                self.committer.check_fence()
                continue
            if failure["fatal"]:
                raise last_error from cause  # retrying cannot help: report it once
        assert last_error is not None
        raise last_error from cause

    def _unit_ids(
        self, plans: dict[int, Ranges], executors: list[ExecutorInfo], assignment: Assignment
    ) -> dict[UnitKey, str]:
        """Kafka: the transactional id of each work unit about to run (``engine.unit_ids``:
        ids that may still hold a task that moved are fenced first); nothing on the file
        log."""
        if not isinstance(self.committer, KafkaBatchCommitter):
            return {}
        assert self.committer.unit_ids is not None
        units = {
            UnitKey(executor.id, slot, sub): actives
            for sub in plans
            for executor, slot, actives, _ in slot_units(assignment, executors, self.stages[sub])
            if actives
        }
        return self.committer.unit_ids.ids_for(units)

    def _await_executors_gone(self, executors: frozenset[str]) -> None:
        """After losing work units, wait briefly for Spark to drop their executors if they
        died (it takes up to about half a second), so the retry does not pin work to them.
        An executor still listed after ``EXECUTOR_LOSS_WAIT_S`` lost only a worker."""
        deadline = time.monotonic() + EXECUTOR_LOSS_WAIT_S
        while executors and time.monotonic() < deadline:
            assert self._launcher is not None
            if not executors & {e.id for e in self._launcher.executors()}:
                return
            time.sleep(0.05)

    # ---- continuous execution ------------------------------------------------------------

    def _run_continuous(
        self,
        units: list[tuple[int, dict[str, Any], ExecutorInfo, int]],
        executors: list[ExecutorInfo],
        assignment: Assignment,
    ) -> list[dict[str, Any]]:
        """Run work-unit specs on the long-running work units of their slots (one message
        per slot) and return the reports in the order of ``units``."""
        workers = self._workers
        assert workers is not None
        layout: dict[SlotKey, set[str]] = {}
        for stage in self.stages:
            for executor, slot, actives, standbys in slot_units(assignment, executors, stage):
                layout.setdefault(SlotKey(executor.id, slot), set()).update(actives, standbys)
        if layout != self._layout:
            # tasks that move close where they were before they open elsewhere (RocksDB
            # admits one process per store)
            connected = {key for key, slot in workers.slots().items() if slot["connected"]}
            workers.request(
                {key: {"kind": "release", "keep": sorted(layout.get(key, ()))} for key in connected}
            )
            self._layout = layout
        by_slot: dict[SlotKey, list[int]] = {}
        executor_of: dict[SlotKey, ExecutorInfo] = {}
        for index, (_, _, executor, slot) in enumerate(units):
            key = SlotKey(executor.id, slot)
            executor_of[key] = executor
            by_slot.setdefault(key, []).append(index)
        workers.ensure(executor_of)
        replies = workers.request(
            {
                key: {"kind": "run", "units": [units[i][1] for i in indexes]}
                for key, indexes in by_slot.items()
            }
        )
        reports: list[dict[str, Any]] = [{} for _ in units]
        for key, indexes in by_slot.items():
            for index, report in zip(indexes, replies[key]["reports"]):
                reports[index] = report
                for task in report.get("tasks", ()):
                    self._ran_in[task["task"]] = key
            # what the slot spent settling since its last run counts once, with its first unit
            reports[indexes[0]]["settle_ms"] = replies[key].get("settle_ms", 0.0)
        return reports

    def _settle(self, prepare: PrepareRecord) -> None:
        """Tell each long-running work unit which of its held runs the sealed stage took."""
        assert self._workers is not None
        winners: dict[SlotKey, dict[str, str]] = {}
        for task, entry in prepare.tasks.items():
            key = self._ran_in.get(task)
            if key is not None and entry.writer is not None:
                winners.setdefault(key, {})[task] = entry.writer
        for key, tasks in winners.items():
            self._workers.notify(key, {"kind": "settle", "winners": tasks})

    # ---- queryable state -----------------------------------------------------------------

    def store(
        self, name: str
    ) -> (
        ReadOnlyKeyValueStore
        | ReadOnlyWindowStore
        | ReadOnlySessionStore
        | ReadOnlyVersionedKeyValueStore
    ):
        """A read-only view of store ``name`` over all its tasks, as of the last committed
        batch (docs/tables-and-joins.md, "Queryable state"): ``get``/``range``/``all``/
        ``approximate_num_entries`` for key-value stores, ``fetch`` for window and session
        stores, ``get(key, as_of=None)`` for versioned stores. The app must be running
        (``start``, or after ``run_until_caught_up``)."""
        self._check_queryable()
        partitions = {stage.subtopology: stage.partitions for stage in self.stages}
        route = store_route(self.topology, self.config, name, partitions)
        return store_view(route, self._ask)  # type: ignore[return-value]

    def _check_queryable(self) -> None:
        app = self.config.application_id
        if self._error is not None:
            raise InvalidStateStoreError(
                f"application {app!r} stopped after an error, its stores cannot be queried: "
                f"{self._error}"
            )
        if self._stopped:
            raise InvalidStateStoreError(
                f"application {app!r} was stopped; its stores can be queried only while it runs"
            )
        if not self._started:
            raise InvalidStateStoreError(
                f"application {app!r} is not running; start it (app.start() or "
                "app.run_until_caught_up()) before querying its stores"
            )

    def _ask(self, store: str, op: QueryOp, args: list[Any], tasks: list[str]) -> dict[str, Any]:
        """Run one query on ``tasks`` where they live, between two batches (under the batch
        lock, so it sees exactly the last committed batch and never a batch's messages)."""
        self._await_first_batch()
        with self._batch_lock:
            self._check_queryable()
            query = StoreQuery(
                store,
                op,
                args,
                {t: (self._task_states.get(t) or TaskCommittedState()).to_dict() for t in tasks},
            )
            if self._workers is not None:
                return ask_work_units(self._workers, self._ran_in, query)
            assert self._blob is not None
            return ask_pinned_jobs(self.sc, self._blob, self._owners, query)

    def _await_first_batch(self, timeout: float = 300.0) -> None:
        """An app just started in the background has not placed its tasks yet: wait for its
        first batch."""
        if self._thread is None or self._completed:
            return
        with self._batch_done:
            self._batch_done.wait_for(
                lambda: (
                    self._completed > 0
                    or self._error is not None
                    or self._thread is None
                    or not self._thread.is_alive()
                ),
                timeout=timeout,
            )

    # ---- scaling -------------------------------------------------------------------------

    def scale(self, executors: int, timeout: float = 300.0) -> list[str]:
        """Grow or shrink the application to ``executors`` executors; returns the live ids.

        Growing asks the cluster manager for the new executors and returns once they are
        live; the next batches give them warm-up tasks, and a task moves to one only when its
        warm-up is within ``acceptable_recovery_lag``. Shrinking picks the executors with the
        fewest active tasks (the newest among equals), runs a batch that assigns them nothing
        (their tasks go to their standbys; the other tasks do not stop), stops their work
        units and then removes them. Needs a cluster manager that lets the application choose
        its executors (``engine.scaling``); ``ConfigError`` otherwise."""
        from streamtide.engine import scaling

        if isinstance(executors, bool) or not isinstance(executors, int) or executors < 1:
            raise ConfigError(f"scale: executors must be an int >= 1, got {executors!r}")
        self._ensure_started()
        scaling.check_scalable(self.sc)
        live = list_executors(self.sc)
        if executors > len(live):
            scaling.request_total(self.sc, executors)
            return scaling.await_executors(
                self.sc,
                lambda ids: len(ids) >= executors,
                timeout,
                f"{executors} executors did not register",
            )
        if executors == len(live):
            return [e.id for e in live]
        owned = {e.id: 0 for e in live}
        for owner in self._placement.owners.values():
            if owner in owned:
                owned[owner] += 1
        order = sorted(live, key=lambda e: (owned[e.id], -_id_rank(e.id)))
        leaving = {e.id for e in order[: len(live) - executors]}
        self._draining |= leaving
        try:
            self._await_batch_without(timeout)
            if self._workers is not None:
                self._workers.retire_executors(leaving, timeout)
            scaling.kill(self.sc, sorted(leaving))
            scaling.request_total(self.sc, executors)
            ids = scaling.await_executors(
                self.sc,
                lambda ids: not leaving & set(ids),
                timeout,
                f"executors {sorted(leaving)} were not removed",
            )
            self._removed |= leaving
        finally:
            self._draining -= leaving
        return ids

    def _await_batch_without(self, timeout: float) -> None:
        """Wait for a batch that started after ``_draining`` changed (run one if the app is
        not running in the background)."""
        if self._thread is None or not self._thread.is_alive():
            self.run_batch()
            return
        with self._batch_done:
            target = self._completed + (2 if self.running is not None else 1)
            if not self._batch_done.wait_for(
                lambda: self._completed >= target or self._error is not None, timeout
            ):
                raise TimeoutError(f"no batch completed within {timeout:.0f} s")
        if self._error is not None:
            raise self._error

    # ---- status --------------------------------------------------------------------------

    def status(self, history: int = 10) -> dict[str, Any]:
        """Tasks, owners, lags and recent batches (also available without Spark)."""
        return read_status(self.config, history)


def _id_rank(executor_id: str) -> int:
    """Executors' ids grow as they are started (non-numeric ids rank first)."""
    return int(executor_id) if executor_id.isdigit() else -1


def _stored_placement(
    owners: dict[str, str], stored: dict[str, dict[str, bytes]] | None
) -> Placement:
    """The last committed batch's placement, for the history of a resumed application."""
    placement = Placement(set(owners.values()), dict(owners))
    for client, blob in (stored or {}).get("assignments", {}).items():
        try:
            info = AssignmentInfo.decode(blob)
        except StreamtideError:
            continue  # an unreadable record costs the history one comparison, nothing more
        placement.executors.add(client)
        placement.standbys[client] = {str(t) for t in info.standby}
        placement.warmups[client] = {str(t) for t in info.warmup}
    return placement


def _explain(exc: Exception) -> StreamtideError:
    """The error for a failed Spark job: a worker or executor died (work units report their
    own errors instead of failing), so only Spark's summary is known; the end of its trace
    becomes the cause."""
    first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return StreamtideError(f"the stage's Spark job failed: {first}")
