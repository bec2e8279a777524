"""``InputRanges``: each task's input of a batch, and how much input is waiting.

A stage's ranges start at each task's committed offsets (checked against the topic's
identity and extent, ``engine.sources``), take at most ``max_records_per_batch`` per
partition and end at one event time (``engine.ranges``). How far a partition can be read
and which are read whole is the committer's to say (``BatchCommitter.input_ends``).

The log is asked once per batch, for every stage's partitions at once (``BatchOffsets``):
the task states it holds (Kafka's committed offsets), the begin and end offsets and the
topic ids; on Kafka one request each, whatever the number of partitions and stages. Only
the repartition partitions of a stage that runs after another one of the same batch
(``stages_in_one_job=False``) are asked again when it is planned: it reads what the earlier
stage wrote."""

from __future__ import annotations

import time
from dataclasses import dataclass

from streamtide.engine.batch_size import BatchSizeController
from streamtide.engine.driver_state import DriverState
from streamtide.engine.plan import Stage
from streamtide.engine.progress import RunningBatch
from streamtide.engine.protocol import Ranges
from streamtide.engine.ranges import aligned_ends
from streamtide.engine.sources import SourcePosition, input_start
from streamtide.processor.punctuation import is_wall_clock_schedule
from streamtide.runtime.committed import TaskCommittedState, offset_key
from streamtide.task_id import TaskId


@dataclass
class BatchOffsets:
    """What the log said when a batch began planning, for the partitions of its stages."""

    begins: dict[tuple[str, int], int]
    #: how far each partition can be read (``BatchCommitter.input_ends``)
    ends: dict[tuple[str, int], int]
    #: the topics read whole (repartition topics on Kafka)
    whole: set[str]
    #: the task states the log holds (None: the driver's own records are the truth)
    held: dict[str, TaskCommittedState] | None
    topic_ids: dict[str, str]


