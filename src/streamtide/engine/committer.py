"""The driver's side of the commit protocol, independent of Spark.

``BatchCommitter`` runs one stage of a batch through the protocol records of
``engine.protocol``: fix and record the input ranges, run the tasks (a callable: Spark in the
engine, in-process work units in tests), record the prepare, seal exactly what it names, and
record the seal; then the batch's commit. Whatever it finds in the application directory it
continues from there (``protocol.stage_step``), so a driver that died after any write, or an
older driver it took over from, leaves nothing a new driver cannot finish. Unsealed segments
of attempts that did not win are deleted once the decision is recorded, and again on restart.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from streamtide.engine import protocol
from streamtide.engine.app_dir import AppDirectory
from streamtide.engine.interleave import interleave_segments
from streamtide.engine.protocol import (
    CommitRecord,
    OffsetsRecord,
    PrepareRecord,
    Ranges,
    SealRecord,
    StageStep,
    UnitReport,
)
from streamtide.engine.unit_ids import UnitKey
from streamtide.errors import CorruptLogError, StreamtideError
from streamtide.log.api import Log, SegmentRef
from streamtide.log.errors import SealConflictError, SegmentError
from streamtide.runtime.committed import TaskCommittedState
from streamtide.runtime.work_unit import writer_prefix

log = logging.getLogger(__name__)

#: Runs a stage's tasks on the recorded ranges: ``[(client, work-unit report dict), ...]``.
Execute = Callable[[Ranges], Sequence[tuple[str, dict[str, Any]]]]
#: Fixes a stage's input ranges: ``(ranges, topic ids of the source topics)``.
FixRanges = Callable[[], tuple[Ranges, dict[str, str]]]


class SealFailedError(StreamtideError):
    """A prepared segment could not be sealed: the log lost or damaged it."""


@dataclass(frozen=True)
class StageResult:
    """A stage's winning prepare, and whether this driver found it already under way."""

    prepare: PrepareRecord
    offsets: OffsetsRecord | None
    resumed: bool


@dataclass(frozen=True)
class PlannedStage:
    """A stage's recorded input ranges if it still has to run (None: already prepared), and
    whether an earlier driver had got it under way."""

    offsets: OffsetsRecord | None
    resumed: bool


