"""``StageRunner``: brings each stage of a batch to sealed and adopts its outcome.

A stage's input ranges are fixed and recorded, its work units run (as one Spark job of pinned
tasks in micro-batch execution, on the long-running work units in continuous execution,
``engine.work_unit_routes``), their reports are prepared and sealed by the committer
(``BatchCommitter.run_stage``), and the driver then adopts the task states, owners, reports
and progress of the sealed stage. A failed run is re-planned with the same ranges, up to
``MAX_STAGE_ATTEMPTS`` times."""

from __future__ import annotations

import json
import logging
import sys
import time
from functools import partial
from typing import Any

from streamtide.assignment import Assignment
from streamtide.engine.continuous import WorkerLostError
from streamtide.engine.driver_state import DriverState
from streamtide.engine.failures import FailureReport, RemoteTraceback, rebuild
from streamtide.engine.input_ranges import InputRanges
from streamtide.engine.interop import ExecutorInfo, PinnedExecutorLostError, run_pinned_watched
from streamtide.engine.launcher import WorkUnitLauncher
from streamtide.engine.placement import record_stage_reports, slot_units
from streamtide.engine.placing import Placing
from streamtide.engine.plan import Stage
from streamtide.engine.progress import BatchProgress, RunningBatch
from streamtide.engine.protocol import OffsetsRecord, PrepareRecord, Ranges
from streamtide.engine.slots import TaskSlotsHeldError
from streamtide.engine.unit_ids import UnitKey
from streamtide.engine.work_unit_routes import Unit, WorkUnitRoutes
from streamtide.engine.worker import make_work
from streamtide.errors import StreamtideError
from streamtide.log.errors import LogError
from streamtide.runtime.committed import TaskCommittedState
from streamtide.runtime.restore import RESTORE_DURATION_MS
from streamtide.runtime.work_unit import ActiveSpec, WorkUnitSpec

log = logging.getLogger("streamtide.engine")

MAX_STAGE_ATTEMPTS = 3
#: How long a retry after a lost work unit waits for Spark to drop a dead executor.
EXECUTOR_LOSS_WAIT_S = 2.0

#: Each stage's work-unit reports: ``{stage: [(executor, report dict), ...]}``.
StageReports = dict[int, list[tuple[str, dict[str, Any]]]]


