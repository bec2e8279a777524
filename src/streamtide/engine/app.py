"""``StreamsApp``: runs a topology on Spark as a sequence of exactly-once batches, on
long-running work units (continuous execution) or as a Spark job each (micro-batch).

The application is a few collaborators sharing a ``DriverState`` (``engine.driver_state``):
``BatchLoop`` runs and commits the batches (``engine.batch_loop``), ``StageRunner`` brings
each stage to sealed (``engine.stage_runner``), ``InputRanges`` fixes their input
(``engine.input_ranges``), ``Placing`` assigns the tasks (``engine.placing``),
``WorkUnitRoutes`` holds the long-running work units (``engine.work_unit_routes``),
``StoreQueries`` answers queries (``engine.app_queries``) and ``rescale`` scales
(``engine.rescale``). The committer (``engine.committers``) is the only part that knows the
log: the file log's or Kafka's. ``StreamsApp`` itself starts and stops them."""

from __future__ import annotations

import logging
from typing import Any, cast

from streamtide.assignment import assign
from streamtide.config import StreamsConfig, check_master
from streamtide.engine.app_dir import AppDirectory, app_dir_for
from streamtide.engine.app_queries import StoreQueries, StoreView
from streamtide.engine.batch_loop import BatchLoop
from streamtide.engine.batch_size import BatchSizeController
from streamtide.engine.committers import open_committer
from streamtide.engine.continuous import ContinuousWorkers
from streamtide.engine.driver_state import DriverState
from streamtide.engine.input_ranges import InputRanges
from streamtide.engine.interop import build_session, spark_context
from streamtide.engine.launcher import SparkLauncher, WorkUnitLauncher
from streamtide.engine.metrics import AppMetrics, MetricsServer
from streamtide.engine.placement import Assignor, ClientReport
from streamtide.engine.placing import Placing
from streamtide.engine.plan import Stage, make_plan
from streamtide.engine.progress import BatchProgress, RunningBatch
from streamtide.engine.protocol import resume_batch
from streamtide.engine.rescale import rescale
from streamtide.engine.shipping import ship_user_modules
from streamtide.engine.stage_runner import StageRunner
from streamtide.engine.status import read_status
from streamtide.engine.topology_names import check_resource_names
from streamtide.engine.work_unit_routes import WorkUnitRoutes
from streamtide.errors import ConfigError
from streamtide.log import open_log
from streamtide.processor.topology import Topology
from streamtide.runtime.work_unit import TaskStoresFactory

