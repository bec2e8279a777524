"""A task's commit on a Kafka log: its outputs, changelog and repartition records and its
input offsets in one Kafka transaction (docs/kafka.md, "Running an application on Kafka").

Each task has its own transactional producer, ``transactional.id = <application_id>-<task>``,
created when the task opens in a work unit. Creating it fences every earlier producer of the
task (a retried attempt, a zombie work unit, the work unit of a driver that was taken over):
Kafka aborts what that producer left open and refuses its later sends and commit.

Input offsets are committed to the consumer group ``<application_id>``, as Kafka Streams
does; each offset's metadata holds the task's stream time, punctuation schedules and
partition times, so Kafka alone says where a task stands. Before a run, ``decide`` compares
what Kafka holds with the state the driver planned from: equal, the run goes ahead; past the
run's ranges, an earlier attempt committed the run and its report was lost, so it commits
nothing again; anywhere else (a zombie attempt committed part of the ranges), the run starts
from what Kafka holds. Under ``at_least_once`` records are appended and offsets committed after
them, without a transaction: a failure between the two repeats the run's outputs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from streamtide.errors import FencedError, StreamtideError
from streamtide.log.api import Log, LogRecord
from streamtide.log.errors import ProducerFencedError
from streamtide.log.kafka_group import Committed, GroupOffsets, topic_partitions
from streamtide.log.kafka_transaction import KafkaTransaction
from streamtide.log.source_marks import SourceMark
from streamtide.processor.topology import Topology
from streamtide.runtime.committed import TaskCommittedState, offset_key
from streamtide.runtime.repartition_order import SOURCE_HEADER

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
    subtopology, partition = (int(part) for part in task_id.split("_"))
    topics = (
        topology.resolve_topic(topic, application_id)
        for topic in topology.subtopology(subtopology).source_topics
    )
    return [(topic, partition) for topic in topics if partition < log.partitions(topic)]


def transactional_id(application_id: str, task_id: str) -> str:
    """The ``transactional.id`` of a task's producer."""
    return f"{application_id}-{task_id}"


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
    if not committed:
        return None
    offsets = {offset_key(t, p): offset for (t, p), (offset, _) in committed.items()}
    return TaskCommittedState.from_dict({**_metadata(committed, where), "offsets": offsets})


def decode_marks(committed: dict[tuple[str, int], Committed], where: str) -> dict[str, SourceMark]:
    """The marks committed with the offsets (``"topic:partition"`` -> mark), of partitions
    that still have an offset."""
    found = _metadata(committed, where).get("marks", {})
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


