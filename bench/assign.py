"""Time the task assignor on a large cluster: 200 clients, 2,000 tasks, 1 standby.

Run: ``.venv/bin/python bench/assign.py [--strict]``. Prints the best time of several runs for
a fresh cluster, a steady one (the fixed point) and a scale-out (clients join and learn), next
to a round-robin placement of the same tasks timed in the same run, as a baseline for the
machine's speed. The budget is one second per assignment; ``--strict`` exits with status 1 when
a scenario exceeds it.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable

from streamtide.assignment import Assignment, AssignorConfig, ClientState, TaskId, assign

CLIENTS = 200
SUBTOPOLOGIES = 10
PARTITIONS = 200  # 10 x 200 = 2,000 tasks, half of them stateful
JOINING = 40
BUDGET_S = 1.0
CONFIG = AssignorConfig(
    num_standby_replicas=1, acceptable_recovery_lag=1_000, max_warmup_replicas=20
)


def best_of(runs: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def round_robin(ids: list[str], tasks: list[TaskId]) -> dict[str, list[TaskId]]:
    """The trivial baseline: task i to client i mod n."""
    placed: dict[str, list[TaskId]] = {cid: [] for cid in ids}
    for i, task in enumerate(tasks):
        placed[ids[i % len(ids)]].append(task)
    return placed


def reported(
    result: Assignment, slots: dict[str, int], rng: random.Random
) -> dict[str, ClientState]:
    """What the clients of ``result`` report next time: actives running, standbys near the end."""
    return {
        cid: ClientState(
            slots[cid],
            prev_active=result.active[cid],
            prev_standby=result.standby[cid] | result.warmup[cid],
            lags={t: rng.randint(0, 3_000) for t in result.standby[cid] | result.warmup[cid]},
        )
        for cid in result.active
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 when over budget")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    rng = random.Random(7)
    tasks = [TaskId(s, p) for s in range(SUBTOPOLOGIES) for p in range(PARTITIONS)]
    stateful = [t for t in tasks if t.subtopology % 2 == 1]
    slots = {f"client-{i:03d}": rng.choice((1, 2, 4)) for i in range(CLIENTS + JOINING)}
    ids = sorted(slots)[:CLIENTS]

    fresh = {cid: ClientState(slots[cid]) for cid in ids}
    first = assign(fresh, tasks, stateful, CONFIG)
    steady = reported(first, slots, rng)
    settled = assign(steady, tasks, stateful, CONFIG)
    scaled = {
        **reported(settled, slots, rng),
        **{c: ClientState(slots[c]) for c in sorted(slots)[CLIENTS:]},
    }
    moving = assign(scaled, tasks, stateful, CONFIG)

    baseline = best_of(args.runs, lambda: round_robin(ids, tasks))
    scenarios = {
        "fresh cluster": lambda: assign(fresh, tasks, stateful, CONFIG),
        "steady cluster": lambda: assign(steady, tasks, stateful, CONFIG),
        f"{JOINING} clients join": lambda: assign(scaled, tasks, stateful, CONFIG),
    }
    print(
        f"assign: {CLIENTS} clients, {len(tasks)} tasks ({len(stateful)} stateful), "
        f"{CONFIG.num_standby_replicas} standby; best of {args.runs} runs"
    )
    print(f"  {'round-robin baseline':<22} {baseline * 1000:8.2f} ms")
    over = False
    for name, run in scenarios.items():
        elapsed = best_of(args.runs, run)
        over |= elapsed > BUDGET_S
        print(f"  {name:<22} {elapsed * 1000:8.2f} ms   {elapsed / baseline:7.1f}x baseline")
    moved = sum(1 for t in tasks if moving.owner(t) != settled.owner(t))
    learning = sum(len(moving.standby[c] | moving.warmup[c]) for c in sorted(slots)[CLIENTS:])
    print(
        f"  (scale-out: {moved} tasks move at once, the joining clients restore {learning} "
        f"tasks first; follow-up needed: {moving.followup_needed})"
    )
    print(f"  (the steady cluster is a fixed point: {settled == first})")
    print(f"budget {BUDGET_S:.1f} s per assignment: {'EXCEEDED' if over else 'ok'}")
    return 1 if over and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