class StageRunner:
    """Runs the stages of the driver's batches (see the module docstring). Holds where work
    units run: the launcher, Spark's context (micro-batch), the topology shipped to them and
    the long-running work units (continuous execution; None otherwise)."""

    def __init__(self, state: DriverState, inputs: InputRanges, placing: Placing) -> None:
        self.state = state
        self.inputs = inputs
        self.placing = placing
        self.launcher: WorkUnitLauncher | None = None
        self.sc: Any = None
        self.blob: bytes | None = None
        self.routes: WorkUnitRoutes | None = None
        self.pinned_wait_s = 0.0  # micro-batch: time spent in the work units' Spark jobs
        self.retried: set[int] = set()  # stages of this batch that ran more than once

    def work_unit_wait_s(self) -> float:
        """Seconds this driver has waited for work units so far (to start and to reply)."""
        return self.pinned_wait_s + (self.routes.waited_s if self.routes is not None else 0)

    def run_all_stages(
        self,
        batch: int,
        executors: list[ExecutorInfo],
        assignment: Assignment,
        progress: BatchProgress,
        running: RunningBatch | None,
    ) -> StageReports:
        """Fix every stage's input ranges first, then run all stages that need running in
        one Spark job. A stage after a repartition then reads what earlier batches sealed into
        the repartition topic (records sealed by this batch wait for the next one)."""
        plans: dict[int, Ranges] = {}
        for stage in self.state.stages:
            began = time.perf_counter()
            planned = self.state.committer.plan_stage(
                batch, stage.subtopology, partial(self.inputs.planned, stage, running)
            )
            progress.add_phase("plan", (time.perf_counter() - began) * 1000)
            if planned.resumed:
                progress.resumed = True
            if planned.offsets is not None:
                self.state.topic_ids.update(planned.offsets.topic_ids)
                plans[stage.subtopology] = planned.offsets.ranges
        if not plans:
            return {}
        began = time.perf_counter()
        try:
            return self.execute_stages(batch, plans, executors, assignment, progress)
        finally:
            progress.add_phase("run", (time.perf_counter() - began) * 1000)

    def run_stage(
        self,
        batch: int,
        stage: Stage,
        executors: list[ExecutorInfo],
        assignment: Assignment,
        progress: BatchProgress,
        running: RunningBatch | None,
        ran: StageReports | None = None,
    ) -> None:
        """Bring one stage of the batch to sealed; its work units already ran when ``ran``
        holds its reports (``run_all_stages``)."""
        execute_ms = plan_ms = 0.0

        def fix() -> tuple[Ranges, dict[str, str]]:
            nonlocal plan_ms
            began = time.perf_counter()
            try:
                return self.inputs.planned(stage, running)
            finally:
                plan_ms += (time.perf_counter() - began) * 1000

        def execute(ranges: Ranges) -> list[tuple[str, dict[str, Any]]]:
            nonlocal execute_ms
            if ran is not None and stage.subtopology in ran:
                return ran[stage.subtopology]
            began = time.perf_counter()
            try:
                return self.execute(batch, stage, executors, assignment, ranges, progress)
            finally:
                execute_ms += (time.perf_counter() - began) * 1000

        began = time.perf_counter()
        committer = self.state.committer
        result = committer.run_stage(
            batch,
            stage.subtopology,
            fix,
            execute,
            self.state.internal_sinks(stage),
            # continuous execution sees every attempt; Spark may retry a pinned task unseen
            others_ran=lambda: self.routes is None or stage.subtopology in self.retried,
        )
        spent = (time.perf_counter() - began) * 1000
        progress.commit_ms += round(spent - execute_ms, 3)
        progress.add_phase("plan", plan_ms)
        progress.add_phase("run", execute_ms)
        progress.add_phase("seal", spent - execute_ms - plan_ms)
        if ran is None:
            progress.resumed = progress.resumed or result.resumed
        if result.offsets is not None:
            self.state.topic_ids.update(result.offsets.topic_ids)
        if self.routes is not None:  # work units that hold their runs until told
            self.routes.settle(committer.winners(result.prepare))
        self.take_over(stage, result.prepare, progress, result.offsets)

    def take_over(
        self,
        stage: Stage,
        prepare: PrepareRecord,
        progress: BatchProgress,
        offsets: OffsetsRecord | None = None,
    ) -> None:
        """Adopt a sealed stage's outcome: task states, owners, reports, progress, metrics."""
        state = self.state
        changelogs = set(stage.changelog_topics.values())
        # task and executor ids are interned: the progress of the last batches keeps them in
        # several maps each, which then share one string instead of one per batch and map
        for task, entry in prepare.tasks.items():
            task, client = sys.intern(task), sys.intern(entry.client)
            state.task_states[task] = TaskCommittedState.from_dict(entry.state)
            progress.owners[task] = client
            state.owners[task] = client
        record_stage_reports(state.reports, stage.task_ids, prepare.reports)
        ranges = offsets.ranges if offsets is not None else {}
        state.metrics.record_stage(ranges, prepare.reports, changelogs)
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

    def execute(
        self,
        batch: int,
        stage: Stage,
        executors: list[ExecutorInfo],
        assignment: Assignment,
        ranges: Ranges,
        progress: BatchProgress | None = None,
    ) -> list[tuple[str, dict[str, Any]]]:
        """Run one stage's work units as one Spark job; see ``execute_stages``."""
        done = self.execute_stages(
            batch, {stage.subtopology: ranges}, executors, assignment, progress
        )
        return done[stage.subtopology]

    def execute_stages(
        self,
        batch: int,
        plans: dict[int, Ranges],
        executors: list[ExecutorInfo],
        assignment: Assignment,
        progress: BatchProgress | None = None,
    ) -> StageReports:
        """Run the work units of every planned stage (``{stage: ranges}``) in one Spark job
        and return each stage's reports (their phases added to ``progress``). A failed job is
        re-planned with the same ranges, up to ``MAX_STAGE_ATTEMPTS`` times; a failure no
        retry can help (user code's, or fatal: ``engine.failures``) is reported at once."""
        last_error: Exception | None = None
        cause: BaseException | None = None
        for attempt in range(MAX_STAGE_ATTEMPTS):
            if attempt:
                self.retried.update(plans)
                assert self.launcher is not None
                executors, assignment = self.placing.place(self.launcher)
                log.warning(
                    "batch %d stage(s) %s: retrying (attempt %d) after: %s",
                    batch,
                    ", ".join(map(str, plans)),
                    attempt + 1,
                    str(last_error).splitlines()[0] if str(last_error) else repr(last_error),
                )
            try:
                unit_ids = self._unit_ids(plans, executors, assignment)
            except LogError as exc:  # the broker, while fencing a moved task's unit: re-plan
                last_error, cause = exc, None
                continue
            units = self._units(batch, plans, executors, assignment, unit_ids)
            try:
                reports = self._run_units(units, executors, assignment)
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
            failures = [
                FailureReport.from_dict(r["failure"]) for _, _, r in results if "failure" in r
            ]
            if not failures:
                if progress is not None:
                    progress.add_work_unit_reports(reports)
                done: StageReports = {sub: [] for sub in plans}
                for sub, client, report in results:
                    done[sub].append((client, report))
                return done
            failure = failures[0]
            last_error, cause = rebuild(failure), RemoteTraceback(failure.trace)
            if self.state.committer.retries(last_error):
                continue
            if failure.fatal:
                raise last_error from cause  # retrying cannot help: report it once
        assert last_error is not None
        raise last_error from cause

    def _units(
        self,
        batch: int,
        plans: dict[int, Ranges],
        executors: list[ExecutorInfo],
        assignment: Assignment,
        unit_ids: dict[UnitKey, str],
    ) -> list[Unit]:
        """The work units of the planned stages, one per slot with tasks of the stage."""
        state = self.state
        units: list[Unit] = []
        for subtopology, ranges in plans.items():
            stage = state.stages[subtopology]
            for executor, slot, actives, standbys in slot_units(assignment, executors, stage):
                spec = WorkUnitSpec(
                    batch,
                    subtopology,
                    executor.id,
                    [
                        ActiveSpec(
                            t,
                            {topic: list(span) for topic, span in ranges[t].items()},
                            (state.task_states.get(t) or TaskCommittedState()).to_dict(),
                        )
                        for t in actives
                    ],
                    standbys,
                    standby_offsets={t: state.committed_offsets(t) for t in standbys},
                    global_ends=state.global_ends,
                    transactional_id=unit_ids.get(UnitKey(executor.id, slot, subtopology)),
                )
                units.append((subtopology, spec.to_dict(), executor, slot))
        return units

    def _run_units(
        self, units: list[Unit], executors: list[ExecutorInfo], assignment: Assignment
    ) -> list[dict[str, Any]]:
        """Run the units where they run and return their reports, in their order."""
        if self.routes is not None:
            return self.routes.run(units, executors, assignment, self.state.stages)
        payloads = [(json.dumps(spec), ex) for _, spec, ex, _ in units]
        assert self.launcher is not None and self.blob is not None
        self.launcher.check_slots_free(self.state.application_id, [(u[2], u[3]) for u in units])
        began = time.monotonic()
        try:
            outputs = run_pinned_watched(self.sc, payloads, make_work(self.blob))
        finally:
            self.pinned_wait_s += time.monotonic() - began
        return [json.loads(out) for out in outputs]

    def _unit_ids(
        self, plans: dict[int, Ranges], executors: list[ExecutorInfo], assignment: Assignment
    ) -> dict[UnitKey, str]:
        """The transactional id of each work unit about to run, if its log has them
        (``BatchCommitter.ids_for_units``)."""

        def units() -> dict[UnitKey, list[str]]:
            return {
                UnitKey(executor.id, slot, sub): actives
                for sub in plans
                for executor, slot, actives, _ in slot_units(
                    assignment, executors, self.state.stages[sub]
                )
                if actives
            }

        return self.state.committer.ids_for_units(units)

    def _await_executors_gone(self, executors: frozenset[str]) -> None:
        """After losing work units, wait briefly for Spark to drop their executors if they
        died (it takes up to about half a second), so the retry does not pin work to them.
        An executor still listed after ``EXECUTOR_LOSS_WAIT_S`` lost only a worker."""
        deadline = time.monotonic() + EXECUTOR_LOSS_WAIT_S
        while executors and time.monotonic() < deadline:
            assert self.launcher is not None
            if not executors & {e.id for e in self.launcher.executors()}:
                return
            time.sleep(0.05)


def _explain(exc: Exception) -> StreamtideError:
    """The error for a failed Spark job: a worker or executor died (work units report their
    own errors instead of failing), so only Spark's summary is known; the end of its trace
    becomes the cause."""
    first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return StreamtideError(f"the stage's Spark job failed: {first}")