class InputRanges:
    """Fixes the stages' input ranges and measures the input waiting."""

    def __init__(self, state: DriverState, batch_size: BatchSizeController) -> None:
        self.state = state
        self.batch_size = batch_size
        #: whether a range of this batch was capped (the batch-size controller learns from it)
        self.batch_full = False
        #: pattern sources: their topics are matched again before every batch
        self.patterns = list(state.topology.pattern_sources)
        #: the running batch's offsets (``BatchOffsets``) and the batch they were read for
        self._offsets: tuple[RunningBatch, BatchOffsets] | None = None

    def planned(self, stage: Stage, running: RunningBatch | None) -> tuple[Ranges, dict[str, str]]:
        """The stage's ranges and source topic ids, from the task states the log holds if it
        holds them (``BatchCommitter.held_states``)."""
        state = self.state
        offsets = self.batch_offsets(stage, running)
        if offsets.held is not None:
            for task in stage.task_ids:
                state.task_states.pop(task, None)
                if task in offsets.held:
                    state.task_states[task] = offsets.held[task]
        ranges, topic_ids = self.fix(stage, offsets)
        if running is not None:
            running.planned_records += sum(
                end - start for topics in ranges.values() for start, end in topics.values()
            )
        return ranges, topic_ids

    def batch_offsets(self, stage: Stage, running: RunningBatch | None) -> BatchOffsets:
        """The log's offsets for ``stage``: read for every stage of the running batch when
        its first stage is planned (for this stage alone outside a batch); a stage's
        repartition partitions again when an earlier stage of the batch may have written
        them (see the module docstring)."""
        state = self.state
        if running is None:
            return self._read_offsets([stage])
        if self._offsets is None or self._offsets[0] is not running:
            self._offsets = (running, self._read_offsets(state.stages))
            return self._offsets[1]
        offsets = self._offsets[1]
        if state.config.stages_in_one_job and len(state.stages) > 1:
            return offsets  # every stage planned before any runs
        written = [k for k in self._keys([stage]) if k[0] in state.repartition_topics]
        if written:
            ends, _ = state.committer.input_ends(written, state.repartition_topics)
            offsets.ends.update(ends)
        return offsets

    def _keys(self, stages: list[Stage]) -> list[tuple[str, int]]:
        """The source partitions of ``stages``' tasks."""
        log_ = self.state.log
        counts: dict[str, int] = {}
        keys = []
        for stage in stages:
            for topic in stage.source_topics:
                if topic not in counts:
                    counts[topic] = log_.partitions(topic)
            for task in stage.task_ids:
                partition = TaskId.parse(task).partition
                keys += [(t, partition) for t in stage.source_topics if partition < counts[t]]
        return keys

    def _read_offsets(self, stages: list[Stage]) -> BatchOffsets:
        """``BatchOffsets`` of ``stages``, every partition at once (one request each on
        Kafka)."""
        state, log_ = self.state, self.state.log
        committer = state.committer
        keys = self._keys(stages)
        tasks = {t for stage in stages for t in stage.task_ids}
        held = committer.held_states(
            lambda: {t: tps for t, tps in state.task_sources().items() if t in tasks}
        )
        topics = list(dict.fromkeys(t for stage in stages for t in stage.source_topics))
        topic_ids = {t: i for t, i in log_.topic_ids(topics).items() if i is not None}
        # where the log holds the task states (Kafka), a repartition partition's begin
        # matters only where nothing is committed: the driver purges its records only below
        # what its reader committed
        internal = state.repartition_topics
        reader = {
            (topic, TaskId.parse(task).partition): task
            for stage in stages
            for task in stage.task_ids
            for topic in stage.source_topics
        }
        begins = log_.begin_offsets(
            key
            for key in keys
            if held is None or key[0] not in internal or not _committed(held, reader, key)
        )
        begins.update({key: 0 for key in keys if key not in begins})
        ends, whole = committer.input_ends(keys, internal)
        return BatchOffsets(begins, ends, whole, held, topic_ids)

    def fix(
        self, stage: Stage, offsets: BatchOffsets | None = None
    ) -> tuple[Ranges, dict[str, str]]:
        """Each task's input ``{topic: (start, end)}`` (see the module docstring), from the
        log's ``offsets`` (read now if not given)."""
        state, log_ = self.state, self.state.log
        committer = state.committer
        cap = self.batch_size.cap
        if offsets is None:
            offsets = self._read_offsets([stage])
        topic_ids = {t: i for t, i in offsets.topic_ids.items() if t in stage.source_topics}
        keys = self._keys([stage])
        begins, available, whole = offsets.begins, offsets.ends, offsets.whole
        windows = {}
        moved_by_task: dict[str, set[str]] = {}  # offsets auto_offset_reset moved, per task
        positions = {}  # (committed, end) of each partition
        for topic, partition in keys:
            task_state = state.task_states.get(f"{stage.subtopology}_{partition}")
            committed = task_state.offsets.get(offset_key(topic, partition)) if task_state else None
            positions[(topic, partition)] = (committed, available[(topic, partition)])
        changed = committer.changed_sources(
            {k: p for k, p in positions.items() if k[0] not in whole}, begins
        )
        for topic, partition in keys:
            task = f"{stage.subtopology}_{partition}"
            committed, end = positions[(topic, partition)]
            lost = changed.get((topic, partition))
            start = input_start(
                SourcePosition(
                    topic,
                    partition,
                    committed,
                    begins[(topic, partition)],
                    end,
                    state.topic_ids.get(topic),
                    topic_ids.get(topic),
                    lost.describe() if lost is not None else None,
                ),
                state.config.auto_offset_reset,
            )
            if committed is not None and start != committed:
                moved_by_task.setdefault(task, set()).add(offset_key(topic, partition))
            if topic in whole:
                windows[(topic, partition)] = (start, max(start, end))
                continue
            capped = min(end, start + cap)
            self.batch_full = self.batch_full or end > capped
            windows[(topic, partition)] = (start, max(start, capped))
        if moved_by_task:
            committer.adopt_resets(moved_by_task, windows, state.task_states, state.task_sources)
        ends = aligned_ends(
            log_, {k: w for k, w in windows.items() if k[0] not in whole}, available
        )
        ends.update({k: end for k, (_, end) in windows.items() if k[0] in whole})
        ranges: Ranges = {task: {} for task in stage.task_ids}
        for (topic, partition), (start, _) in windows.items():
            ranges[f"{stage.subtopology}_{partition}"][topic] = (start, ends[(topic, partition)])
        return ranges, topic_ids

    def source_lags(self) -> dict[str, list[tuple[tuple[str, int], int]]]:
        """End offset minus committed offset of each task's source partitions (the log asked
        for all partitions at once)."""
        state, log_ = self.state, self.state.log
        committed: dict[str, list[tuple[tuple[str, int], int | None]]] = {}
        for stage in state.stages:
            counts = {topic: log_.partitions(topic) for topic in stage.source_topics}
            for task in stage.task_ids:
                partition = TaskId.parse(task).partition
                task_state = state.task_states.get(task)
                committed[task] = [
                    (
                        (topic, partition),
                        task_state.offsets.get(offset_key(topic, partition))
                        if task_state
                        else None,
                    )
                    for topic in stage.source_topics
                    if partition < counts[topic]
                ]
        keys = [key for rows in committed.values() for key, _ in rows]
        ends = log_.end_offsets(keys)
        begins = log_.begin_offsets(k for rows in committed.values() for k, o in rows if o is None)
        return {
            task: [
                (key, max(0, ends[key] - (begins[key] if offset is None else offset)))
                for key, offset in rows
            ]
            for task, rows in committed.items()
        }

    def waiting(self) -> bool:
        """Whether any source partition has records past its committed offset (or a topic
        a pattern source matches was created or deleted)."""
        if self.patterns and self.matched_topics_changed():
            return True
        return any(n for rows in self.source_lags().values() for _, n in rows)

    def matched_topics_changed(self) -> bool:
        topology = self.state.topology
        found = topology.matching_topics(self.state.log.list_topics(), self.state.application_id)
        nodes = topology.nodes
        return any(nodes[name].topics != topics for name, topics in found.items())  # type: ignore[attr-defined]

    def next_wall_clock_punctuation(self) -> int | None:
        """When the earliest committed wall-clock punctuator of any task is due (epoch ms;
        None: there is none)."""
        due = [
            when
            for task_state in self.state.task_states.values()
            for key, when in task_state.schedules.items()
            if is_wall_clock_schedule(key)
        ]
        return min(due) if due else None

    def repartition_consumed(self) -> dict[tuple[str, int], int]:
        """The committed offset of each repartition partition (what its readers consumed)."""
        state = self.state
        internal = state.repartition_topics
        consumed = {}
        for task, partitions in state.task_sources().items():
            task_state = state.task_states.get(task)
            for topic, partition in partitions:
                key = offset_key(topic, partition)
                if topic in internal and task_state is not None and key in task_state.offsets:
                    consumed[(topic, partition)] = task_state.offsets[key]
        return consumed


def _committed(
    states: dict[str, TaskCommittedState], reader: dict[tuple[str, int], str], key: tuple[str, int]
) -> bool:
    """Whether the state of the task reading a partition holds a committed offset of it."""
    found = states.get(reader[key])
    return found is not None and offset_key(*key) in found.offsets


def due_now(due: int | None) -> bool:
    """Whether a wall-clock punctuation due at ``due`` (epoch ms) is due now."""
    return due is not None and due <= time.time() * 1000
