"""From executors and their reports to an assignment, and from an assignment to work units."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from streamtide.assignment import (
    Assignment,
    AssignorConfig,
    SubscriptionInfo,
    TaskId,
    assign,
)
from streamtide.config import StreamsConfig
from streamtide.engine.interop import ExecutorInfo
from streamtide.engine.plan import Stage
from streamtide.engine.protocol import UnitReport

#: The assignor is a pure function with the signature of ``streamtide.assignment.assign``.
Assignor = Callable[..., Assignment]


@dataclass
class ClientReport:
    """What the driver knows of one executor between batches: the tasks it ran as active
    and, for every other task it holds local state for, the sum of its local changelog
    offsets (over the task's stores)."""

    running: set[str] = field(default_factory=set)
    offset_sums: dict[str, int] = field(default_factory=dict)


def subscriptions(
    executors: list[ExecutorInfo], reports: Mapping[str, ClientReport], stateful: set[str]
) -> dict[str, SubscriptionInfo]:
    """Each live executor's subscription record, built from its last report."""
    subs = {}
    for executor in executors:
        report = reports.get(executor.id, ClientReport())
        standby = {t: n for t, n in report.offset_sums.items() if t not in report.running}
        subs[executor.id] = SubscriptionInfo(
            executor.id,
            executor.host,
            max(1, executor.cores),
            prev_active=frozenset(TaskId.parse(t) for t in report.running),
            prev_standby=frozenset(TaskId.parse(t) for t in standby if t in stateful),
            offset_sums={TaskId.parse(t): n for t, n in standby.items() if t in stateful},
        )
    return subs


def reports_from(subs: Mapping[str, SubscriptionInfo]) -> dict[str, ClientReport]:
    """The reports a subscription record describes (how a restarted driver resumes)."""
    return {
        client: ClientReport(
            {str(t) for t in sub.prev_active},
            {str(t): n for t, n in sub.offset_sums.items()},
        )
        for client, sub in subs.items()
    }


def record_stage_reports(
    reports: dict[str, ClientReport], stage_tasks: Iterable[str], units: Iterable[UnitReport]
) -> None:
    """Update the reports with one stage's work-unit results: its tasks ran where the units
    ran them (and nowhere else any more); local offsets are kept per task for when a copy
    becomes a standby."""
    stage_tasks = set(stage_tasks)
    for report in reports.values():
        report.running -= stage_tasks
    for unit in units:
        report = reports.setdefault(unit.client, ClientReport())
        for result in unit.tasks:
            report.running.add(result.task)
            if result.local_offsets:
                report.offset_sums[result.task] = sum(result.local_offsets.values())
        for task, standby in unit.standbys.items():
            report.offset_sums[task] = sum(standby.get("local_offsets", {}).values())


def compute_assignment(
    stages: list[Stage],
    subs: Mapping[str, SubscriptionInfo],
    changelog_end_sum: Callable[[str], int],
    config: StreamsConfig,
    assignor: Assignor = assign,
) -> Assignment:
    """Assign every task of every stage over the subscribed executors (sticky, with
    standbys); lags come from the subscriptions' offset sums and the committed ends."""
    tasks = [TaskId.parse(t) for stage in stages for t in stage.task_ids]
    stateful = [
        TaskId.parse(t) for stage in stages if stage.changelog_topics for t in stage.task_ids
    ]
    ends = {task: changelog_end_sum(str(task)) for task in stateful}
    clients = {client: sub.client_state(ends) for client, sub in subs.items()}
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
) -> list[tuple[ExecutorInfo, int, list[str], list[str]]]:
    """Split one stage's tasks of each executor over its slots:
    (executor, slot, actives, standbys).

    Units without any task are left out.
    """
    units = []
    stage_tasks = set(stage.task_ids)
    for executor in executors:
        active = [
            str(t) for t in sorted(assignment.active.get(executor.id, ())) if str(t) in stage_tasks
        ]
        replicas = set(assignment.standby.get(executor.id, ())) | set(
            assignment.warmup.get(executor.id, ())
        )
        standby = [str(t) for t in sorted(replicas) if str(t) in stage_tasks]
        slots = max(1, executor.cores)
        for slot in range(slots):
            mine = active[slot::slots]
            spare = standby[slot::slots]
            if mine or spare:
                units.append((executor, slot, mine, spare))
    return units


def standby_shortfall(wanted: int, executors: list[ExecutorInfo]) -> str | None:
    """Why fewer than ``wanted`` standbys per task can be kept on ``executors`` (a standby
    lives on another executor than its active task), or None if all of them can."""
    if wanted <= 0 or len(executors) > wanted:
        return None
    if len(executors) == 1:
        return (
            f"num_standby_replicas={wanted}, but the application has one executor "
            f"({executors[0].id}): a standby must live on another executor than its active "
            "task, so none are kept; run on a cluster (local-cluster[N,C,M], spark://..., yarn, "
            "k8s://...) for standbys"
        )
    return (
        f"num_standby_replicas={wanted}, but with {len(executors)} executors each task keeps at "
        f"most {len(executors) - 1} standby(s): a standby must live on another executor than "
        "its active task"
    )
