"""``BatchLoop``: the driver's batches, one after another, in the foreground or in a thread.

One batch (docs/engine.md, "One batch"): check the driver's fence, place the tasks
(``engine.placing``), run every stage to sealed (``engine.stage_runner``), measure the lags,
record the assignment, commit the batch (``BatchCommitter.commit``) and its history. Batches
of one application never overlap: a lock admits one at a time, and the background loop runs
one whenever input is waiting or a wall-clock punctuator is due."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import cast

from streamtide.engine.batch_size import BatchSizeController
from streamtide.engine.cyclic_gc import cyclic_gc_paused
from streamtide.engine.driver_state import DriverState
from streamtide.engine.global_offsets import global_ends
from streamtide.engine.input_ranges import InputRanges, due_now
from streamtide.engine.placing import Placing
from streamtide.engine.progress import BatchProgress, RunningBatch
from streamtide.engine.protocol import CommitRecord
from streamtide.engine.stage_runner import StageReports, StageRunner
from streamtide.errors import StreamtideError

log = logging.getLogger("streamtide.engine")


class BatchLoop:
    """Runs and commits the batches of one application (see the module docstring).

    ``ready`` makes sure the application is started before a batch; ``replan`` follows
    pattern sources to the topics they match now (between batches)."""

    def __init__(
        self,
        state: DriverState,
        inputs: InputRanges,
        placing: Placing,
        runner: StageRunner,
        batch_size: BatchSizeController,
        ready: Callable[[], None],
        replan: Callable[[], None],
    ) -> None:
        self.state = state
        self.inputs = inputs
        self.placing = placing
        self.runner = runner
        self.batch_size = batch_size
        self._ready = ready
        self._replan = replan
        self.next_batch = 0
        self.history: deque[BatchProgress] = deque(maxlen=100)
        #: The batch being run, if any (read by progress displays from other threads).
        self.running: RunningBatch | None = None
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.completed = 0
        self._stop = threading.Event()
        self.lock = threading.Lock()  # one batch loop per application, ever
        self.done = threading.Condition()

    # ---- the background loop -------------------------------------------------------------

    def start(self) -> None:
        """Run batches in a background thread until ``stop``."""
        if self.thread is None:
            self._stop.clear()
            self.thread = threading.Thread(target=self._loop, name="streamtide-driver", daemon=True)
            self.thread.start()

    def _loop(self) -> None:
        interval = cast(float, self.state.config.commit_interval) / 1000  # ms once configured
        inputs = self.inputs
        ran = False
        waiting: bool | None = None  # known right after a batch: not asked again at once
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                if waiting is None:
                    waiting = inputs.waiting()
                if not ran or waiting or due_now(inputs.next_wall_clock_punctuation()):
                    self.run_batch()
                    ran = True
                    waiting = inputs.waiting()
                    if waiting:
                        continue  # the next batch at once
                if not waiting:  # idle: no Spark job until input arrives or a punctuator is due
                    pause = interval - (time.monotonic() - began)
                    due = inputs.next_wall_clock_punctuation()
                    if due is not None:
                        pause = min(pause, due / 1000 - time.time())
                    self._stop.wait(max(0.0, pause))
                waiting = None
        except BaseException as exc:  # reported by await_termination
            self.error = exc
            log.error("application %s stopped: %s", self.state.application_id, exc)

    def stop(self) -> None:
        """Stop after the running batch."""
        self._stop.set()
        if self.thread is not None:
            self.thread.join()
            self.thread = None

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until the loop stops (True) or ``timeout`` passes (False); re-raise its error."""
        if self.thread is not None:
            self.thread.join(timeout)
        if self.error is not None:
            raise self.error
        return not self.alive()

    # ---- waiting for batches -------------------------------------------------------------

    def run_until_caught_up(
        self, timeout: float | None = None, max_batches: int = 10_000
    ) -> list[BatchProgress]:
        """Run batches until no input is waiting (at least one batch); on a loop running in
        the background, wait for it instead: one application never runs two batch loops."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.alive():
            return self._await_caught_up(deadline, timeout)
        done = [self.run_batch()]
        while self.inputs.waiting() and len(done) < max_batches:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"input still waiting after {timeout} s")
            done.append(self.run_batch())
        return done

    def _moved_on(self, seen: int) -> bool:
        """Whether a batch completed since ``seen`` batches, or the loop failed."""
        return self.completed > seen or self.error is not None

    def _await_caught_up(
        self, deadline: float | None, timeout: float | None
    ) -> list[BatchProgress]:
        """Wait until the background loop has run a batch and no input is waiting."""
        first = seen = self.completed
        while True:
            with self.done:
                self.done.wait_for(partial(self._moved_on, seen), timeout=0.5)
                now = self.completed
            if self.error is not None:
                raise self.error
            if now > seen:
                seen = now
                with self.lock:  # between two batches of the loop
                    if not self.inputs.waiting():
                        return list(self.history)[-min(now - first, len(self.history)) :]
            elif not self.alive():
                raise StreamtideError(
                    f"application {self.state.application_id!r} stopped while waiting for it "
                    "to catch up"
                )
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"input still waiting after {timeout} s")

    def await_first_batch(self, timeout: float = 300.0) -> None:
        """An app just started in the background has not placed its tasks yet: wait for its
        first batch."""
        if self.thread is None or self.completed:
            return
        with self.done:
            self.done.wait_for(
                lambda: (
                    self.completed > 0
                    or self.error is not None
                    or self.thread is None
                    or not self.thread.is_alive()
                ),
                timeout=timeout,
            )

    def await_next_batch(self, timeout: float) -> None:
        """Wait for a batch that starts from now on (run one if the loop does not run)."""
        if not self.alive():
            self.run_batch()
            return
        with self.done:
            target = self.completed + (2 if self.running is not None else 1)
            if not self.done.wait_for(
                lambda: self.completed >= target or self.error is not None, timeout
            ):
                raise TimeoutError(f"no batch completed within {timeout:.0f} s")
        if self.error is not None:
            raise self.error

    # ---- one batch -----------------------------------------------------------------------

    def run_batch(self) -> BatchProgress:
        """Plan, run and commit one batch (after the running one, if the loop runs in the
        background: batches of one application never overlap)."""
        self._ready()
        with self.lock, cyclic_gc_paused():
            self._replan()
            self.running = RunningBatch(self.next_batch, time.monotonic(), len(self.state.stages))
            try:
                progress = self._run_batch()
            finally:
                self.running = None
        with self.done:
            self.completed += 1
            self.done.notify_all()
        return progress

    def _run_batch(self) -> BatchProgress:
        state, placing, runner = self.state, self.placing, self.runner
        batch = self.next_batch
        started = time.perf_counter()
        waited = runner.work_unit_wait_s()
        runner.retried = set()
        progress = BatchProgress(batch)
        state.committer.begin_batch(batch)  # a newer driver took over: stop before work
        assert runner.launcher is not None
        executors = placing.live_executors(runner.launcher)
        placing.note_standby_shortfall(executors, progress)
        assignment = placing.assign(executors)
        placing.executors, placing.assignment = executors, assignment
        state.global_ends = global_ends(
            state.app_dir, state.log, state.topology, state.application_id, batch
        )
        if self.running is not None:
            self.running.restore_planned = placing.restore_bound(assignment)
        progress.add_phase("plan", (time.perf_counter() - started) * 1000)
        ran: StageReports | None = None
        if state.config.stages_in_one_job and len(state.stages) > 1:
            ran = runner.run_all_stages(batch, executors, assignment, progress, self.running)
        for stage in state.stages:
            stage_started = time.perf_counter()
            runner.run_stage(batch, stage, executors, assignment, progress, self.running, ran)
            progress.stage_ms.append(round((time.perf_counter() - stage_started) * 1000, 3))
            if self.running is not None:
                self.running.stages_done += 1
                self.running.records_done = progress.input_records
                self.running.restored_done = progress.restored_records
        # a retried stage may have re-assigned (an executor died during the batch)
        executors, assignment = placing.executors, placing.assignment
        assert assignment is not None
        lags = self.inputs.source_lags()
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
        progress.work_unit_wait_ms = round((runner.work_unit_wait_s() - waited) * 1000, 3)
        self.batch_size.observe(progress.duration_ms, self.inputs.batch_full)
        self.inputs.batch_full = False
        records_started = time.perf_counter()
        placing.write_records(batch, executors, assignment)
        commit_started = time.perf_counter()
        progress.committed_at = round(time.time() * 1000)
        state.committer.commit(
            CommitRecord(
                batch=batch,
                epoch=state.committer.epoch,
                tasks={t: s.to_dict() for t, s in state.task_states.items()},
                owners=progress.owners,
                progress=progress.as_dict(),
                assignment=assignment.describe()
                if hasattr(assignment, "describe")
                else str(assignment),
                topic_ids=dict(state.topic_ids),
            )
        )
        state.committer.after_commit(self.inputs.repartition_consumed)
        progress.commit_ms += round((time.perf_counter() - commit_started) * 1000, 3)
        progress.add_phase("commit", (time.perf_counter() - records_started) * 1000)
        placing.record_history(progress, executors, assignment)
        elapsed = time.perf_counter() - started
        state.metrics.record_batch(
            elapsed,
            progress.commit_ms / 1000,
            partition_lags,
            progress.owners,
            driver_s=elapsed - (runner.work_unit_wait_s() - waited),
        )
        self.next_batch = batch + 1
        self.history.append(progress)
        log.info("%s %s", state.application_id, progress.summary())
        if batch % 50 == 0:
            state.app_dir.prune()
        return progress
