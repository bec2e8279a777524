"""The sticky, cooperative task assignor (docs/assignment.md).

``assign`` runs in three passes, each walking tasks in TaskId order:

1. plan the active tasks: previous owner, else a previous standby holder, else the least-loaded
   client; this is the balanced target, at most a client's share rounded up;
2. defer moves to clients that lack the state: a stateful task planned on a client that is not
   caught up stays with its previous owner (or fails over to the most caught-up client), and the
   planned client becomes its learner;
3. place replicas: learners first (a standby slot, else a warm-up within the budget), then the
   remaining standbys by least lag, lowest load, lowest client id.

It is a pure function of its arguments: no clock, no randomness, no dependence on dict order.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from streamtide.task_id import TaskId

from .client_state import ClientState
from .cluster import Cluster
from .config import AssignorConfig
from .result import Assignment, frozen_per_client


class _LoadQueue:
    """Clients ordered by (load, client id), where a client's load only ever grows.

    A lazy heap: raising a load pushes a new entry and leaves the old one behind; entries whose
    load is no longer the client's current load are dropped when they reach the top.
    """

    def __init__(self, load: dict[str, int]) -> None:
        self.load = load
        self._heap = [(value, cid) for cid, value in load.items()]
        heapq.heapify(self._heap)

    def _clean_top(self) -> None:
        heap = self._heap
        while heap[0][0] != self.load[heap[0][1]]:
            heapq.heappop(heap)

    def lowest(self) -> tuple[int, str]:
        """(load, id) of the least-loaded client, lowest id first among equals."""
        self._clean_top()
        return self._heap[0]

    def add(self, cid: str, amount: int) -> None:
        self.load[cid] += amount
        heapq.heappush(self._heap, (self.load[cid], cid))

    def take_lowest(self, count: int, skip: set[str]) -> list[str]:
        """Up to ``count`` least-loaded clients not in ``skip``, best first; loads unchanged."""
        found: list[str] = []
        popped: list[tuple[int, str]] = []
        heap = self._heap
        while heap and len(found) < count:
            entry = heapq.heappop(heap)
            if entry[0] != self.load[entry[1]]:
                continue  # stale entry
            popped.append(entry)
            if entry[1] not in skip:
                found.append(entry[1])
        for entry in popped:
            heapq.heappush(heap, entry)
        return found


def _plan_actives(cl: Cluster) -> tuple[dict[TaskId, str], dict[str, int]]:
    """Steps 1-3: the balanced, sticky target owner of every task, and active counts."""
    n_tasks, total = len(cl.tasks), cl.total_slots
    count = dict.fromkeys(cl.ids, 0)

    def has_room(cid: str) -> bool:  # active count < tasks x slots / total slots
        return count[cid] * total < n_tasks * cl.slots[cid]

    plan: dict[TaskId, str] = {}
    # Step 1: back to the previous owner while it has room.
    for task in cl.tasks:
        owner = cl.prev_owner.get(task)
        if owner is not None and has_room(owner):
            plan[task] = owner
            count[owner] += 1
    # Step 2: to the previous standby holder with room, least lag, then lowest id.
    for task in cl.tasks:
        if task in plan:
            continue
        best: tuple[float, str] | None = None
        for cid in cl.holders.get(task, ()):
            if has_room(cid):
                key = (cl.lag(cid, task), cid)
                if best is None or key < best:
                    best = key
        if best is not None:
            plan[task] = best[1]
            count[best[1]] += 1
    # Step 3: to the least-loaded client; ties: previous owner, a previous holder, lowest id.
    # While a task is left, the least-loaded client is below tasks/total slots, so it has room:
    # no client ends above its share rounded up. For the same reason the two tie preferences
    # cannot decide after steps 1 and 2 (a remaining task's owner and holders had no room then
    # and have none now); they are kept so the step reads as specified.
    queue = _LoadQueue({cid: count[cid] * cl.weight[cid] for cid in cl.ids})
    for task in cl.tasks:
        if task in plan:
            continue
        lowest, choice = queue.lowest()
        owner = cl.prev_owner.get(task)
        if owner is not None and queue.load[owner] == lowest:
            choice = owner
        else:
            for cid in cl.holders.get(task, ()):
                if queue.load[cid] == lowest:
                    choice = cid
                    break
        plan[task] = choice
        count[choice] += 1
        queue.add(choice, cl.weight[choice])
    return plan, count


def _defer_moves(
    cl: Cluster, plan: dict[TaskId, str], count: dict[str, int]
) -> tuple[dict[TaskId, str], dict[TaskId, str]]:
    """Keep stateful tasks off clients that are not caught up while another client is.

    Returns the final active owner of every task and the learner (planned client) of every
    task whose move waits for state to be restored.
    """
    active = dict(plan)
    learners: dict[TaskId, str] = {}
    for task in cl.stateful_tasks:
        planned = plan[task]
        if cl.caught_up(planned, task):
            continue
        owner = cl.prev_owner.get(task)
        if owner is None:
            # The owner is gone: fail over to the most caught-up client, if it is caught up.
            lags = cl.finite_lags.get(task)
            if not lags:
                continue  # nobody has state: restore where planned
            owner = min(lags, key=lambda c: (lags[c], count[c] * cl.weight[c], c))
            if not cl.caught_up(owner, task):
                continue
        active[task] = owner
        count[planned] -= 1
        count[owner] += 1
        learners[task] = planned
    return active, learners


def _place_replicas(
    cl: Cluster, active: dict[TaskId, str], learners: dict[TaskId, str]
) -> tuple[dict[str, set[TaskId]], dict[str, set[TaskId]], dict[str, set[TaskId]]]:
    """Learners first, then standbys by (lag, load, client id); returns standby, warm-up
    and the learners' replicas (of either kind) per client."""
    cfg = cl.config
    target = min(cfg.num_standby_replicas, len(cl.ids) - 1)
    standby: dict[str, set[TaskId]] = {cid: set() for cid in cl.ids}
    warmup: dict[str, set[TaskId]] = {cid: set() for cid in cl.ids}
    held = dict.fromkeys(cl.ids, 0)  # active + standby + warm-up count per client
    for owner in active.values():
        held[owner] += 1

    # Learners are placed before any standby, so a task with standbys configured is always
    # short of them here: its learner takes a standby slot, and warm-ups (with their budget)
    # only exist when there are no standby slots to take.
    learning: dict[TaskId, str] = {}  # task -> its learner, if it got a standby slot
    placed: dict[str, set[TaskId]] = {cid: set() for cid in cl.ids}
    warmups = 0
    for task in sorted(learners):
        learner = learners[task]
        if target > 0:
            standby[learner].add(task)
            learning[task] = learner
        elif warmups < cfg.max_warmup_replicas:
            warmup[learner].add(task)
            warmups += 1
        else:
            continue  # over budget: the move waits for a later assignment
        held[learner] += 1
        placed[learner].add(task)

    if target == 0:
        return standby, warmup, placed
    queue = _LoadQueue({cid: held[cid] * cl.weight[cid] for cid in cl.ids})
    for task in cl.stateful_tasks:
        skip = {active[task]}
        if task in learning:
            skip.add(learning[task])
        need = target - len(skip) + 1
        if need <= 0:
            continue
        lags = cl.finite_lags.get(task, {})
        with_state = sorted(
            (lag, queue.load[cid], cid) for cid, lag in lags.items() if cid not in skip
        )
        chosen = [cid for _, _, cid in with_state[:need]]
        if len(chosen) < need:  # the rest have no state (infinite lag): least loaded
            chosen += queue.take_lowest(need - len(chosen), skip.union(lags))
        for cid in chosen:
            standby[cid].add(task)
            queue.add(cid, cl.weight[cid])
    return standby, warmup, placed


def assign(
    clients: Mapping[str, ClientState],
    tasks: Iterable[TaskId],
    stateful: Iterable[TaskId],
    config: AssignorConfig | None = None,
) -> Assignment:
    """Assign every task to one client as active, plus standbys and warm-ups.

    ``clients`` maps each live client id to what it reported; ``tasks`` are all tasks of the
    topology and ``stateful`` those of them that own state stores. Raises ``ConfigError`` on
    invalid input (no clients, stateful tasks missing from ``tasks``, a task claimed as active
    by two clients, ...). History about tasks not in ``tasks`` is ignored.
    """
    cl = Cluster(clients, tasks, stateful, config if config is not None else AssignorConfig())
    plan, count = _plan_actives(cl)
    active, learners = _defer_moves(cl, plan, count)
    standby, warmup, placed = _place_replicas(cl, active, learners)
    per_client: dict[str, set[TaskId]] = {cid: set() for cid in cl.ids}
    for task, cid in active.items():
        per_client[cid].add(task)
    return Assignment(
        active=frozen_per_client(per_client),
        standby=frozen_per_client(standby),
        warmup=frozen_per_client(warmup),
        followup_needed=bool(learners),
        learners=frozen_per_client(placed),
    )
