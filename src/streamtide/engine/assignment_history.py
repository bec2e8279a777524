"""The assignment history: which tasks moved between executors, when and why.

After every batch the driver compares the batch's membership and assignment with the
previous batch's (``Placement``) and records what changed as ``HistoryEvent`` values: executors
that joined, were lost or were removed; replicas that started warming up (a learner: a warm-up
task, or a standby placed for a pending move) or became standbys; and task moves, each with
its reason, the new owner's changelog lag when the move was decided, and the records and time
its restore took in the batch that moved it. The application directory keeps the latest
events (``AppDirectory.append_history``); ``streamtide status --history N`` shows them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from streamtide.task_id import TaskId


class EventKind(enum.Enum):
    EXECUTOR_JOINED = "executor-joined"
    EXECUTOR_LOST = "executor-lost"
    EXECUTOR_REMOVED = "executor-removed"
    WARMUP = "warm-up"
    STANDBY = "standby"
    MOVE = "move"


class MoveReason(enum.Enum):
    #: the previous owner disappeared (crashed, or was taken away by the cluster manager)
    EXECUTOR_LOST = "executor lost"
    #: the previous owner was removed on purpose (``StreamsApp.scale``): a graceful hand-over
    EXECUTOR_REMOVED = "executor removed"
    #: the new owner's warm-up (or standby) caught up within ``acceptable_recovery_lag``
    WARMUP_CAUGHT_UP = "warm-up caught up"
    #: a stateless task (nothing to warm up) went to an executor that joined
    NEW_EXECUTOR = "new executor"
    #: any other re-balancing move
    REBALANCE = "rebalance"


@dataclass(frozen=True)
class HistoryEvent:
    """One change of the assignment. ``at`` is the epoch ms of the batch's commit; ``lag`` is
    the changelog lag of ``target``'s copy when the assignment was computed (None: no copy)."""

    batch: int
    at: int
    kind: EventKind
    task: str | None = None
    source: str | None = None
    target: str | None = None
    reason: MoveReason | None = None
    lag: int | None = None
    restored_records: int | None = None
    restore_ms: int | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kind"] = self.kind.value
        data["reason"] = self.reason.value if self.reason is not None else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HistoryEvent:
        reason = data.get("reason")
        return cls(
            batch=int(data["batch"]),
            at=int(data["at"]),
            kind=EventKind(data["kind"]),
            task=data.get("task"),
            source=data.get("source"),
            target=data.get("target"),
            reason=MoveReason(reason) if reason is not None else None,
            lag=data.get("lag"),
            restored_records=data.get("restored_records"),
            restore_ms=data.get("restore_ms"),
        )


@dataclass
class Placement:
    """Where tasks were in one batch: live executors, active owners and replicas.

    ``warmups`` holds every replica placed for a pending move (warm-up tasks, and standbys
    that are a task's learner); ``standbys`` the other replicas."""

    executors: set[str] = field(default_factory=set)
    owners: dict[str, str] = field(default_factory=dict)
    standbys: dict[str, set[str]] = field(default_factory=dict)
    warmups: dict[str, set[str]] = field(default_factory=dict)

    def replicas(self, client: str) -> set[str]:
        return self.standbys.get(client, set()) | self.warmups.get(client, set())


@dataclass(frozen=True)
class TaskRestore:
    """What a task restored in one batch."""

    records: int = 0
    ms: int = 0


def changes(
    batch: int,
    at: int,
    before: Placement,
    after: Placement,
    *,
    removed: frozenset[str] = frozenset(),
    lags: Mapping[tuple[str, str], int] | None = None,
    restores: Mapping[str, TaskRestore] | None = None,
) -> list[HistoryEvent]:
    """The events between two consecutive batches' placements (a pure function).

    ``removed``: executors taken away on purpose (their disappearance is a removal, not a
    loss); ``lags``: each client's changelog lag per task as the assignor saw it;
    ``restores``: what each task restored in the ``after`` batch."""
    lags = lags or {}
    restores = restores or {}
    events: list[HistoryEvent] = []

    def event(kind: EventKind, **fields: Any) -> None:
        events.append(HistoryEvent(batch, at, kind, **fields))

    joined = sorted(after.executors - before.executors, key=_client_order)
    gone = sorted(before.executors - after.executors, key=_client_order)
    if before.executors:  # the first batch of a run has nothing to compare with
        for client in joined:
            event(EventKind.EXECUTOR_JOINED, target=client)
    for client in gone:
        kind = EventKind.EXECUTOR_REMOVED if client in removed else EventKind.EXECUTOR_LOST
        event(kind, source=client)
    for client in sorted(after.executors, key=_client_order):
        for task in sorted(
            after.warmups.get(client, set()) - before.replicas(client), key=TaskId.parse
        ):
            event(EventKind.WARMUP, task=task, target=client, lag=lags.get((client, task)))
        fresh = after.standbys.get(client, set()) - before.replicas(client)
        for task in sorted(fresh, key=TaskId.parse):
            event(EventKind.STANDBY, task=task, target=client, lag=lags.get((client, task)))
    for task in sorted(after.owners, key=TaskId.parse):
        source, target = before.owners.get(task), after.owners[task]
        if source is None or source == target:
            continue
        if source not in after.executors:
            reason = MoveReason.EXECUTOR_REMOVED if source in removed else MoveReason.EXECUTOR_LOST
        elif task in before.replicas(target):
            reason = MoveReason.WARMUP_CAUGHT_UP
        elif target in joined or target not in before.executors:
            reason = MoveReason.NEW_EXECUTOR
        else:
            reason = MoveReason.REBALANCE
        restore = restores.get(task, TaskRestore())
        event(
            EventKind.MOVE,
            task=task,
            source=source,
            target=target,
            reason=reason,
            lag=lags.get((target, task)),
            restored_records=restore.records,
            restore_ms=restore.ms,
        )
    return events


def _client_order(client: str) -> tuple[int, str]:
    return (int(client), "") if client.isdigit() else (1 << 62, client)
