"""The work unit: what one task slot does for one stage of a batch, independent of Spark.

Spark runs it inside a pinned Python task; tests can call it directly. It restores each
active task's stores, processes the task's fixed input ranges, punctuates, writes outputs and
changelog records as unsealed segments, then brings standby tasks up to date, closes every
store, and reports results and local changelog offsets (lags) to the driver. All its tasks'
outputs and changelog records are written together at the end (``runtime.unit_writes``; on
Kafka in one transaction of the unit's producer, ``runtime.kafka_unit_commit``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamtide.config import StreamsConfig
from streamtide.log.api import Log
from streamtide.processor.topology import Topology
from streamtide.runtime.global_stores import GlobalStores
from streamtide.runtime.kafka_task_commit import unit_transactional_id
from streamtide.runtime.task_host import TaskHost, new_attempt
from streamtide.task_id import TaskId


@dataclass
class ActiveSpec:
    """An active task to run: its input ranges ``{topic: [start, end)}`` and committed state."""

    task_id: str
    ranges: dict[str, list[int]]
    state: dict[str, Any]

    @property
    def subtopology(self) -> int:
        return TaskId.parse(self.task_id).subtopology

    @property
    def partition(self) -> int:
        return TaskId.parse(self.task_id).partition


@dataclass
class WorkUnitSpec:
    """Everything one slot needs for one stage (sent to the executor as JSON)."""

    batch: int
    stage: int
    client: str
    active: list[ActiveSpec]
    standby: list[str] = field(default_factory=list)
    #: committed input offsets of the standby tasks (``"topic:partition"`` -> offset)
    standby_offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    #: end offset per partition of each global table's topic the batch reads up to
    global_ends: dict[str, list[int]] = field(default_factory=dict)
    #: Kafka: the ``transactional.id`` of the unit's producer, handed out by the driver
    #: (``engine.unit_ids``); None: the slot's first generation (tests without a driver)
    transactional_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "stage": self.stage,
            "client": self.client,
            "active": [a.__dict__ for a in self.active],
            "standby": list(self.standby),
            "standby_offsets": dict(self.standby_offsets),
            "global_ends": self.global_ends,
            "transactional_id": self.transactional_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkUnitSpec:
        return cls(
            int(data["batch"]),
            int(data["stage"]),
            str(data["client"]),
            [ActiveSpec(**a) for a in data["active"]],
            list(data.get("standby", [])),
            dict(data.get("standby_offsets", {})),
            {str(t): [int(e) for e in ends] for t, ends in data.get("global_ends", {}).items()},
            data.get("transactional_id"),
        )


#: ``factory(topology=, config=, log=, store_names=, batch=) -> TaskStores`` for durable
#: stores (``runtime.state_factory.make_task_stores``).
TaskStoresFactory = Callable[..., Any]


#: Standby and warm-up tasks catch up after the active tasks, for as long as those took to
#: process their input (opening and restoring excluded; at least ``REPLICA_BUDGET_MIN_S``),
#: each store at least ``REPLICA_STEP`` records per batch. Processing time bounds the
#: changelog records the batch wrote, so standbys keep up; a replica built from scratch (a new
#: standby after a failover, a warm-up on a new executor) takes several batches instead of
#: holding up the commit of the batch, which in a failover is the one that recovers. For the
#: same reason a long-running work unit opens a replica it does not hold yet only in a run
#: whose active tasks opened nothing (not in a failover or a retried batch: Kafka Streams
#: likewise updates standbys only once no active task is restoring) and only while the budget
#: lasts after the replicas it holds: new replicas then start one after another, not all in
#: the batch that follows a failover.
REPLICA_BUDGET_MIN_S = 0.05
REPLICA_STEP = 2_000


def client_state_dir(config: StreamsConfig, client: str) -> Path:
    """Where one executor keeps its tasks' local state (executors may share a disk):
    ``state_dir`` as this host expands it (``StreamsConfig.local_state_dir``)."""
    return config.local_state_dir() / f"client-{client}"


def writer_prefix(application_id: str, batch: int, stage: int) -> str:
    return f"{application_id}/b{batch}/s{stage}/"


def run_work_unit(
    topology: Topology,
    config: StreamsConfig,
    log_: Log,
    spec: WorkUnitSpec,
    stores_factory: TaskStoresFactory | None = None,
    global_stores: GlobalStores | None = None,
    host: TaskHost | None = None,
) -> dict[str, Any]:
    """Run ``spec`` and return the report the driver commits (plain JSON-able data).

    Without ``host`` every task is opened and closed within the call (micro-batch
    execution); a long-running work unit passes the ``TaskHost`` that keeps them open.
    ``global_stores``: the worker's copy of the global tables, kept between work units (a
    fresh copy is built when None); brought to ``spec.global_ends`` before any task runs."""
    started = time.perf_counter()
    own_host = host is None
    if host is None:
        host = TaskHost(
            topology,
            config,
            log_,
            stores_factory,
            client_state_dir(config, spec.client),
            global_stores=global_stores,
        )
    if topology.global_stores and spec.active:
        host.update_global_stores(spec.global_ends)
    attempt = new_attempt()
    prefix = writer_prefix(config.application_id, spec.batch, spec.stage)
    opened = host.opened
    try:
        if spec.active:
            host.begin_unit(
                spec.transactional_id
                or unit_transactional_id(config.application_id, spec.client, 0, spec.stage, 0),
                [active.task_id for active in spec.active],
            )
        reports = [
            host.run_active(
                active.task_id,
                active.ranges,
                active.state,
                f"{prefix}{active.task_id}/{attempt}",
                spec.batch,
            )
            for active in spec.active
        ]
        _add_write_time(reports, host.write_outputs(f"{prefix}unit/{attempt}"))
        standbys: dict[str, Any] = {}
        if stores_factory is not None:
            deadline = time.perf_counter() + max(REPLICA_BUDGET_MIN_S, _processing_s(reports))
            held = host.held if host.keep_open else None  # None: every replica opens anyway
            restoring = host.opened > opened
            for task_id in sorted(spec.standby, key=lambda t: held is not None and t not in held):
                new = held is not None and task_id not in held
                if new and (restoring or time.perf_counter() >= deadline):
                    continue  # a new replica waits for a run with time to spare
                standbys[task_id] = host.update_standby(
                    task_id, spec.standby_offsets.get(task_id), deadline, REPLICA_STEP
                )
    except BaseException:
        host.discard_runs()  # a failed run reports nothing: nothing of it is written
        raise
    finally:
        if own_host:
            host.close()
    return {
        "client": spec.client,
        "batch": spec.batch,
        "stage": spec.stage,
        "tasks": reports,
        "standbys": standbys,
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
    }


def _add_write_time(reports: list[dict[str, Any]], ms: float) -> None:
    """Share the work unit's time writing its tasks' outputs among their reports (a task's
    ``write`` phase: what writing its own segments used to cost it)."""
    for report in reports:
        share = round(ms / len(reports), 3)
        phases = report.setdefault("phases_ms", {})
        phases["write"] = round(phases.get("write", 0.0) + share, 3)
        report["duration_ms"] = round(report["duration_ms"] + share, 3)


def _processing_s(reports: list[dict[str, Any]]) -> float:
    """Seconds the active tasks of a run spent on their input (not opening or restoring)."""
    return float(
        sum(r.get("duration_ms", 0.0) - r.get("phases_ms", {}).get("restore", 0.0) for r in reports)
        / 1000
    )
