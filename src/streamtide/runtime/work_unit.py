"""The work unit: what one task slot does for one stage of a batch, independent of Spark.

Spark runs it inside a pinned Python task; tests can call it directly. It restores each
active task's stores, processes the task's fixed input ranges, punctuates, writes outputs and
changelog records as unsealed segments, then brings standby tasks up to date, closes every
store, and reports results and local changelog offsets (lags) to the driver.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from streamtide.config import StreamsConfig
from streamtide.log.api import Log
from streamtide.processor.topology import Topology
from streamtide.runtime.committed import TaskCommittedState, offset_key
from streamtide.runtime.global_stores import GlobalStores
from streamtide.runtime.segment_collector import SegmentCollector
from streamtide.runtime.standby import StandbyTask
from streamtide.runtime.stream_task import StreamTask

log = logging.getLogger(__name__)


@dataclass
class ActiveSpec:
    """An active task to run: its input ranges ``{topic: [start, end)}`` and committed state."""

    task_id: str
    ranges: dict[str, list[int]]
    state: dict[str, Any]

    @property
    def subtopology(self) -> int:
        return int(self.task_id.split("_")[0])

    @property
    def partition(self) -> int:
        return int(self.task_id.split("_")[1])


@dataclass
class WorkUnitSpec:
    """Everything one slot needs for one stage (sent to the executor as JSON)."""

    batch: int
    stage: int
    client: str
    active: list[ActiveSpec]
    standby: list[str] = field(default_factory=list)
    #: end offset per partition of each global table's topic the batch reads up to
    global_ends: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "stage": self.stage,
            "client": self.client,
            "active": [a.__dict__ for a in self.active],
            "standby": list(self.standby),
            "global_ends": self.global_ends,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkUnitSpec:
        return cls(
            int(data["batch"]),
            int(data["stage"]),
            str(data["client"]),
            [ActiveSpec(**a) for a in data["active"]],
            list(data.get("standby", [])),
            {str(t): [int(e) for e in ends] for t, ends in data.get("global_ends", {}).items()},
        )


#: ``factory(topology=, config=, log=, store_names=, batch=) -> TaskStores`` for durable
#: stores (``runtime.state_factory.make_task_stores``).
TaskStoresFactory = Callable[..., Any]


def client_state_dir(config: StreamsConfig, client: str) -> Path:
    """Where one executor keeps its tasks' local state (executors may share a disk)."""
    return Path(config.state_dir) / f"client-{client}"


def writer_prefix(application_id: str, batch: int, stage: int) -> str:
    return f"{application_id}/b{batch}/s{stage}/"


def run_work_unit(
    topology: Topology,
    config: StreamsConfig,
    log_: Log,
    spec: WorkUnitSpec,
    stores_factory: TaskStoresFactory | None = None,
    global_stores: GlobalStores | None = None,
) -> dict[str, Any]:
    """Run ``spec`` and return the report the driver commits (plain JSON-able data).

    ``global_stores``: this worker's copy of the global tables, kept between work units (a
    fresh copy is built when None); brought to ``spec.global_ends`` before any task runs."""
    started = time.perf_counter()
    state_dir = client_state_dir(config, spec.client)
    attempt = uuid.uuid4().hex[:12]
    if topology.global_stores and spec.active:
        if global_stores is None:
            global_stores = new_global_stores(topology, config)
        global_stores.update(log_, spec.global_ends)
    reports = []
    for active in spec.active:
        reports.append(
            _run_active(
                topology,
                config,
                log_,
                spec,
                active,
                state_dir,
                attempt,
                stores_factory,
                global_stores,
            )
        )
    standbys = {}
    if stores_factory is not None:
        for task_id in spec.standby:
            standbys[task_id] = _update_standby(
                topology, config, log_, task_id, state_dir, stores_factory
            )
    return {
        "client": spec.client,
        "batch": spec.batch,
        "stage": spec.stage,
        "tasks": reports,
        "standbys": standbys,
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
    }