class BatchCommitter:
    """Moves stages and batches through the protocol for one driver epoch."""

    def __init__(self, app_dir: AppDirectory, log_: Log, application_id: str) -> None:
        self.app_dir = app_dir
        self.log = log_
        self.application_id = application_id

    @property
    def epoch(self) -> int:
        if self.app_dir.epoch is None:
            raise StreamtideError("the committer has no epoch: call start() first")
        return self.app_dir.epoch

    def start(self) -> CommitRecord | None:
        """Take a new epoch (fencing every older driver), delete what losing attempts of the
        committed batches left behind, and return the last commit (None: a new app)."""
        self.app_dir.take_epoch()
        last = self.app_dir.last_committed()
        if last is not None:
            self.sweep_committed(last.batch)
        return last

    def resume_states(
        self, last: CommitRecord | None, sources: Callable[[], dict[str, list[tuple[str, int]]]]
    ) -> dict[str, TaskCommittedState]:
        """The task states a starting driver holds before its first batch: the last commit's
        (``sources()``, each task's source partitions, is for logs that hold task states
        themselves)."""
        if last is None:
            return {}
        return {t: TaskCommittedState.from_dict(s) for t, s in last.tasks.items()}

    def sweep_committed(self, last_batch: int) -> int:
        """Delete the unsealed segments of every batch up to ``last_batch`` (all decided:
        whatever of them is unsealed now lost, e.g. a late speculative attempt)."""
        removed = 0
        for topic in self.log.list_topics():
            for partition in range(self.log.partitions(topic)):
                try:
                    unsealed = self.log.list_unsealed(topic, partition)
                except SegmentError as exc:  # a damaged leftover must not stop a restart
                    log.warning("cannot list unsealed segments of %s/%d: %s", topic, partition, exc)
                    continue
                for ref in unsealed:
                    batch = protocol.batch_of_writer(self.application_id, ref.writer_id)
                    if batch is not None and batch <= last_batch:
                        self.log.abort_unsealed(topic, partition, ref)
                        removed += 1
        removed += self.log.abort_unsealed_shared(
            lambda writer: (
                (batch := protocol.batch_of_writer(self.application_id, writer)) is not None
                and batch <= last_batch
            )
        )
        if removed:
            log.info("deleted %d unsealed segment(s) of attempts that did not win", removed)
        return removed

    def sweep(self, prefix: str, topics: Iterable[str] | None = None) -> int:
        """Delete unsealed segments whose writer id starts with ``prefix``."""
        removed = self.log.abort_unsealed_by_prefix(prefix, topics=topics)
        if removed:
            log.info("deleted %d unsealed segment(s) of attempts under %s", removed, prefix)
        return removed

    def plan_stage(self, batch: int, stage: int, fix_ranges: FixRanges) -> PlannedStage:
        """Make sure the stage's input ranges are recorded (fixing them if not yet); return
        them when the stage still has to run (its prepare is not recorded), else None."""
        offsets, _, step, resumed = self._ranges_recorded(batch, stage, fix_ranges)
        return PlannedStage(offsets if step is StageStep.RUN else None, resumed)

    def _ranges_recorded(
        self, batch: int, stage: int, fix_ranges: FixRanges
    ) -> tuple[OffsetsRecord | None, PrepareRecord | None, StageStep, bool]:
        """Read where the stage stands; if no ranges are recorded, fix and record them.
        Returns offsets, prepare, the next step and whether an earlier driver had begun."""
        offsets = self.app_dir.read_offsets(batch, stage)
        prepare = self.app_dir.read_prepare(batch, stage)
        seal = self.app_dir.read_seal(batch, stage)
        step = protocol.stage_step(offsets, prepare, seal)
        resumed = step is not StageStep.FIX_RANGES
        if step is StageStep.FIX_RANGES:
            ranges, topic_ids = fix_ranges()
            offsets = self.app_dir.create_offsets(
                OffsetsRecord(batch, stage, self.epoch, ranges, topic_ids)
            )
            step = StageStep.RUN
        return offsets, prepare, step, resumed

    def run_stage(
        self,
        batch: int,
        stage: int,
        fix_ranges: FixRanges,
        execute: Execute,
        internal_sinks: Sequence[str] = (),
        others_ran: Callable[[], bool] = lambda: True,
    ) -> StageResult:
        """Bring one stage of ``batch`` to sealed, from wherever the directory says it is.

        ``others_ran`` tells, once ``execute`` returned, whether attempts besides the ones
        it reports may have written segments (a retry, or retries the caller cannot see):
        only then are the stage's unsealed segments looked for and deleted after the seal,
        which lists every partition of the log. A stage whose ranges an earlier driver fixed
        is always swept."""
        offsets, prepare, step, resumed = self._ranges_recorded(batch, stage, fix_ranges)
        sweep = True
        if step is StageStep.RUN:
            assert offsets is not None
            prepare = self._run(batch, stage, offsets, execute, internal_sinks)
            step = StageStep.SEAL
            sweep = offsets.epoch != self.epoch or others_ran()
        assert prepare is not None
        if step is StageStep.SEAL:
            self._seal(prepare, sweep=sweep)
        elif step is StageStep.DONE:  # sealed by a driver that may have died before sweeping
            self.sweep(writer_prefix(self.application_id, batch, stage))
        return StageResult(prepare, offsets, resumed)

    def _run(
        self,
        batch: int,
        stage: int,
        offsets: OffsetsRecord,
        execute: Execute,
        internal_sinks: Sequence[str],
    ) -> PrepareRecord:
        units = execute(offsets.ranges)
        raw = {
            r["task"]: {
                "segments": list(r["segments"]),
                "state": r["state"],
                "client": client,
                "writer": r.get("writer"),
            }
            for client, unit in units
            for r in unit["tasks"]
        }
        attempt = protocol.attempt_id(self.epoch, uuid.uuid4().hex[:8])
        prefix = writer_prefix(self.application_id, batch, stage)
        merged = self._merge(raw, internal_sinks, f"{prefix}merged/{attempt}/")
        record = PrepareRecord(
            batch=batch,
            stage=stage,
            epoch=self.epoch,
            attempt=attempt,
            tasks={t: protocol.prepared_task(t, entry) for t, entry in raw.items()},
            merged=tuple(SegmentRef.from_dict(s) for s in merged),
            reports=tuple(UnitReport.from_dict({**unit, "client": c}) for c, unit in units),
        )
        return self.app_dir.create_prepare(record)

    def _merge(
        self, raw: dict[str, dict[str, Any]], internal_sinks: Sequence[str], writer: str
    ) -> list[dict[str, Any]]:
        """Merge each repartition partition's segments of the stage into one, by timestamp
        (``engine.interleave``); the merged segments replace the tasks' own."""
        return interleave_segments(self.log, raw, internal_sinks, writer)

    def _seal(self, prepare: PrepareRecord, *, sweep: bool = True) -> None:
        self.app_dir.check_fence()
        seals = prepare.seals(self.application_id)
        try:
            # one call for the whole stage: the file log seals each topic's partitions with
            # one durable group of manifest entries (its topics of earlier releases: one
            # seal journal record) instead of an entry file per partition
            self.log.seal_many(seals)
        except CorruptLogError:
            raise
        except SegmentError as exc:
            kind = (
                "conflicts with an earlier seal" if isinstance(exc, SealConflictError) else "failed"
            )
            raise SealFailedError(
                f"batch {prepare.batch} stage {prepare.stage}: sealing its segments {kind}: {exc}"
            ) from exc
        self.app_dir.create_seal(
            SealRecord(prepare.batch, prepare.stage, self.epoch, prepare.attempt)
        )
        if sweep:
            self.sweep(writer_prefix(self.application_id, prepare.batch, prepare.stage))

    # ---- what the driver asks of either log (``engine.kafka_committer`` on Kafka) ------

    def fence_work_units(self, task_ids: Iterable[str]) -> None:
        """Fence what work units of earlier drivers may still hold open: nothing on the file
        log (a segment is only a candidate until this driver seals it)."""

    def begin_batch(self, batch: int) -> None:
        """Before a batch does any work: nothing on the file log, whose fence is checked
        before every record this driver writes."""

    def units_launched(self) -> None:
        """Long-running work units were launched since the last run, and are about to get
        their first: nothing on the file log."""

    def held_states(
        self, sources: Callable[[], dict[str, list[tuple[str, int]]]]
    ) -> dict[str, TaskCommittedState] | None:
        """The task states the log holds, to plan a stage from (``sources()``: the stage's
        tasks' source partitions); None: the driver's own records are the truth."""
        return None

    def input_ends(
        self, keys: Sequence[tuple[str, int]], repartition_topics: set[str]
    ) -> tuple[dict[tuple[str, int], int], set[str]]:
        """How far each source partition of a stage can be read this batch, and the topics
        read whole (not capped nor cut at one event time): every end offset, none whole."""
        return self.log.end_offsets(keys), set()

    def changed_sources(
        self,
        positions: dict[tuple[str, int], tuple[int | None, int]],
        begins: dict[tuple[str, int], int],
    ) -> dict[tuple[str, int], Any]:
        """The source partitions (``{partition: (committed offset, end offset)}``, with their
        begin offsets) re-created since their tasks read them, each with what tells it
        (something with ``describe()``): none here, the file log tells a re-created topic by
        its topic id."""
        return {}

    def adopt_resets(
        self,
        moved: dict[str, set[str]],
        windows: dict[tuple[str, int], tuple[int, int]],
        states: dict[str, TaskCommittedState],
        sources: Callable[[], dict[str, list[tuple[str, int]]]],
    ) -> None:
        """Offsets ``auto_offset_reset`` moved (``{task: {"topic:partition"}}``, the new start
        in ``windows``): on the file log the run's committed state records them."""

    def ids_for_units(self, units: Callable[[], dict[UnitKey, list[str]]]) -> dict[UnitKey, str]:
        """The transactional id of each work unit about to run (``units()``: its active
        tasks by slot and stage): none on the file log."""
        return {}

    def winners(self, prepare: PrepareRecord) -> dict[str, str]:
        """The writer id that won for each task of a sealed stage, for work units that hold
        their runs until told (``TaskHost.settle``)."""
        return {t: e.writer for t, e in prepare.tasks.items() if e.writer is not None}

    def retries(self, error: BaseException) -> bool:
        """Whether a work unit's failure with ``error`` is retried whatever it is: no."""
        return False

    def after_commit(self, consumed: Callable[[], dict[tuple[str, int], int]]) -> None:
        """Housekeeping after a batch's commit (``consumed()``: the committed offset of each
        repartition partition): none on the file log, whose segments are truncated by
        their readers' snapshots."""

    def close(self) -> None:
        """Release the committer's resources (none are held between batches)."""

    def check_fence(self) -> None:
        """Raise ``FencedError`` if another instance of the application took over."""
        self.app_dir.check_fence()

    def commit(self, record: CommitRecord) -> CommitRecord:
        """Record the batch's commit (or adopt the one an older driver recorded first)."""
        return self.app_dir.create_commit(record)
