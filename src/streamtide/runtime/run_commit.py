"""How a work unit's task runs are committed, behind one set of calls for both logs.

``TaskHost`` runs tasks the same way on every log; what differs is how a run's writes become
committed, and that is all here:

- On the file log (``FileCommit``) a run's outputs and changelog records are written at the
  end of its work unit as unsealed segments (``runtime.unit_writes``); the driver seals what
  won, and a long-running work unit applies a held run to its stores when the driver says
  it won (``TaskHost.settle``). A run always runs as the driver planned it.
- On Kafka (``KafkaCommit``) each task decides from what Kafka holds whether and from where
  its run goes (``runtime.kafka_task_commit``), and the work unit commits all its runs in one
  transaction of its producer (``runtime.kafka_unit_commit``); each task applies its writes
  to its stores at the offsets the commit gave them.

``for_log`` is the one place that picks the implementation."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from streamtide.config import StreamsConfig
from streamtide.log.api import Log
from streamtide.log.kafka_group import Committed, GroupOffsets
from streamtide.log.source_marks import SourceMark, last_mark
from streamtide.processor.topology import Topology
from streamtide.runtime.committed import TaskCommittedState, offset_key
from streamtide.runtime.kafka_task_commit import (
    Decision,
    KafkaTaskCommit,
    TaskRun,
    source_partitions,
    sources_by_task,
)
from streamtide.runtime.kafka_unit_commit import KafkaUnitCommit
from streamtide.runtime.log_traits import traits_of
from streamtide.runtime.repartition_order import merge_by_writer
from streamtide.runtime.segment_collector import SegmentCollector
from streamtide.runtime.unit_writes import UnitWrites

#: Offsets already read for a work unit's tasks (``{(topic, partition): committed}``).
CommittedOffsets = dict[tuple[str, int], Committed]


class Run(Protocol):
    """A task's run, ready for its work unit's commit."""

    #: the run's segments (``SegmentRef`` dicts) once written: its report's ``segments``
    segments: list[dict[str, Any]]
    #: whether the task applies the run's writes when its unit commits (and so stays open
    #: until then); otherwise the driver's decision applies them (``TaskHost.settle``)
    applies_on_commit: bool


class TaskCommit(Protocol):
    """One task's part in its work unit's commit."""

    def decide(
        self,
        state: dict[str, Any],
        ranges: dict[str, list[int]],
        committed: CommittedOffsets | None,
    ) -> Decision:
        """Whether the run planned from ``state`` over ``ranges`` runs, and from where."""
        ...

    def read(self, topic: str, partition: int, table: pa.Table, marks: dict[str, Any]) -> pa.Table:
        """An input table as the task processes it (``marks``: the last record read of each
        partition, kept for the commit)."""
        ...

    def prepare(
        self,
        collector: SegmentCollector,
        state: dict[str, Any],
        marks: dict[str, SourceMark],
        writer: str,
        changelogs: set[str],
    ) -> Run:
        """The run that wrote what ``collector`` holds (as ``writer``) and reached ``state``."""
        ...


class UnitCommit(Protocol):
    """A work unit's commit of its tasks' runs."""

    #: the offsets read for the unit's tasks at ``begin`` (None: none read)
    committed: CommittedOffsets | None

    def begin(self, transactional_id: str | None, task_ids: Iterable[str]) -> None:
        """Before the unit's tasks run (``transactional_id``: its producer's, on Kafka)."""
        ...

    def task(self, task_id: str) -> TaskCommit:
        """The commit of a task opened now."""
        ...

    def write(self, runs: list[Run], writer_id: str) -> dict[tuple[str, int], int]:
        """Write (and commit) ``runs``; returns the offset of the last record written to each
        partition (Kafka) or nothing (file log: the driver seals them)."""
        ...

    def failed(self) -> None:
        """``write`` failed or the unit was abandoned: nothing of it is kept."""
        ...

    def close(self) -> None: ...


# ---- the file log --------------------------------------------------------------------------


@dataclass
class FileRun:
    """A run on the file log: its tables, written at the end of its unit."""

    writer: str
    tables: list[tuple[str, int, pa.Table]]
    changelogs: set[str]
    segments: list[dict[str, Any]] = field(default_factory=list)
    applies_on_commit: bool = False


class FileTaskCommit:
    """A task on the file log runs as planned and writes candidate segments."""

    def decide(
        self,
        state: dict[str, Any],
        ranges: dict[str, list[int]],
        committed: CommittedOffsets | None,
    ) -> Decision:
        return Decision(False, TaskCommittedState.from_dict(state), ranges)

    def read(self, topic: str, partition: int, table: pa.Table, marks: dict[str, Any]) -> pa.Table:
        return table

    def prepare(
        self,
        collector: SegmentCollector,
        state: dict[str, Any],
        marks: dict[str, SourceMark],
        writer: str,
        changelogs: set[str],
    ) -> FileRun:
        return FileRun(writer, collector.take_tables(), changelogs)


class FileCommit:
    """A work unit on the file log: its runs' segments in two shared files (``UnitWrites``)."""

    committed: CommittedOffsets | None = None

    def __init__(self, log_: Log) -> None:
        self.log = log_
        self._task = FileTaskCommit()

    def begin(self, transactional_id: str | None, task_ids: Iterable[str]) -> None:
        pass  # nothing to read or fence: the driver decides what wins

    def task(self, task_id: str) -> TaskCommit:
        return self._task

    def write(self, runs: list[Run], writer_id: str) -> dict[tuple[str, int], int]:
        writes = UnitWrites()
        for run in runs:
            assert isinstance(run, FileRun)
            writes.add(run.segments, run.writer, run.tables, run.changelogs)
        writes.write(self.log, writer_id)
        return {}

    def failed(self) -> None:
        pass  # nothing was written that the driver could seal

    def close(self) -> None:
        pass


