"""A task's part in its work unit's commit on a Kafka log: what a run does, by what Kafka
holds, and the offsets and records it adds to the unit's transaction (docs/kafka.md, "Running
an application on Kafka").

Input offsets are committed to the consumer group ``<application_id>``, as Kafka Streams
does; each offset's metadata holds the task's stream time, punctuation schedules and
partition times, so Kafka alone says where a task stands. Before a run, ``decide`` compares
what Kafka holds with the state the driver planned from: equal, the run goes ahead; past the
run's ranges, an earlier attempt committed the run and its report was lost, so it commits
nothing again; anywhere else (a zombie attempt committed part of the ranges), the run starts
from what Kafka holds. The decision is the task's own, whatever else its work unit runs.

The outputs, changelog and repartition records and offsets of all the tasks a work unit ran
commit together, in one transaction of the unit's producer (``runtime.kafka_unit_commit``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from streamtide.errors import StreamtideError
from streamtide.log.api import Log
from streamtide.log.kafka_group import Committed, GroupOffsets
from streamtide.log.source_marks import SourceMark
from streamtide.processor.topology import Topology
from streamtide.runtime.committed import TaskCommittedState, offset_key
from streamtide.runtime.repartition_order import SOURCE_HEADER
from streamtide.task_id import TaskId

#: Kafka's default ``offset.metadata.max.bytes``: the task state must fit in it.
MAX_METADATA_BYTES = 4096


@dataclass(frozen=True)
class Decision:
    """Whether a task's run is already committed (``done``), and otherwise the committed
    state and input ranges it runs from."""

    done: bool
    state: TaskCommittedState
    ranges: dict[str, list[int]]


def source_partitions(
    topology: Topology, application_id: str, log: Log, task_id: str
) -> list[tuple[str, int]]:
    """The (physical) source partitions a task reads: its partition of each source topic
    that has it (the offsets its commits carry)."""
    return sources_by_task(topology, application_id, log, [task_id])[task_id]


def sources_by_task(
    topology: Topology, application_id: str, log: Log, task_ids: Iterable[str]
) -> dict[str, list[tuple[str, int]]]:
    """``source_partitions`` of many tasks: each sub-topology's topics are resolved, and
    each topic's partition count asked, once (a driver asks for thousands of tasks)."""
    topics_of: dict[int, list[tuple[str, int]]] = {}
    found = {}
    for task_id in task_ids:
        parsed = TaskId.parse(task_id)
        subtopology, partition = parsed.subtopology, parsed.partition
        topics = topics_of.get(subtopology)
        if topics is None:
            names = (
                topology.resolve_topic(topic, application_id)
                for topic in topology.subtopology(subtopology).source_topics
            )
            topics = topics_of[subtopology] = [(name, log.partitions(name)) for name in names]
        found[task_id] = [(topic, partition) for topic, count in topics if partition < count]
    return found


def task_transactional_id(application_id: str, task_id: str) -> str:
    """The ``transactional.id`` a task's own producer had before work units committed all
    their tasks in one transaction: a starting driver of an application that ran so fences
    these once (they may hold open transactions)."""
    return f"{application_id}-{task_id}"


def unit_transactional_id(application_id: str, client: str, slot: int, stage: int, gen: int) -> str:
    """The ``transactional.id`` of the producer of one slot's work unit for one stage, in
    generation ``gen`` (``engine.unit_ids``)."""
    return f"{application_id}-unit-{client}-{slot}-s{stage}-g{gen}"


def encode_metadata(state: TaskCommittedState, marks: dict[str, SourceMark] | None = None) -> str:
    """The task state kept with each committed offset (everything but the offsets), and the
    marks of the last records consumed below them (``log.source_marks``)."""
    data: dict[str, Any] = {
        "stream_time": state.stream_time,
        "schedules": state.schedules,
        "partition_times": state.partition_times,
    }
    if marks:
        data["marks"] = {key: mark.to_list() for key, mark in sorted(marks.items())}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    if len(text.encode()) > MAX_METADATA_BYTES:
        raise StreamtideError(
            f"the task state to commit with the offsets is {len(text.encode())} bytes, more "
            f"than Kafka's offset metadata limit of {MAX_METADATA_BYTES} (too many punctuation "
            "schedules?)"
        )
    return text


def decode_state(
    committed: dict[tuple[str, int], Committed], where: str
) -> TaskCommittedState | None:
    """The task state that committed offsets stand for (None: nothing committed yet)."""
    return decode_committed(committed, where)[0]


def decode_committed(
    committed: dict[tuple[str, int], Committed], where: str
) -> tuple[TaskCommittedState | None, dict[str, SourceMark]]:
    """``decode_state`` and ``decode_marks`` at once (the metadata parsed once)."""
    if not committed:
        return None, {}
    metadata = _metadata(committed, where)
    offsets = {offset_key(t, p): offset for (t, p), (offset, _) in committed.items()}
    state = TaskCommittedState.from_dict({**metadata, "offsets": offsets})
    return state, _marks(committed, metadata, where)


def decode_marks(committed: dict[tuple[str, int], Committed], where: str) -> dict[str, SourceMark]:
    """The marks committed with the offsets (``"topic:partition"`` -> mark), of partitions
    that still have an offset."""
    return _marks(committed, _metadata(committed, where), where)


def _marks(
    committed: dict[tuple[str, int], Committed], metadata: dict[str, Any], where: str
) -> dict[str, SourceMark]:
    found = metadata.get("marks", {})
    held = {offset_key(t, p) for t, p in committed}
    try:
        return {str(k): SourceMark.from_list(v) for k, v in found.items() if k in held}
    except (TypeError, ValueError) as exc:
        raise StreamtideError(f"{where}: the committed source marks {found!r} are damaged") from exc


