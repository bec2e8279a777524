"""The assignor's input, validated and indexed by task.

Indexing once keeps every step of the assignor linear in tasks x (a few clients) instead of
scanning every client's history for every task.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from streamtide.errors import ConfigError
from streamtide.task_id import TaskId

from .client_state import ClientState
from .config import AssignorConfig


def _task_list(name: str, tasks: Iterable[TaskId]) -> list[TaskId]:
    """The distinct tasks of ``tasks`` in TaskId order; rejects anything but TaskId values."""
    if isinstance(tasks, (str, bytes)) or not isinstance(tasks, Iterable):
        raise ConfigError(f"{name} must be a collection of TaskId, got {tasks!r}")
    items = list(tasks)
    for task in items:
        if not isinstance(task, TaskId):
            raise ConfigError(f"{name} must hold TaskId values, got {task!r}")
    return sorted(set(items))


class Cluster:
    """Clients and tasks of one assignment, with per-task lookups of the clients' history.

    ``ids`` are the client ids in ascending order ("lowest client id" is string order).
    ``weight[c]`` scales an active or standby count to an exact integer load: count x weight
    orders clients exactly like count / slots, without fractions.
    """

    def __init__(
        self,
        clients: Mapping[str, ClientState],
        tasks: Iterable[TaskId],
        stateful: Iterable[TaskId],
        config: AssignorConfig,
    ) -> None:
        if not isinstance(config, AssignorConfig):
            raise ConfigError(f"config must be an AssignorConfig, got {config!r}")
        if not isinstance(clients, Mapping):
            raise ConfigError(
                f"clients must be a mapping of client id to ClientState, got {clients!r}"
            )
        if not clients:
            raise ConfigError("cannot assign tasks without clients: clients is empty")
        for cid, state in clients.items():
            if not isinstance(cid, str) or not cid:
                raise ConfigError(f"client ids must be non-empty strings, got {cid!r}")
            if not isinstance(state, ClientState):
                raise ConfigError(f"client {cid} must be a ClientState, got {state!r}")
        self.config = config
        self.ids: list[str] = sorted(clients)
        self.tasks: list[TaskId] = _task_list("tasks", tasks)
        known = set(self.tasks)
        stateful_list = _task_list("stateful", stateful)
        unknown = [t for t in stateful_list if t not in known]
        if unknown:
            listed = ", ".join(str(t) for t in unknown)
            raise ConfigError(f"stateful tasks that are not in tasks: {listed}")
        self.stateful: frozenset[TaskId] = frozenset(stateful_list)
        self.stateful_tasks: list[TaskId] = stateful_list

        self.slots: dict[str, int] = {c: clients[c].slots for c in self.ids}
        self.total_slots = sum(self.slots.values())
        scale = math.lcm(*self.slots.values())
        self.weight: dict[str, int] = {c: scale // s for c, s in self.slots.items()}

        # History of tasks that are no longer in the topology is ignored.
        self.prev_owner: dict[TaskId, str] = {}
        self.holders: dict[TaskId, list[str]] = {}
        self.finite_lags: dict[TaskId, dict[str, int]] = {}
        for cid in self.ids:
            state = clients[cid]
            for task in state.prev_active:
                if task not in known:
                    continue
                other = self.prev_owner.get(task)
                if other is not None:
                    raise ConfigError(
                        f"task {task} is reported as active by both {other} and {cid}"
                    )
                self.prev_owner[task] = cid
                if task in self.stateful:
                    self.finite_lags.setdefault(task, {})[cid] = 0
            for task in state.prev_standby:
                if task not in known:
                    continue
                self.holders.setdefault(task, []).append(cid)  # ids ascend: lists stay sorted
                if task in self.stateful and task in state.lags:
                    self.finite_lags.setdefault(task, {})[cid] = state.lags[task]

    def lag(self, client: str, task: TaskId) -> float:
        """Lag of ``client`` on ``task``: 0 for stateless tasks and the previous owner."""
        if task not in self.stateful:
            return 0
        return self.finite_lags.get(task, {}).get(client, math.inf)

    def caught_up(self, client: str, task: TaskId) -> bool:
        return self.lag(client, task) <= self.config.acceptable_recovery_lag