log = logging.getLogger("streamtide.engine")


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
        stores_factory: TaskStoresFactory | None = None,
        launcher: WorkUnitLauncher | None = None,
    ) -> None:
        self.topology = topology
        self.config = config or StreamsConfig()
        self._spark = spark
        self._master = check_master(master)
        self._owns_spark = spark is None
        self.assignor = assignor
        if stores_factory is None:  # the durable RocksDB stores over the log
            from streamtide.runtime.state_factory import make_task_stores

            stores_factory = make_task_stores
        self.stores_factory: TaskStoresFactory = stores_factory
        self.log = open_log(self.config.log, **self.config.log_options)
        self.app_dir = AppDirectory(app_dir_for(self.config), self.config.application_id)
        self.committer = open_committer(
            self.app_dir,
            self.log,
            self.config.application_id,
            exactly_once=self.config.processing_guarantee == "exactly_once",
            continuous=self.config.execution == "continuous",
        )
        self._metrics = AppMetrics()
        self._metrics_server: MetricsServer | None = None
        self._state = DriverState(
            topology, self.config, self.log, self.app_dir, self.committer, self._metrics
        )
        batch_size = BatchSizeController(
            self.config.max_records_per_batch,
            self.config.adaptive_batch_size_limit,
            cast(int, self.config.commit_interval),  # ms once configured
            enabled=self.config.adaptive_batch_size,
        )
        self._inputs = InputRanges(self._state, batch_size)
        self._placing = Placing(self._state, assignor)
        self._runner = StageRunner(self._state, self._inputs, self._placing)
        #: Where work units run (``engine.launcher``): Spark's executors unless given; another
        #: launcher runs continuous execution only.
        self._runner.launcher = launcher
        self._loop = BatchLoop(
            self._state,
            self._inputs,
            self._placing,
            self._runner,
            batch_size,
            ready=self._ensure_started,
            replan=self._follow_topic_patterns,
        )
        self._queries = StoreQueries(
            self._state, self._loop, self._runner, lambda: (self._started, self._stopped)
        )
        self._started = False
        self._stopped = False

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

    @property
    def sc(self) -> Any:
        """Spark's context (None until started, and with another work-unit launcher)."""
        return self._runner.sc

    def _ensure_started(self) -> None:
        if self._started:
            return
        runner = self._runner
        if runner.launcher is None:
            runner.sc = spark_context(self.spark)
            runner.launcher = SparkLauncher(runner.sc)
        elif runner.sc is None and self.config.execution != "continuous":
            raise ConfigError("a work-unit launcher other than Spark runs continuous execution")
        self._plan()
        state = self._state
        last = self.committer.start()  # takes an epoch: any older driver is fenced now
        self.committer.fence_work_units(state.task_ids())
        check_resource_names(self.app_dir, self.topology, self.config)
        self._loop.next_batch = resume_batch(last)
        state.task_states = self.committer.resume_states(last, state.task_sources)
        if last is not None:
            state.topic_ids = dict(last.topic_ids)
            self._placing.resume(last)
            self._metrics.remember_owners(last.owners)
            state.owners = dict(last.owners)
            log.info("resuming %s after committed batch %d", self.config.application_id, last.batch)
        if self.config.execution == "continuous" and runner.routes is None:
            self._launch_workers()
        if self.config.metrics_port is not None and self._metrics_server is None:
            self._metrics_server = MetricsServer(
                self._metrics.registry, self.config.metrics_port, self.config.metrics_bind_address
            )
        self._started = True
        self._stopped = False

    def _plan(self) -> None:
        """The stages, their tasks' metrics and the topology shipped to work units."""
        state = self._state
        state.stages = make_plan(self.topology, self.config, self.log)
        self._metrics.declare(
            state.task_ids(),
            (store for stage in state.stages for store in stage.changelog_topics),
            state.stateful_tasks() if self.config.num_standby_replicas else (),
        )
        from pyspark import cloudpickle

        ship_user_modules(self.topology)
        self._runner.blob = cloudpickle.dumps((self.topology, self.config, self.stores_factory))

    def _launch_workers(self) -> None:
        runner = self._runner
        assert runner.launcher is not None and runner.blob is not None
        runner.routes = WorkUnitRoutes(
            ContinuousWorkers(
                runner.launcher,
                runner.blob,
                self.config.application_id,
                str(self.app_dir.root),
                self.committer.epoch,
                max_age=cast(float, self.config.work_unit_max_age) / 1000,  # ms once configured
            ),
            on_launched=self.committer.units_launched,
        )

    def _follow_topic_patterns(self) -> None:
        """Between batches: when the topics a pattern source matches changed (one was
        created or deleted), plan anew and rebuild the work units with the topology that
        reads them; the assignor then places any new task like any other."""
        if not self._inputs.patterns or not self.topology.match_topics(
            self.log.list_topics(), self.config.application_id
        ):
            return
        before = set(self._state.task_ids())
        self._plan()
        tasks = self._state.task_ids()
        log.info(
            "%s: pattern sources now read %s (%d new tasks)",
            self.config.application_id,
            {n: self.topology.nodes[n].topics for n in self._inputs.patterns},  # type: ignore[attr-defined]
            len(set(tasks) - before),
        )
        # (Kafka: a new task was never held by any work unit, so no transactional id needs
        # fencing for it; the rebuilt work units' ids follow ``engine.unit_ids``)
        if self._runner.routes is not None:
            self._runner.routes.close()
            self._launch_workers()

    def start(self) -> StreamsApp:
        """Run batches in a background thread until ``stop``."""
        self._ensure_started()
        self._loop.start()
        return self

    def stop(self) -> None:
        """Stop after the running batch; release the SparkSession if this app made it."""
        self._loop.stop()
        if self._metrics_server is not None:
            self._metrics_server.close()
            self._metrics_server = None
        if self._runner.routes is not None:
            self._runner.routes.close()
            self._runner.routes = None
        self.committer.close()
        if self._owns_spark and self._spark is not None:
            self._spark.stop()
            self._spark = None
        self._started = False
        self._stopped = True

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until the app stops (True) or ``timeout`` passes (False); re-raise its error."""
        return self._loop.await_termination(timeout)

    def __enter__(self) -> StreamsApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- batches -------------------------------------------------------------------------

    @property
    def stages(self) -> list[Stage]:
        return self._state.stages

    @property
    def history(self) -> Any:
        """The progress of the last (up to 100) batches, oldest first."""
        return self._loop.history

    @property
    def running(self) -> RunningBatch | None:
        """The batch being run, if any (read by progress displays from other threads)."""
        return self._loop.running

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
        return self._inputs.next_wall_clock_punctuation()

    def input_waiting(self) -> bool:
        """Whether any source partition has records past its committed offset (or a topic
        a pattern source matches was created or deleted)."""
        return self._inputs.waiting()

    def run_until_caught_up(
        self, timeout: float | None = None, max_batches: int = 10_000
    ) -> list[BatchProgress]:
        """Run batches until no input is waiting (at least one batch); return their progress.

        On an app started in the background this waits for the background loop instead:
        one application never runs two batch loops."""
        self._ensure_started()
        return self._loop.run_until_caught_up(timeout, max_batches)

    def run_batch(self) -> BatchProgress:
        """Plan, run and commit one batch (after the running one, if the app was started in
        the background: batches of one application never overlap)."""
        return self._loop.run_batch()

    # ---- the collaborators' state, as tests and tools look at it -------------------------

    @property
    def _workers(self) -> ContinuousWorkers | None:
        """The long-running work units (continuous execution), if any."""
        routes = self._runner.routes
        return routes.workers if routes is not None else None

    @property
    def _reports(self) -> dict[str, ClientReport]:
        return self._state.reports

    # ---- queryable state -----------------------------------------------------------------

    def store(self, name: str) -> StoreView:
        """A read-only view of store ``name`` over all its tasks, as of the last committed
        batch (docs/tables-and-joins.md, "Queryable state"): ``get``/``range``/``all``/
        ``approximate_num_entries`` for key-value stores, ``fetch`` for window and session
        stores, ``get(key, as_of=None)`` for versioned stores. The app must be running
        (``start``, or after ``run_until_caught_up``)."""
        return self._queries.store(name)

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
        if isinstance(executors, bool) or not isinstance(executors, int) or executors < 1:
            raise ConfigError(f"scale: executors must be an int >= 1, got {executors!r}")
        self._ensure_started()
        return rescale(self.sc, executors, timeout, self._placing, self._loop, self._runner)

    # ---- status --------------------------------------------------------------------------

    def status(self, history: int = 10) -> dict[str, Any]:
        """Tasks, owners, lags and recent batches (also available without Spark)."""
        return read_status(self.config, history)
