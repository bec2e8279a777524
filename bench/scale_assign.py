"""The assignor at 200 clients and 4,000 stateful tasks with one standby, in a steady cluster
(every client reports the tasks it ran and the standbys it keeps, a few hundred records
behind): the assignor alone (``assign``) and the driver's whole assignment step (the
executors' reports to subscriptions, lags from the committed changelog ends, ``assign``),
medians of several runs. Part of ``bench/driver_scale.py``."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

CLIENTS = 200
STAGES = 4
PARTITIONS = 1000  # 4 x 1,000 = 4,000 tasks, all stateful


def _median_ms(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return round(statistics.median(times) * 1000, 2)


def assignment_step_ms(runs: int = 7) -> dict[str, float]:
    """``{"assign_ms": ..., "step_ms": ...}`` (see the module docstring)."""
    from streamtide.assignment import assign
    from streamtide.config import StreamsConfig
    from streamtide.engine.interop import ExecutorInfo
    from streamtide.engine.placement import ClientReport, compute_assignment, subscriptions
    from streamtide.engine.plan import Stage

    rng = random.Random(11)
    stages = [
        Stage(s, PARTITIONS, (f"in-{s}",), ("store",), {"store": f"store-{s}-changelog"})
        for s in range(STAGES)
    ]
    stateful = {t for stage in stages for t in stage.task_ids}
    executors = [ExecutorInfo(str(i), f"host-{i}", 1) for i in range(1, CLIENTS + 1)]
    config = StreamsConfig(num_standby_replicas=1)
    ends = {t: 1_000 + rng.randint(0, 50_000) for t in stateful}

    def step(reports: dict[str, ClientReport]) -> Any:
        subs = subscriptions(executors, reports, stateful)
        return compute_assignment(stages, subs, ends.__getitem__, config, assign)

    first = step({})
    reports = {
        client: ClientReport(
            {str(t) for t in first.active[client]},
            {
                str(t): ends[str(t)] - rng.randint(0, 500)
                for t in first.standby[client] | first.warmup[client]
            },
        )
        for client in first.active
    }
    subs = subscriptions(executors, reports, stateful)
    task_ids = [t for stage in stages for t in stage.task_ids]
    from streamtide.assignment import AssignorConfig, TaskId

    clients = {
        c: sub.client_state({TaskId.parse(t): e for t, e in ends.items()})
        for c, sub in subs.items()
    }
    tasks = [TaskId.parse(t) for t in task_ids]
    cfg = AssignorConfig(num_standby_replicas=1)
    return {
        "clients": CLIENTS,
        "tasks": len(task_ids),
        "assign_ms": _median_ms(lambda: assign(clients, tasks, tasks, cfg), runs),
        "step_ms": _median_ms(lambda: step(reports), runs),
    }
