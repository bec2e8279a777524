"""Helpers for the durable-state tests: run one task's batches over a file log, as the engine
would, with the commit made visible (sealed) or not."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamtide.log import FileLog, LogRecord
from streamtide.processor.api import Processor, StoreBuilder
from streamtide.processor.topology import Topology
from streamtide.record import Record
from streamtide.runtime.committed import TaskCommittedState
from streamtide.runtime.stream_task import StreamTask
from streamtide.runtime.task_stores import TaskStores

APP = "app"


def file_log(root: Path) -> FileLog:
    return FileLog(str(root), fsync=False)


class SealingCollector:
    """A RecordCollector that holds records until ``seal`` appends them (visible at once)."""

    def __init__(self, log: FileLog) -> None:
        self.log = log
        self.pending: dict[tuple[str, int], list[LogRecord]] = {}

    def partitions_for(self, topic: str) -> int:
        return self.log.partitions(topic)

    def send(
        self, topic: str, partition: int, key: Any, value: Any, timestamp: int, headers: Any
    ) -> None:
        self.pending.setdefault((topic, partition), []).append(
            LogRecord(key, value, timestamp, tuple(headers or ()))
        )

    def seal(self) -> None:
        for (topic, partition), records in self.pending.items():
            self.log.append(topic, partition, records)
        self.pending.clear()

    def drop(self) -> None:
        self.pending.clear()


class _Noop(Processor):
    def process(self, record: Record) -> None:
        pass


def store_topology(*builders: StoreBuilder) -> Topology:
    """One source, one processor with every store connected (stores are driven directly)."""
    topology = Topology()
    topology.add_source("src", "in")
    topology.add_processor("p", _Noop, "src")
    for builder in builders:
        topology.add_state_store(builder, "p")
    return topology


@dataclass
class TaskRun:
    """An open task with its stores and collector."""

    task: StreamTask
    stores: TaskStores
    collector: SealingCollector

    def store(self, name: str) -> Any:
        return self.task.store(name)

    def commit(self, *, seal: bool = True, confirm: bool = True) -> TaskCommittedState:
        """The task's commit; ``seal`` makes the changelog visible; ``confirm`` tells the
        stores so (``on_committed``)."""
        state = self.task.commit()
        if seal:
            self.collector.seal()
        else:
            self.collector.drop()
        if confirm:
            self.stores.on_committed(state)
        return state

    @property
    def metrics(self) -> dict[str, int]:
        return self.task.metrics.as_dict()

    def close(self) -> None:
        self.task.close()


def open_task(
    log: FileLog,
    topology: Topology,
    state_dir: Path,
    *,
    partition: int = 0,
    **options: Any,
) -> TaskRun:
    stores = TaskStores.for_task(topology, 0, log, fsync=False, **options)
    collector = SealingCollector(log)
    task = StreamTask(
        topology,
        0,
        partition,
        collector,
        application_id=APP,
        state_dir=state_dir,
        stores=stores,
    )
    task.initialize()
    return TaskRun(task, stores, collector)