class KafkaTaskCommit:
    """Commits the runs of one task (see the module docstring)."""

    def __init__(
        self,
        log: Log,
        group: GroupOffsets,
        application_id: str,
        task_id: str,
        source_partitions: Iterable[tuple[str, int]],
        *,
        exactly_once: bool = True,
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
        self.transaction: KafkaTransaction | None = None
        #: marks of the last records consumed below the committed offsets (what Kafka holds)
        self.marks: dict[str, SourceMark] = {}
        if exactly_once:
            try:
                self.transaction = KafkaTransaction(
                    log, transactional_id(application_id, task_id), self.where
                )
            except ProducerFencedError as exc:
                raise self._fenced(exc) from exc

    def committed_state(self) -> TaskCommittedState | None:
        """What Kafka holds for the task (None: nothing committed yet); also takes the marks
        committed with it."""
        committed = self.group.committed(self.source_partitions)
        self.marks = decode_marks(committed, self.where)
        return decode_state(committed, self.where)

    def decide(self, state: dict[str, Any], ranges: dict[str, list[int]]) -> Decision:
        """What a run planned from ``state`` over ``ranges`` does, by what Kafka holds: nothing
        when every range end is committed (an earlier attempt committed the run and its report
        was lost); otherwise it runs from Kafka's committed state, over the ranges from Kafka's
        committed offsets on (the planned state and ranges, unless a zombie attempt committed
        part of them, the driver's records are behind Kafka, or the ranges do not start at
        Kafka's offsets). A run never reads from before Kafka's committed offsets: that would
        process records twice (duplicated outputs; counts that count a record twice)."""
        found = self.committed_state() or TaskCommittedState()
        planned = TaskCommittedState.from_dict(state)
        partition = int(self.task_id.split("_")[1])
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

    def commit(
        self,
        pending: Iterable[tuple[str, int, Any]],
        state: TaskCommittedState,
        read: dict[str, SourceMark] | None = None,
    ) -> dict[tuple[str, int], int]:
        """Write ``pending`` (``(topic, partition, columns)`` with ``keys``, ``values``,
        ``timestamps``, ``headers`` lists) and commit ``state``'s offsets, with the marks of
        the last records the run ``read`` (``"topic:partition"`` -> mark; partitions it read
        nothing from keep theirs); returns the offset of the last record written to each
        partition."""
        marks = {k: m for k, m in {**self.marks, **(read or {})}.items() if k in state.offsets}
        metadata = encode_metadata(state, marks)
        offsets = {
            (topic, p): (state.offsets[offset_key(topic, p)], metadata)
            for topic, p in self.source_partitions
            if offset_key(topic, p) in state.offsets
        }
        try:
            if self.transaction is None:
                written = self._append_then_commit(pending, offsets)
            else:
                written = self._commit_transaction(pending, offsets)
        except ProducerFencedError as exc:
            raise self._fenced(exc) from exc
        self.marks = marks
        return written

    def _commit_transaction(
        self, pending: Iterable[tuple[str, int, Any]], offsets: dict[tuple[str, int], Committed]
    ) -> dict[tuple[str, int], int]:
        txn = self.transaction
        assert txn is not None
        txn.begin()
        for topic, partition, columns in pending:
            headers = columns.headers
            if topic in self.repartition_topics:
                tag = self._writer_header
                headers = [(*h, *tag) for h in headers]
            txn.produce_many(
                topic, partition, columns.keys, columns.values, columns.timestamps, headers
            )
        if offsets:
            txn.send_offsets(topic_partitions(offsets), self.group.group_metadata())
        txn.commit()
        written = dict(txn.last_offsets)
        self._confirm(offsets)
        return written

    def _append_then_commit(
        self, pending: Iterable[tuple[str, int, Any]], offsets: dict[tuple[str, int], Committed]
    ) -> dict[tuple[str, int], int]:
        written = {}
        for topic, partition, columns in pending:
            tag = self._writer_header if topic in self.repartition_topics else ()
            records = [
                LogRecord(k, v, t, (*h, *tag))
                for k, v, t, h in zip(
                    columns.keys, columns.values, columns.timestamps, columns.headers
                )
            ]
            if records:
                first = self.log.append(topic, partition, records)
                # an idempotent producer's records of one append are contiguous
                written[(topic, partition)] = first + len(records) - 1
        if offsets:
            self.group.commit(offsets)
        return written

    def _confirm(self, offsets: dict[tuple[str, int], Committed]) -> None:
        """Read the committed offsets back: a broker restart can abort a transaction whose
        commit the client then reports as successful."""
        if not offsets:
            return
        found = self.group.committed(offsets)
        lost = {k: v for k, v in offsets.items() if found.get(k) != v}
        if lost:
            raise StreamtideError(
                f"{self.where}: the transaction's commit was reported, but Kafka does not hold "
                f"its offsets {sorted(lost)} (the broker aborted it); the run is retried"
            )

    def _fenced(self, exc: BaseException) -> FencedError:
        return FencedError(
            f"{self.where}: Kafka fenced its transactional producer "
            f"{transactional_id(self.application_id, self.task_id)!r}: another instance of the "
            f"application took the task over ({exc})"
        )

    def close(self) -> None:
        """Abort an open transaction and drop the producer."""
        if self.transaction is not None:
            self.transaction.abort()
            self.transaction.close()
            self.transaction = None
