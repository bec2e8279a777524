"""The driver's side of the commit protocol on a Kafka log.

On the file log the driver seals what the tasks wrote. On Kafka each task commits itself, in
its own transaction (``runtime.kafka_task_commit``), so the driver keeps the protocol's
records (offsets, prepare, seal, commit) as the account of what it planned and what
happened, and Kafka's committed offsets of the group ``<application_id>`` are the truth:

- ranges are fixed from the task states Kafka holds (``committed_states``);
- a stage's prepare records the tasks' reports once every task has committed, and its seal
  record follows with nothing to seal;
- a driver that resumes a stage re-runs it with the recorded ranges: the tasks whose
  transactions committed find their offsets past the ranges and commit nothing again;
- each work unit commits all its tasks in one transaction of its own producer; the driver
  hands out and records the units' transactional ids and fences those that may still hold a
  task that moved (``engine.unit_ids``);
- starting, the driver initialises every work-unit transactional id its predecessors left
  unfenced (and, the first time, every task's id of releases that had a producer per task),
  which fences the work units of any earlier driver and aborts what they left open (some
  brokers never time out a transaction whose producer died, and readers of its partitions
  would wait for it);
- after each batch the repartition records every consumer has committed are purged with
  ``delete_records``, as Kafka Streams does;
- a stage reading a repartition topic waits (briefly) until the earlier batch's committed
  transactions are readable there (``settled_end``): a broker writes a transaction's commit
  markers after the producer's commit returns, and until then the last stable offset hides
  the records of some writers while others' are visible. Reading the visible ones alone would
  put a batch's records of one writer after later ones of another, and stream time would
  jump ahead of them (dedup and windows would see them late).

Drivers are fenced through Kafka too, so that two drivers of one application on different
machines (each with its own application directory) cannot both go on: a starting driver
initialises the transactional id ``<application_id>-driver`` and then every work-unit id its
predecessors recorded, so an older driver's work units can commit nothing more with the
producers they hold. ``check_fence`` writes a small record in a transaction of the driver's
producer to ``_streamtide-drivers``: an older driver fails there with ``FencedError``. It runs
before any work unit may initialise a producer for an id: a new producer of an id that a
newer driver fenced would fence that driver's fence in turn. Long-running work units
(continuous execution) keep their producers from one batch to the next, so the check runs
only before units launched since the last run get their first run (``units_launched``),
before a retry (a failed unit drops its producer) and before new ids are recorded; in
micro-batch execution, whose units create their producers anew every batch, and without
transactions (``at_least_once``), before every batch. A batch in which no unit committed
a transaction checks too, before its commit record, so that an idle older driver stops as
well; and so does a driver about to commit offsets itself (``auto_offset_reset``). A driver
whose work unit was fenced while its own producer was not retries the stage instead: the
unit's new producer fences the older one's.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from streamtide.engine.app_dir import AppDirectory
from streamtide.engine.committer import BatchCommitter
from streamtide.engine.protocol import CommitRecord, PrepareRecord, SealRecord
from streamtide.engine.unit_ids import UnitIds, UnitKey
from streamtide.errors import FencedError
from streamtide.log.api import Log
from streamtide.log.errors import LogError, ProducerFencedError
from streamtide.log.kafka_group import GroupOffsets
from streamtide.log.kafka_transaction import KafkaTransaction
from streamtide.log.source_marks import SourceMark, marks_hold
from streamtide.runtime.committed import TaskCommittedState, offset_key
from streamtide.runtime.kafka_task_commit import (
    decode_committed,
    encode_metadata,
    task_transactional_id,
)

log = logging.getLogger(__name__)

#: How long a stage waits for committed transactions to become readable (``settled_end``).
SETTLE_WAIT_S = 5.0
#: Transactional ids a driver initialises at once (``fence_ids``).
FENCE_THREADS = 16
#: Repartition records are purged at most this often (Kafka Streams' default
#: ``repartition.purge.interval.ms``): each purge is a few requests to every broker.
PURGE_INTERVAL_S = 30.0

#: Where drivers record their batch commits, in transactions that fence older drivers.
DRIVERS_TOPIC = "_streamtide-drivers"
DRIVERS_CONFIGS = {"cleanup.policy": "compact"}
#: Where drivers record the work units' transactional ids (``engine.unit_ids``), in
#: transactions of their fencing producers: a fenced driver cannot hand out an id unseen.
UNIT_IDS_TOPIC = "_streamtide-unit-ids"


class KafkaBatchCommitter(BatchCommitter):
    """``BatchCommitter`` for a Kafka log (see the module docstring)."""

    def __init__(self, app_dir: AppDirectory, log_: Log, application_id: str) -> None:
        super().__init__(app_dir, log_, application_id)
        # Kafka's offsets and transactions decide every batch; the driver's records of them
        # are its account (a restart re-checks them against Kafka), written without fsyncs
        app_dir.sync_batches = False
        self._group: GroupOffsets | None = None
        self._purged: dict[tuple[str, int], int] = {}
        self._purge_due = 0.0  # time.monotonic() of the next purge
        self._fence: KafkaTransaction | None = None
        self._driver = f"{socket.gethostname()}:{os.getpid()}"
        #: marks committed with the task states (``"topic:partition"`` -> the last record read)
        self.marks: dict[str, SourceMark] = {}
        self._verified: dict[str, tuple[SourceMark, int]] = {}  # checked at that end offset
        #: the work units' transactional ids (``fence_work_units`` creates it)
        self.unit_ids: UnitIds | None = None
        #: whether work units commit in transactions (``exactly_once``) with producers they
        #: keep from one batch to the next (continuous execution): see the module docstring
        self.units_fence = True
        self._proved = False  # a work unit's transaction committed in this batch
        self._fenced: FencedError | None = None  # how the driver's producer was fenced

    @property
    def group(self) -> GroupOffsets:
        if self._group is None:
            self._group = GroupOffsets(self.log, self.application_id)
        return self._group

    def start(self) -> CommitRecord | None:
        """Take a new epoch here and in Kafka (fencing older drivers' producers); the tasks'
        producers are fenced by ``fence_tasks``."""
        self.app_dir.take_epoch()
        self.log.create_topic(DRIVERS_TOPIC, 1, exist_ok=True, configs=DRIVERS_CONFIGS)
        self.log.create_topic(UNIT_IDS_TOPIC, 1, exist_ok=True, configs=DRIVERS_CONFIGS)
        where = f"the driver of application {self.application_id!r}"
        self._fence = KafkaTransaction(self.log, f"{self.application_id}-driver", where)
        return self.app_dir.last_committed()

    def check_fence(self, batch: int | None = None) -> None:
        """The application directory's check, then a transaction of this driver's fencing
        producer: ``FencedError`` if a newer driver initialised it."""
        super().check_fence()
        if self._fence is None:
            return
        value = {"driver": self._driver, "epoch": self.epoch, "batch": batch}
        self._write_fenced(DRIVERS_TOPIC, self.application_id, value)

    def _write_fenced(self, topic: str, key: str, value: dict[str, Any]) -> None:
        """Write one record in a transaction of this driver's fencing producer:
        ``FencedError`` if a newer driver initialised it."""
        assert self._fence is not None
        if self._fenced is not None:  # the producer is unusable once fenced: say so again
            raise self._fenced
        try:
            self._fence.begin()
            self._fence.produce(
                topic, 0, key.encode(), json.dumps(value).encode(), int(time.time() * 1000)
            )
            self._fence.commit()
        except ProducerFencedError as exc:
            self._fenced = FencedError(
                f"another instance of application {self.application_id!r} took over (Kafka "
                f"fenced this driver's producer): this one stops ({exc})"
            )
            raise self._fenced from exc

    def fence_work_units(self, task_ids: Iterable[str]) -> None:
        """Fence every work-unit transactional id an earlier driver recorded and did not
        fence, and start the ids of this driver's work units (``engine.unit_ids``). The first
        time (nothing recorded), the per-task ids of releases with a producer per task
        (``task_ids``' ids) are fenced instead: they may hold open transactions."""
        saved = self._saved_unit_ids()
        if saved is None:
            app = self.application_id
            self.fence_ids([task_transactional_id(app, task) for task in task_ids])
        self.unit_ids = UnitIds(self.application_id, saved, self._record_unit_ids, self.fence_ids)
        self.unit_ids.start()

    def _saved_unit_ids(self) -> dict[str, Any] | None:
        """The ids recorded in the application directory and in Kafka (a driver on another
        machine has another directory): every unfenced id of either, the higher generation."""
        found = [d for d in (self.app_dir.read_unit_ids(), self._kafka_unit_ids()) if d]
        if not found:
            return None
        merged: dict[str, Any] = {"generations": {}, "unfenced": {}}
        for data in found:
            for key, gen in data.get("generations", {}).items():
                merged["generations"][key] = max(gen, merged["generations"].get(key, gen))
            merged["unfenced"].update(data.get("unfenced", {}))
        return merged

    def _kafka_unit_ids(self) -> dict[str, Any] | None:
        """The last ids record of this application in ``UNIT_IDS_TOPIC`` (written only when
        ids change), or None."""
        key = f"{self.application_id}/unit-ids".encode()
        begin, end = (
            self.log.begin_offset(UNIT_IDS_TOPIC, 0),
            self.log.end_offset(UNIT_IDS_TOPIC, 0),
        )
        found = None
        if end > begin:
            for record in self.log.read(UNIT_IDS_TOPIC, 0, begin, end):
                if record.key == key and record.value is not None:
                    found = record.value
        return json.loads(found) if found is not None else None

    def _record_unit_ids(self, data: dict[str, Any]) -> None:
        """Record the ids in the application directory and, in a transaction of this driver's
        fencing producer, in Kafka: a driver that was taken over fails here
        (``FencedError``) before any work unit uses an id it did not record."""
        self.app_dir.write_unit_ids(data)
        if self._fence is not None:
            self._write_fenced(UNIT_IDS_TOPIC, f"{self.application_id}/unit-ids", data)

    def fence_ids(self, transactional_ids: Sequence[str]) -> None:
        """Initialise each transactional id: its earlier producers are fenced and what they
        left open is aborted. Each id is a producer and a few round trips of its own, so
        ``FENCE_THREADS`` of them are initialised at once (an application of a thousand
        partitions, the first time, has thousands of task ids)."""
        ids = list(transactional_ids)
        if len(ids) <= 1:
            for tid in ids:
                self._fence_id(tid)
            return
        with ThreadPoolExecutor(FENCE_THREADS, thread_name_prefix="streamtide-fence") as pool:
            for future in [pool.submit(self._fence_id, tid) for tid in ids]:
                future.result()

    def _fence_id(self, transactional_id: str) -> None:
        where = f"producer {transactional_id!r} of application {self.application_id!r}"
        try:
            KafkaTransaction(self.log, transactional_id, where).close()
        except ProducerFencedError as exc:
            raise FencedError(
                f"{where}: another instance of the application fenced this driver ({exc})"
            ) from exc

    def resume_states(
        self, last: CommitRecord | None, sources: Callable[[], dict[str, list[tuple[str, int]]]]
    ) -> dict[str, TaskCommittedState]:
        """The last commit's task states; for a driver without one (a new application
        directory, or a first batch that never committed), what Kafka holds."""
        if last is not None:
            return super().resume_states(last, sources)
        return self.committed_states(sources())

    def committed_states(
        self, sources: dict[str, list[tuple[str, int]]]
    ) -> dict[str, TaskCommittedState]:
        """The state Kafka holds for each task (``{task: its source partitions}``); tasks
        that never committed are left out. Keeps the marks committed with them (``marks``)."""
        found = self.group.committed([tp for tps in sources.values() for tp in tps])
        states = {}
        for task, partitions in sources.items():
            mine = {tp: found[tp] for tp in partitions if tp in found}
            where = f"task {task} of application {self.application_id!r}"
            for topic, partition in partitions:
                self.marks.pop(offset_key(topic, partition), None)
            state, marks = decode_committed(mine, where)
            self.marks.update(marks)
            if state is not None:
                states[task] = state
        return states

    def changed_sources(
        self,
        positions: dict[tuple[str, int], tuple[int | None, int]],
        begins: dict[tuple[str, int], int],
    ) -> dict[tuple[str, int], SourceMark]:
        """The marks of the source partitions (``{partition: (committed, end offset)}``) that
        no longer hold the record the task read last before its committed offset (the topic
        was deleted and re-created). Checked when the driver first sees a partition and
        whenever its end offset moved, all partitions at once (``marks_hold``): a run never
        reads a re-created topic from the old offset."""
        due: dict[tuple[str, int], SourceMark] = {}
        for (topic, partition), (committed, end) in positions.items():
            key = offset_key(topic, partition)
            mark = self.marks.get(key)
            if mark is None or committed is None or self._verified.get(key) == (mark, end):
                continue  # nothing to check, or checked at this end offset already
            due[(topic, partition)] = mark
        ends = {tp: positions[tp][1] for tp in due}
        lost = {}
        for tp, holds in marks_hold(self.log, due, begins, ends).items():
            if holds is False:
                lost[tp] = due[tp]
            else:
                self._verified[offset_key(*tp)] = (due[tp], ends[tp])
        return lost

    def commit_reset(
        self,
        task: str,
        partitions: Sequence[tuple[str, int]],
        state: TaskCommittedState,
        moved: set[str],
    ) -> None:
        """Commit a task state whose offsets ``auto_offset_reset`` moved (a re-created or
        truncated input topic), before the stage runs: a run starts at Kafka's committed
        offsets, as a consumer's reset becomes its position. The ``moved`` partitions
        (``"topic:partition"``) lose their marks."""
        where = f"task {task} of application {self.application_id!r}"
        for key in moved:
            self.marks.pop(key, None)
        keys = {offset_key(topic, partition) for topic, partition in partitions}
        metadata = encode_metadata(state, {k: m for k, m in self.marks.items() if k in keys})
        offsets = {
            (topic, partition): (state.offsets[offset_key(topic, partition)], metadata)
            for topic, partition in partitions
            if offset_key(topic, partition) in state.offsets
        }
        log.warning("%s: committing the offsets auto_offset_reset chose: %s", where, offsets)
        self.check_fence()  # a driver taken over must not move the offsets its successor reads
        self.group.commit(offsets)

    def settled_end(self, topic: str, partition: int) -> int:
        """The last stable offset of a repartition partition once no transaction is open on
        it (``settled_ends`` of one partition)."""
        return self.settled_ends([(topic, partition)])[(topic, partition)]

    def settled_ends(
        self,
        partitions: Iterable[tuple[str, int]],
        ends: dict[tuple[str, int], int] | None = None,
    ) -> dict[tuple[str, int], int]:
        """The last stable offset of each repartition partition once no transaction is open
        on it (every writer of the application committed or aborted before the stage began);
        after ``SETTLE_WAIT_S`` whatever is stable then (a writer that never ended its
        transaction is fenced and aborted by the task's next owner). Asks for all of them at
        once (``ends``: their last stable offsets asked for already), and again for those
        still unsettled."""
        wanted = list(partitions)
        ends = {k: ends[k] for k in wanted} if ends is not None else self.log.end_offsets(wanted)
        deadline = time.monotonic() + SETTLE_WAIT_S
        pause = 0.002
        open_ = wanted
        while open_:
            written = self.log.high_watermarks(open_)  # type: ignore[attr-defined]
            open_ = [key for key in open_ if ends[key] < written[key]]
            if not open_:
                break
            if time.monotonic() > deadline:
                for topic, partition in open_:
                    log.warning(
                        "%s/%d: records up to offset %d are not readable yet after %.0f s "
                        "(an open transaction); the stage reads up to %d",
                        topic,
                        partition,
                        written[(topic, partition)],
                        SETTLE_WAIT_S,
                        ends[(topic, partition)],
                    )
                break
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
            ends.update(self.log.end_offsets(open_))
        return ends

    def purge(self, consumed: dict[tuple[str, int], int], *, force: bool = False) -> None:
        """Delete repartition records below what their consumers committed, at most every
        ``PURGE_INTERVAL_S`` (``force``: now), in one request per broker."""
        now = time.monotonic()
        if not force and now < self._purge_due:
            return
        self._purge_due = now + PURGE_INTERVAL_S
        due = {
            key: offset for key, offset in consumed.items() if self._purged.get(key, -1) < offset
        }
        if not due:
            return
        try:
            self.log.truncate_before_many(due)  # type: ignore[attr-defined]
        except LogError as exc:  # purging is housekeeping: never fail a batch for it
            log.warning("cannot purge %d repartition partition(s): %s", len(due), exc)
            return
        self._purged.update(due)

    # ---- the driver's calls (``BatchCommitter``), as Kafka answers them ----------------

    def begin_batch(self, batch: int) -> None:
        """Check that no newer driver took over before any work, unless the work units
        keep their producers (see the module docstring)."""
        self._proved = False
        if not self.units_fence:
            self.check_fence(batch)
            self._proved = True

    def units_launched(self) -> None:
        """Work units launched since the last run will initialise their producers: first
        check that no newer driver fenced their ids (``check_fence``)."""
        if self.units_fence:
            self.check_fence()

    def _run(self, *args: Any, **kwargs: Any) -> PrepareRecord:
        """Record the stage's reports; a task that read input committed it in its work
        unit's transaction, which Kafka accepted only if no newer driver had fenced it."""
        prepare = super()._run(*args, **kwargs)
        if self.units_fence and any(t.input_records for u in prepare.reports for t in u.tasks):
            self._proved = True
        return prepare

    def commit(self, record: CommitRecord) -> CommitRecord:
        """Record the batch's commit; after a batch in which no work unit committed a
        transaction, check first that no newer driver took over (``check_fence``)."""
        if not self._proved:
            self.check_fence(record.batch)
        self._proved = False
        return super().commit(record)

    def held_states(
        self, sources: Callable[[], dict[str, list[tuple[str, int]]]]
    ) -> dict[str, TaskCommittedState] | None:
        """Plan from what Kafka holds (``committed_states``)."""
        return self.committed_states(sources())

    def input_ends(
        self, keys: Sequence[tuple[str, int]], repartition_topics: set[str]
    ) -> tuple[dict[tuple[str, int], int], set[str]]:
        """A repartition partition is read whole, up to what the earlier batches committed
        (``settled_ends``): its records lie in blocks, one per writing task and batch, each
        in time order but not ordered among each other (the reading task merges them by
        time). A cap or a cut would take the head of one block and leave the others' earlier
        records for a later batch, behind stream time."""
        whole = repartition_topics
        available = self.log.end_offsets(keys)  # every partition's in one request
        internal = [k for k in keys if k[0] in whole]
        if internal:
            available.update(self.settled_ends(internal, available))
        return available, whole

    def adopt_resets(
        self,
        moved: dict[str, set[str]],
        windows: dict[tuple[str, int], tuple[int, int]],
        states: dict[str, TaskCommittedState],
        sources: Callable[[], dict[str, list[tuple[str, int]]]],
    ) -> None:
        """The offsets ``auto_offset_reset`` chose become the tasks' committed ones before
        they run (a run starts at Kafka's committed offsets): ``commit_reset``."""
        for task, keys in moved.items():
            state = states.get(task)
            if state is None:
                continue
            offsets = dict(state.offsets)
            for (topic, partition), (start, _) in windows.items():
                if offset_key(topic, partition) in keys:
                    offsets[offset_key(topic, partition)] = start
            reset = TaskCommittedState(
                offsets, state.stream_time, state.schedules, state.partition_times
            )
            self.commit_reset(task, sources()[task], reset, keys)
            states[task] = reset

    def ids_for_units(self, units: Callable[[], dict[UnitKey, list[str]]]) -> dict[UnitKey, str]:
        """Each work unit's transactional id (``engine.unit_ids``: ids that may still hold a
        task that moved are fenced first)."""
        assert self.unit_ids is not None
        return self.unit_ids.ids_for(units())

    def winners(self, prepare: PrepareRecord) -> dict[str, str]:
        return {}  # each work unit committed its runs itself: nothing is held for a decision

    def retries(self, error: BaseException) -> bool:
        """A work unit's producer was fenced: by a newer driver (then ``check_fence`` raises),
        or by an older one that reopened a task (then the retry takes it back)."""
        if not isinstance(error, FencedError):
            if self.units_fence:  # the retry's units may initialise their producers anew
                self.check_fence()
            return False
        self.check_fence()
        return True

    def after_commit(self, consumed: Callable[[], dict[tuple[str, int], int]]) -> None:
        """Purge the repartition records every consuming task committed (``purge``)."""
        self.purge(consumed())

    def sweep_committed(self, last_batch: int) -> int:
        return 0  # no unsealed segments on Kafka: a losing attempt's transaction was aborted

    def sweep(self, prefix: str, topics: Iterable[str] | None = None) -> int:
        return 0

    def _merge(
        self, raw: dict[str, dict[str, Any]], internal_sinks: Sequence[str], writer: str
    ) -> list[dict[str, Any]]:
        return []  # repartition records are in Kafka already, in the order they committed

    def _seal(self, prepare: PrepareRecord, *, sweep: bool = True) -> None:
        """Every task committed its transaction before the prepare: nothing to seal."""
        self.app_dir.check_fence()
        self.app_dir.create_seal(
            SealRecord(prepare.batch, prepare.stage, self.epoch, prepare.attempt)
        )

    def close(self) -> None:
        super().close()
        if self._fence is not None:
            self._fence.close()
            self._fence = None
        if self._group is not None:
            self._group.close()
            self._group = None
