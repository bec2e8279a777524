"""``InputRanges``: each task's input of a batch, and how much input is waiting.

A stage's ranges start at each task's committed offsets (checked against the topic's
identity and extent, ``engine.sources``), take at most ``max_records_per_batch`` per
partition and end at one event time (``engine.ranges``). How far a partition can be read
and which are read whole is the committer's to say (``BatchCommitter.input_ends``)."""

from __future__ import annotations

import time

from streamtide.engine.batch_size import BatchSizeController
from streamtide.engine.driver_state import DriverState
from streamtide.engine.plan import Stage
from streamtide.engine.progress import RunningBatch
from streamtide.engine.protocol import Ranges
from streamtide.engine.ranges import aligned_ends
from streamtide.engine.sources import SourcePosition, input_start
from streamtide.processor.punctuation import is_wall_clock_schedule
from streamtide.runtime.committed import offset_key
from streamtide.task_id import TaskId


class InputRanges:
    """Fixes the stages' input ranges and measures the input waiting."""

    def __init__(self, state: DriverState, batch_size: BatchSizeController) -> None:
        self.state = state
        self.batch_size = batch_size
        #: whether a range of this batch was capped (the batch-size controller learns from it)
        self.batch_full = False
        #: pattern sources: their topics are matched again before every batch
        self.patterns = list(state.topology.pattern_sources)

    def planned(self, stage: Stage, running: RunningBatch | None) -> tuple[Ranges, dict[str, str]]:
        """The stage's ranges and source topic ids, from the task states the log holds if it
        holds them (``BatchCommitter.held_states``)."""
        state = self.state
        found = state.committer.held_states(lambda: state.task_sources(stage))
        if found is not None:
            for task in stage.task_ids:
                state.task_states.pop(task, None)
            state.task_states.update(found)
        ranges, topic_ids = self.fix(stage)
        if running is not None:
            running.planned_records += sum(
                end - start for topics in ranges.values() for start, end in topics.values()
            )
        return ranges, topic_ids

    def fix(self, stage: Stage) -> tuple[Ranges, dict[str, str]]:
        """Each task's input ``{topic: (start, end)}`` (see the module docstring)."""
        state, log_ = self.state, self.state.log
        committer = state.committer
        cap = self.batch_size.cap
        topic_ids = {t: i for t in stage.source_topics if (i := log_.topic_id(t)) is not None}
        counts = {topic: log_.partitions(topic) for topic in stage.source_topics}
        keys = [
            (topic, TaskId.parse(task).partition)
            for task in stage.task_ids
            for topic in stage.source_topics
            if TaskId.parse(task).partition < counts[topic]
        ]
        # every partition's offsets at once (one request each on Kafka)
        begins = log_.begin_offsets(keys)
        available, whole = committer.input_ends(keys, state.repartition_topics)
        windows = {}
        moved_by_task: dict[str, set[str]] = {}  # offsets auto_offset_reset moved, per task
        for topic, partition in keys:
            task = f"{stage.subtopology}_{partition}"
            task_state = state.task_states.get(task)
            end = available[(topic, partition)]
            committed = task_state.offsets.get(offset_key(topic, partition)) if task_state else None
            lost = None
            if topic not in whole:
                lost = committer.changed_source(topic, partition, committed, end)
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


def due_now(due: int | None) -> bool:
    """Whether a wall-clock punctuation due at ``due`` (epoch ms) is due now."""
    return due is not None and due <= time.time() * 1000
