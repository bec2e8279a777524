"""What one client (executor) reports before an assignment."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from streamtide.errors import ConfigError
from streamtide.task_id import TaskId


def _task_set(name: str, tasks: Iterable[TaskId]) -> frozenset[TaskId]:
    if isinstance(tasks, (str, bytes)):
        raise ConfigError(f"{name} must be a collection of TaskId, got {tasks!r}")
    result = frozenset(tasks)
    for task in result:
        if not isinstance(task, TaskId):
            raise ConfigError(f"{name} must hold TaskId values, got {task!r}")
    return result


@dataclass(frozen=True)
class ClientState:
    """A client's capacity and history, as its subscription reported them.

    ``slots``: task slots (executor cores), at least 1.
    ``prev_active``: tasks it ran as active in the last assignment (they have lag 0).
    ``prev_standby``: every other task it holds local state for: standbys, warm-ups, actives
    still restoring and copies left from older assignments.
    ``lags``: changelog lag per task of ``prev_standby`` (committed end - local offset, summed
    over the task's stores). A standby without a lag has unknown, i.e. infinite, lag; a lag
    given for a ``prev_active`` task is ignored (it is 0 by definition).
    """

    slots: int
    prev_active: frozenset[TaskId] = frozenset()
    prev_standby: frozenset[TaskId] = frozenset()
    lags: Mapping[TaskId, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.slots, bool) or not isinstance(self.slots, int):
            raise ConfigError(f"slots must be an int, got {self.slots!r}")
        if self.slots < 1:
            raise ConfigError(f"slots must be >= 1, got {self.slots}")
        active = _task_set("prev_active", self.prev_active)
        standby = _task_set("prev_standby", self.prev_standby)
        both = active & standby
        if both:
            listed = ", ".join(str(t) for t in sorted(both))
            raise ConfigError(f"tasks reported both as active and as standby: {listed}")
        if not isinstance(self.lags, Mapping):
            raise ConfigError(f"lags must be a mapping of TaskId to int, got {self.lags!r}")
        lags = dict(self.lags)
        for task, lag in lags.items():
            if not isinstance(task, TaskId):
                raise ConfigError(f"lags keys must be TaskId, got {task!r}")
            if isinstance(lag, bool) or not isinstance(lag, int):
                raise ConfigError(f"lag of task {task} must be an int, got {lag!r}")
            if lag < 0:
                raise ConfigError(f"lag of task {task} must be >= 0, got {lag}")
            if task not in standby and task not in active:
                raise ConfigError(
                    f"lag given for task {task}, which the client reports neither as active "
                    "nor as standby"
                )
        object.__setattr__(self, "prev_active", active)
        object.__setattr__(self, "prev_standby", standby)
        object.__setattr__(self, "lags", MappingProxyType(lags))

    def lag(self, task: TaskId) -> float:
        """This client's lag on a stateful ``task``: 0 if it ran it, infinite without state."""
        if task in self.prev_active:
            return 0
        return self.lags.get(task, float("inf"))
