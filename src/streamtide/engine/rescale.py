"""``rescale``: grow or shrink a running application's executors (``StreamsApp.scale``).

Growing asks the cluster manager for the new executors; the next batches give them warm-up
tasks. Shrinking drains the executors with the fewest active tasks: a batch assigns them
nothing (their tasks go to their standbys), their work units stop, and then they are removed.
The cluster manager must let the application choose its executors (``engine.scaling``)."""

from __future__ import annotations

from typing import Any

from streamtide.engine import scaling
from streamtide.engine.batch_loop import BatchLoop
from streamtide.engine.interop import list_executors
from streamtide.engine.placing import Placing
from streamtide.engine.stage_runner import StageRunner


def rescale(
    sc: Any,
    executors: int,
    timeout: float,
    placing: Placing,
    loop: BatchLoop,
    runner: StageRunner,
) -> list[str]:
    """Bring the application to ``executors`` executors; returns the live ids."""
    scaling.check_scalable(sc)
    live = list_executors(sc)
    if executors > len(live):
        scaling.request_total(sc, executors)
        return scaling.await_executors(
            sc,
            lambda ids: len(ids) >= executors,
            timeout,
            f"{executors} executors did not register",
        )
    if executors == len(live):
        return [e.id for e in live]
    owned = {e.id: 0 for e in live}
    for owner in placing.placement.owners.values():
        if owner in owned:
            owned[owner] += 1
    order = sorted(live, key=lambda e: (owned[e.id], -_id_rank(e.id)))
    leaving = {e.id for e in order[: len(live) - executors]}
    placing.draining |= leaving
    try:
        loop.await_next_batch(timeout)  # one that assigns the leaving executors nothing
        if runner.routes is not None:
            runner.routes.retire_executors(leaving, timeout)
        scaling.kill(sc, sorted(leaving))
        scaling.request_total(sc, executors)
        ids = scaling.await_executors(
            sc,
            lambda ids: not leaving & set(ids),
            timeout,
            f"executors {sorted(leaving)} were not removed",
        )
        placing.removed |= leaving
    finally:
        placing.draining -= leaving
    return ids


def _id_rank(executor_id: str) -> int:
    """Executors' ids grow as they are started (non-numeric ids rank first)."""
    return int(executor_id) if executor_id.isdigit() else -1
