"""The outcome of one assignment: what each client runs, keeps warm or restores."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from streamtide.task_id import TaskId


def frozen_per_client(
    per_client: Mapping[str, Iterable[TaskId]],
) -> Mapping[str, frozenset[TaskId]]:
    """A read-only copy of a per-client task collection, clients in sorted order."""
    return MappingProxyType({c: frozenset(per_client[c]) for c in sorted(per_client)})


def _listed(tasks: frozenset[TaskId]) -> str:
    return ",".join(str(t) for t in sorted(tasks)) or "-"


@dataclass(frozen=True)
class Assignment:
    """Active, standby and warm-up tasks for every client id (empty sets included).

    ``followup_needed`` is True while some task waits on a learner to catch up before it moves;
    the caller should assign again once the learners have restored. ``learners`` names, per
    client, the replicas (standby or warm-up) placed there for such a pending move.
    """

    active: Mapping[str, frozenset[TaskId]]
    standby: Mapping[str, frozenset[TaskId]]
    warmup: Mapping[str, frozenset[TaskId]]
    followup_needed: bool
    learners: Mapping[str, frozenset[TaskId]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "active", frozen_per_client(self.active))
        object.__setattr__(self, "standby", frozen_per_client(self.standby))
        object.__setattr__(self, "warmup", frozen_per_client(self.warmup))
        object.__setattr__(self, "learners", frozen_per_client(self.learners))

    __hash__ = None  # type: ignore[assignment]  # holds mappings

    def owner(self, task: TaskId) -> str | None:
        """The client that runs ``task`` as active, or None if the task was not assigned."""
        for client, tasks in self.active.items():
            if task in tasks:
                return client
        return None

    def describe(self) -> str:
        """One log line: ``client: active ... / standby ... / warm-up ...`` per client."""
        parts = [
            f"{c}: active {_listed(self.active[c])} / standby {_listed(self.standby[c])}"
            f" / warm-up {_listed(self.warmup[c])}"
            for c in self.active
        ]
        parts.append("follow-up needed" if self.followup_needed else "stable")
        return "; ".join(parts)

    def __str__(self) -> str:
        return self.describe()