# ---- Kafka ---------------------------------------------------------------------------------


class KafkaRunCommit:
    """A task on Kafka: ``KafkaTaskCommit``'s decisions, and the marks of what it read."""

    def __init__(self, decisions: KafkaTaskCommit) -> None:
        self.decisions = decisions

    def decide(
        self,
        state: dict[str, Any],
        ranges: dict[str, list[int]],
        committed: CommittedOffsets | None,
    ) -> Decision:
        return self.decisions.decide(state, ranges, committed)

    def read(self, topic: str, partition: int, table: pa.Table, marks: dict[str, Any]) -> pa.Table:
        """Keeps the last record's mark (committed with the offsets) and merges a repartition
        partition's blocks by time (``runtime.repartition_order``)."""
        if (mark := last_mark(table)) is not None:
            marks[offset_key(topic, partition)] = mark
        if topic in self.decisions.repartition_topics:
            table = merge_by_writer(table)
        return table

    def prepare(
        self,
        collector: SegmentCollector,
        state: dict[str, Any],
        marks: dict[str, SourceMark],
        writer: str,
        changelogs: set[str],
    ) -> TaskRun:
        return self.decisions.prepare(collector.drain(), TaskCommittedState.from_dict(state), marks)


class KafkaCommit:
    """A work unit on Kafka: its runs in one transaction of its producer. The producers of
    the units run here are kept by transactional id (an earlier generation of a slot's id
    is closed: the driver fenced it)."""

    def __init__(self, log_: Log, topology: Topology, config: StreamsConfig) -> None:
        self.log = log_
        self.topology = topology
        self.config = config
        self.committed: CommittedOffsets | None = None
        self._group: GroupOffsets | None = None
        self._units: dict[str, KafkaUnitCommit] = {}
        self._unit: KafkaUnitCommit | None = None  # the running unit's

    @property
    def group(self) -> GroupOffsets:
        if self._group is None:
            self._group = GroupOffsets(self.log, self.config.application_id)
        return self._group

    def begin(self, transactional_id: str | None, task_ids: Iterable[str]) -> None:
        """Get the unit's producer (created, and so initialised, when its ``transactional_id``
        is new here: that fences its earlier producers and aborts what they left open, before
        any task restores), and read what Kafka holds for the tasks, in one request."""
        exactly_once = self.config.processing_guarantee == "exactly_once"
        key = transactional_id if exactly_once else None
        unit = self._units.get(str(key))
        if unit is None:
            for old in [k for k in self._units if _same_slot(k, transactional_id)]:
                self._units.pop(old).close()  # an earlier generation: fenced by the driver
            unit = KafkaUnitCommit(self.log, self.group, self.config.application_id, key)
            self._units[str(key)] = unit
        self._unit = unit
        app = self.config.application_id
        sources = sources_by_task(self.topology, app, self.log, task_ids)
        partitions = [tp for tps in sources.values() for tp in tps]
        self.committed = self.group.committed(partitions)

    def task(self, task_id: str) -> TaskCommit:
        app = self.config.application_id
        return KafkaRunCommit(
            KafkaTaskCommit(
                self.log,
                self.group,
                app,
                task_id,
                source_partitions(self.topology, app, self.log, task_id),
                repartition_topics={
                    self.topology.resolve_topic(t, app) for t in self.topology.internal_topics
                },
            )
        )

    def write(self, runs: list[Run], writer_id: str) -> dict[tuple[str, int], int]:
        """Commit the runs in the unit's transaction. If the commit fails, the producer is
        dropped (the caller closes the runs' tasks: their next run reopens them from what
        Kafka holds)."""
        unit = self._unit
        assert unit is not None
        try:
            return unit.commit([run for run in runs if isinstance(run, TaskRun)])
        except BaseException:
            self._units.pop(str(unit.transactional_id), None)
            self._unit = None
            unit.close()
            raise
        finally:
            self.committed = None

    def failed(self) -> None:
        self.committed = None

    def close(self) -> None:
        for unit in self._units.values():
            unit.close()
        self._units.clear()
        self._unit = None
        if self._group is not None:
            self._group.close()
            self._group = None


def _same_slot(transactional_id: str, other: str | None) -> bool:
    """Whether two work-unit transactional ids name one slot and stage (any generation)."""
    return other is not None and transactional_id.rpartition("-g")[0] == other.rpartition("-g")[0]


def for_log(log_: Log, topology: Topology, config: StreamsConfig) -> UnitCommit:
    """The work-unit commit for ``log_``: Kafka's when the log commits in transactions."""
    if traits_of(log_).transactions:
        return KafkaCommit(log_, topology, config)
    return FileCommit(log_)