def _run_active(
    topology: Topology,
    config: StreamsConfig,
    log_: Log,
    spec: WorkUnitSpec,
    active: ActiveSpec,
    state_dir: Path,
    attempt: str,
    stores_factory: TaskStoresFactory | None,
    global_stores: GlobalStores | None,
) -> dict[str, Any]:
    started = time.perf_counter()
    collector = SegmentCollector(log_)
    sub = topology.subtopology(active.subtopology)
    stores = None
    if stores_factory is not None and sub.stores:
        stores = stores_factory(
            topology=topology,
            config=config,
            log=log_,
            store_names=list(sub.stores),
            batch=spec.batch,
        )
    task = StreamTask(
        topology,
        active.subtopology,
        active.partition,
        collector,
        application_id=config.application_id,
        state_dir=state_dir,
        default_key_serde=config.default_key_serde,
        default_value_serde=config.default_value_serde,
        committed=TaskCommittedState.from_dict(active.state),
        deserialization_handler=config.deserialization_exception_handler,
        processing_handler=config.processing_exception_handler,
        dead_letter_topic=config.errors_dead_letter_topic,
        invalid_timestamp_handler=config.invalid_timestamp_handler,
        default_timestamp_extractor=config.default_timestamp_extractor,
        cache_enabled=config.cache_enabled,
        stores=stores,
        batch_processing=config.batch_processing,
        global_stores=global_stores,
    )
    phases = _Phases()
    try:
        task.initialize()
        phases.mark("restore")
        restored = task.metrics.get("records-restored")
        read = 0
        for topic, (start, end) in active.ranges.items():
            if end > start:
                read += task.add_table(topic, log_.read_table(topic, active.partition, start, end))
        phases.mark("read")
        task.process()
        task.punctuate_wall_clock()
        phases.mark("process")
        state = task.commit()
        phases.mark("commit")
        offsets = dict(state.offsets)
        for topic, (_start, end) in active.ranges.items():
            offsets[offset_key(topic, active.partition)] = end
        state = replace(state, offsets=offsets)
        output_counts = collector.counts()
        prefix = writer_prefix(config.application_id, spec.batch, spec.stage)
        writer = f"{prefix}{active.task_id}/{attempt}"
        segments = collector.write_segments(writer)
        phases.mark("write")
        local_offsets = stores.local_offsets() if stores is not None else {}
    finally:
        task.close()
        phases.mark("close")
    return {
        "task": active.task_id,
        "state": state.to_dict(),
        "segments": [s.as_dict() for s in segments],
        "input_records": read,
        "output_records": output_counts,
        "restored_records": restored,
        "metrics": task.metrics.as_dict(),
        "local_offsets": local_offsets,
        "phases_ms": phases.spent,
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
    }


def new_global_stores(topology: Topology, config: StreamsConfig) -> GlobalStores:
    """An empty copy of the topology's global tables (filled by ``GlobalStores.update``)."""
    return GlobalStores(
        topology, config.application_id, config.default_key_serde, config.default_value_serde
    )


class _Phases:
    """Wall time spent in each phase of a task's run, for the report."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._last = time.perf_counter()

    def mark(self, phase: str) -> None:
        now = time.perf_counter()
        self.spent[phase] = round((now - self._last) * 1000, 3)
        self._last = now


def _update_standby(
    topology: Topology,
    config: StreamsConfig,
    log_: Log,
    task_id: str,
    state_dir: Path,
    stores_factory: TaskStoresFactory,
) -> dict[str, Any]:
    subtopology, partition = (int(part) for part in task_id.split("_"))
    stores = stores_factory(
        topology=topology,
        config=config,
        log=log_,
        store_names=list(topology.subtopology(subtopology).stores),
    )
    standby = StandbyTask(
        topology,
        subtopology,
        partition,
        log_,
        application_id=config.application_id,
        state_dir=state_dir,
        default_key_serde=config.default_key_serde,
        default_value_serde=config.default_value_serde,
        stores=stores,
    )
    return standby.update_once()
