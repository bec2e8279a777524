"""From executors and their reports to an assignment, and from an assignment to work units."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from streamtide.assignment import Assignment, AssignorConfig, ClientState, TaskId, assign
from streamtide.config import StreamsConfig
from streamtide.engine.interop import ExecutorInfo
from streamtide.engine.plan import Stage

#: The assignor is a pure function with the signature of ``streamtide.assignment.assign``.
Assignor = Callable[..., Assignment]


@dataclass
class ClientReport:
    """What the driver remembers of one executor between batches."""

    running: set[str] = field(default_factory=set)
    local_offsets: dict[str, dict[str, int]] = field(default_factory=dict)


def compute_assignment(
    executors: list[ExecutorInfo],
    stages: list[Stage],
    reports: Mapping[str, ClientReport],
    changelog_end: Callable[[str], dict[str, int]],
    config: StreamsConfig,
    assignor: Assignor = assign,
) -> Assignment:
    """Assign every task of every stage over the live executors (sticky, with standbys)."""
    tasks = [TaskId.parse(t) for stage in stages for t in stage.task_ids]
    stateful = [
        TaskId.parse(t) for stage in stages if stage.changelog_topics for t in stage.task_ids
    ]
    stateful_set = {str(t) for t in stateful}
    clients = {}
    for executor in executors:
        report = reports.get(executor.id, ClientReport())
        active = {t for t in report.running}
        standby = {t for t in report.local_offsets if t not in active and t in stateful_set}
        lags = {}
        for task in standby:
            end = changelog_end(task)
            local = report.local_offsets[task]
            lags[TaskId.parse(task)] = sum(
                max(0, end.get(store, 0) - local.get(store, 0)) for store in end
            )
        clients[executor.id] = ClientState(
            slots=max(1, executor.cores),
            prev_active=frozenset(TaskId.parse(t) for t in active),
            prev_standby=frozenset(TaskId.parse(t) for t in standby),
            lags=lags,
        )
    return assignor(
        clients,
        tasks,
        stateful,
        AssignorConfig(
            num_standby_replicas=config.num_standby_replicas,
            acceptable_recovery_lag=config.acceptable_recovery_lag,
            max_warmup_replicas=config.max_warmup_replicas,
        ),
    )


def slot_units(
    assignment: Assignment, executors: list[ExecutorInfo], stage: Stage
) -> list[tuple[ExecutorInfo, list[str], list[str]]]:
    """Split one stage's tasks of each executor over its slots: (executor, actives, standbys).

    Units without any task are left out.
    """
    units = []
    stage_tasks = set(stage.task_ids)
    for executor in executors:
        active = sorted(
            (str(t) for t in assignment.active.get(executor.id, ()) if str(t) in stage_tasks),
            key=_task_order,
        )
        replicas = set(assignment.standby.get(executor.id, ())) | set(
            assignment.warmup.get(executor.id, ())
        )
        standby = sorted((str(t) for t in replicas if str(t) in stage_tasks), key=_task_order)
        slots = max(1, executor.cores)
        for slot in range(slots):
            mine = active[slot::slots]
            spare = standby[slot::slots]
            if mine or spare:
                units.append((executor, mine, spare))
    return units


def _task_order(task: str) -> tuple[int, int]:
    sub, part = task.split("_")
    return int(sub), int(part)