def _metadata(committed: dict[tuple[str, int], Committed], where: str) -> dict[str, Any]:
    texts = [meta for _, meta in (committed[k] for k in sorted(committed)) if meta]
    if not texts:
        return {}
    try:
        data = json.loads(texts[0])
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise StreamtideError(
            f"{where}: the committed offset metadata {texts[0][:80]!r} is not a task state "
            "written by Streamtide (another application uses this consumer group?)"
        )
    return data


@dataclass
class TaskRun:
    """One task's run, ready for its work unit's commit (``runtime.kafka_unit_commit``): the
    records to write (``(topic, partition, columns, headers)``), the offsets to commit with
    the task state in their metadata, and the marks to keep once it committed."""

    task: KafkaTaskCommit
    pending: list[tuple[str, int, Any, list[Any]]]
    offsets: dict[tuple[str, int], Committed]
    marks: dict[str, SourceMark]
    #: no segments: the records are in the unit's transaction (``runtime.run_commit.Run``)
    segments: list[dict[str, Any]] = field(default_factory=list)
    #: the task applies the run's writes once its unit committed, at the offsets Kafka gave
    applies_on_commit: bool = True


class KafkaTaskCommit:
    """Decides and prepares the runs of one task (see the module docstring); its work unit
    commits them (``runtime.kafka_unit_commit``)."""

    def __init__(
        self,
        log: Log,
        group: GroupOffsets,
        application_id: str,
        task_id: str,
        source_partitions: Iterable[tuple[str, int]],
        *,
        repartition_topics: Iterable[str] = (),
    ) -> None:
        self.log = log
        self.repartition_topics = frozenset(repartition_topics)
        self._writer_header = ((SOURCE_HEADER, task_id.encode()),)
        self.group = group
        self.task_id = task_id
        self.application_id = application_id
        self.source_partitions = sorted(source_partitions)
        self.where = f"task {task_id} of application {application_id!r}"
        #: marks of the last records consumed below the committed offsets (what Kafka holds)
        self.marks: dict[str, SourceMark] = {}

    def committed_state(
        self, committed: dict[tuple[str, int], Committed] | None = None
    ) -> TaskCommittedState | None:
        """What Kafka holds for the task (None: nothing committed yet); also takes the marks
        committed with it. ``committed``: the group's offsets read already (of at least the
        task's partitions), instead of reading them here."""
        if committed is None:
            committed = self.group.committed(self.source_partitions)
        else:
            committed = {tp: committed[tp] for tp in self.source_partitions if tp in committed}
        self.marks = decode_marks(committed, self.where)
        return decode_state(committed, self.where)

    def decide(
        self,
        state: dict[str, Any],
        ranges: dict[str, list[int]],
        committed: dict[tuple[str, int], Committed] | None = None,
    ) -> Decision:
        """What a run planned from ``state`` over ``ranges`` does, by what Kafka holds
        (``committed``: the group's offsets if read already): nothing when every range end is
        committed (an earlier attempt committed the run and its report was lost); otherwise
        it runs from Kafka's committed state, over the ranges from Kafka's committed offsets
        on (the planned state and ranges, unless a zombie attempt committed part of them, the
        driver's records are behind Kafka, or the ranges do not start at Kafka's offsets). A
        run never reads from before Kafka's committed offsets: that would process records
        twice (duplicated outputs; counts that count a record twice)."""
        found = self.committed_state(committed) or TaskCommittedState()
        planned = TaskCommittedState.from_dict(state)
        partition = TaskId.parse(self.task_id).partition
        keys = {topic: offset_key(topic, partition) for topic in ranges}
        starts_committed = all(
            found.offsets.get(key, int(ranges[topic][0])) == int(ranges[topic][0])
            for topic, key in keys.items()
        )
        if found == planned and starts_committed:
            return Decision(False, planned, dict(ranges))
        # Kafka holds another state, or the ranges do not start at its offsets: a restarted
        # driver resumes a stage with the ranges its predecessor recorded, while the state
        # it holds may already include the run (its first batch was never recorded as
        # committed, so it took the state from Kafka, where some tasks had committed)
        ends = {key: int(ranges[topic][1]) for topic, key in keys.items()}
        if ends and all(found.offsets.get(key, -1) >= end for key, end in ends.items()):
            return Decision(True, found, {})
        moved = {}
        for topic, (start, end) in ranges.items():
            begin = found.offsets.get(keys[topic], int(start))
            moved[topic] = [begin, max(int(end), begin)]
        return Decision(False, found, moved)

    def prepare(
        self,
        pending: Iterable[tuple[str, int, Any]],
        state: TaskCommittedState,
        read: dict[str, SourceMark] | None = None,
    ) -> TaskRun:
        """The run that wrote ``pending`` (``(topic, partition, columns)`` with ``keys``,
        ``values``, ``timestamps``, ``headers`` lists) and reached ``state``, with the marks of
        the last records it ``read`` (``"topic:partition"`` -> mark; partitions it read
        nothing from keep theirs). Repartition records carry the task as their writer."""
        marks = {k: m for k, m in {**self.marks, **(read or {})}.items() if k in state.offsets}
        metadata = encode_metadata(state, marks)
        offsets = {
            (topic, p): (state.offsets[offset_key(topic, p)], metadata)
            for topic, p in self.source_partitions
            if offset_key(topic, p) in state.offsets
        }
        writes = []
        for topic, partition, columns in pending:
            headers = columns.headers
            if topic in self.repartition_topics:
                tag = self._writer_header
                headers = [(*h, *tag) for h in headers]
            writes.append((topic, partition, columns, headers))
        return TaskRun(self, writes, offsets, marks)

    def committed(self, run: TaskRun) -> None:
        """``run`` committed: its marks are what Kafka holds now."""
        self.marks = run.marks
