"""Random clusters and histories: every guarantee of the assignor (docs/assignment.md)
after every round.

A small model of the engine around the assignor. Each round the live clients report what they
hold (running actives; every other task with local state as a standby, with its lag), the
assignor runs, and then the cluster acts on the result:

* an active restores what it lacks; once at the committed changelog end it runs, and its
  processing advances the changelog (now and then by nothing: an idle task, whose old copies
  stay exactly as current as its standbys);
* standbys and warm-ups restore towards the changelog end;
* every other local copy stays where it is, also on clients that left: a client that comes back
  reports its old state.

While the membership changes, restoring takes a random amount per round, so tasks and learners
may need several rounds to catch up. Once the membership is stable, learners catch up between
rounds (the engine brings standbys and warm-ups to the committed end every batch), which is what
the convergence bound assumes.
"""

from __future__ import annotations

import math
import random
from collections import Counter

from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

from streamtide.assignment import Assignment, AssignorConfig, ClientState, TaskId, assign

POOL = ("c0", "c1", "c2", "c3", "c4", "c5")


class Cluster:
    """Changelog ends, every client's local copies, and what each live client runs."""

    def __init__(self, tasks, stateful, slots, old_state: float, rng: random.Random) -> None:
        self.tasks: list[TaskId] = tasks
        self.stateful: frozenset[TaskId] = stateful
        self.slots: dict[str, int] = slots
        self.rng = rng
        self.end = {task: rng.randint(0, 5000) for task in stateful}
        # Local copies (client -> task -> local offset); some clients start with old state.
        self.local: dict[str, dict[TaskId, int]] = {c: {} for c in POOL}
        for c in POOL:
            for task in stateful:
                if rng.random() < old_state:
                    self.local[c][task] = rng.randint(0, self.end[task])
        self.running: dict[str, set[TaskId]] = {}  # live clients only

    def set_members(self, members: frozenset[str], fresh: frozenset[str]) -> None:
        """Clients that left forget what they ran; those that join run nothing yet, and the
        ``fresh`` ones come without any local state."""
        for c in fresh:
            self.local[c] = {}
        self.running = {c: self.running.get(c, set()) for c in sorted(members)}

    def subscriptions(self) -> dict[str, ClientState]:
        states = {}
        for c, running in self.running.items():
            held = {task for task in self.local[c] if task not in running}
            lags = {task: self.end[task] - self.local[c][task] for task in held}
            states[c] = ClientState(
                self.slots[c],
                prev_active=frozenset(running),
                prev_standby=frozenset(held),
                lags=lags,
            )
        return states

    def act(self, result: Assignment, budget) -> None:
        """One batch: actives restore or run, replicas restore, changelogs advance."""
        for c in self.running:
            self.running[c] = set()
            for task in result.active[c]:
                if task not in self.stateful:
                    self.running[c].add(task)
                    continue
                local = min(self.end[task], self.local[c].get(task, 0) + budget())
                if local == self.end[task]:  # restored: it runs and writes its changelog
                    self.end[task] += 0 if self.rng.random() < 0.2 else self.rng.randint(1, 500)
                    local = self.end[task]
                    self.running[c].add(task)
                self.local[c][task] = local
        for c in self.running:
            for task in result.standby[c] | result.warmup[c]:
                self.local[c][task] = min(self.end[task], self.local[c].get(task, 0) + budget())


def lag(state: ClientState, task: TaskId, stateful: frozenset[TaskId]) -> float:
    """The lag as section 7 defines it, computed independently of the assignor."""
    if task not in stateful or task in state.prev_active:
        return 0
    return state.lags.get(task, math.inf)


def check_guarantees(clients, tasks, stateful, config: AssignorConfig, result: Assignment) -> None:
    ids = set(clients)
    assert set(result.active) == set(result.standby) == set(result.warmup) == ids
    owners = Counter(task for c in ids for task in result.active[c])
    assert owners == Counter(tasks), "every task has exactly one active owner"
    for c in ids:
        a, s, w = result.active[c], result.standby[c], result.warmup[c]
        assert not (a & s or a & w or s & w), f"{c} holds a task twice"
        assert (s | w) <= stateful, "stateless tasks get no standby or warm-up"
    wanted = min(config.num_standby_replicas, len(ids) - 1)
    for task in stateful:
        standbys = sum(task in result.standby[c] for c in ids)
        warmups = sum(task in result.warmup[c] for c in ids)
        assert standbys + warmups >= wanted, f"{task} has too few replicas"
        assert standbys <= config.num_standby_replicas, f"{task} has too many standbys"
    n_warmups = sum(len(w) for w in result.warmup.values())
    assert n_warmups <= config.max_warmup_replicas
    assert result.followup_needed or n_warmups == 0, "a warm-up exists only for a pending move"
    acceptable = config.acceptable_recovery_lag
    for c in ids:
        for task in result.active[c]:
            if lag(clients[c], task, stateful) > acceptable:
                others = [o for o in ids if lag(clients[o], task, stateful) <= acceptable]
                assert not others, f"{task} on {c}, not caught up, while {others} are"


def check_share_bound(clients, n_tasks: int, result: Assignment) -> None:
    total = sum(state.slots for state in clients.values())
    for c, state in clients.items():
        ceiling = -(-n_tasks * state.slots // total)
        assert len(result.active[c]) <= ceiling, f"{c} exceeds its share rounded up"


@st.composite
def scenarios(draw):
    tasks: list[TaskId] = []
    stateful: set[TaskId] = set()
    for sub in range(draw(st.integers(1, 3))):
        with_state = draw(st.sampled_from([True, True, False]))
        for part in range(draw(st.integers(1, 6))):
            tasks.append(TaskId(sub, part))
            if with_state:
                stateful.add(TaskId(sub, part))
    config = AssignorConfig(
        num_standby_replicas=draw(st.integers(0, 2)),
        acceptable_recovery_lag=draw(st.sampled_from([0, 100, 1000, 10_000])),
        max_warmup_replicas=draw(st.integers(1, 3)),
    )
    slots = {c: draw(st.integers(1, 2)) for c in POOL}
    # Membership: an initial set that settles, then one to five changes of one or two clients
    # (a member leaves; anyone else joins, back with its old local state or on a fresh machine
    # without any), each followed by some rounds; the last membership then stays.
    initial = draw(st.frozensets(st.sampled_from(POOL), min_size=1))
    members, changes = initial, []
    for _ in range(draw(st.integers(1, 5))):
        toggled = draw(st.frozensets(st.sampled_from(POOL), min_size=1, max_size=2))
        fresh = draw(st.booleans())
        joined = toggled - members
        members = (members ^ toggled) or toggled
        changes.append((members, joined if fresh else frozenset(), draw(st.integers(1, 3))))
    old_state = draw(st.sampled_from([0.0, 0.2, 0.6]))
    restore_rate = draw(st.sampled_from([200, 2_000, 50_000]))  # records per round, at most
    rng = draw(st.randoms(use_true_random=False))
    return tasks, frozenset(stateful), config, slots, initial, changes, old_state, restore_rate, rng


def run_round(cluster: Cluster, config: AssignorConfig) -> tuple[dict, Assignment]:
    clients = cluster.subscriptions()
    result = assign(clients, cluster.tasks, cluster.stateful, config)
    check_guarantees(clients, cluster.tasks, cluster.stateful, config, result)
    shuffled_clients = list(clients.items())
    cluster.rng.shuffle(shuffled_clients)
    shuffled_tasks = list(cluster.tasks)
    cluster.rng.shuffle(shuffled_tasks)
    again = assign(dict(shuffled_clients), shuffled_tasks, set(cluster.stateful), config)
    assert again == result, "same input, same output"
    return clients, result


def converge(cluster: Cluster, config: AssignorConfig) -> int:
    """Rounds with a stable membership and learners catching up in between, until no follow-up
    is needed; checks the bound on rounds, the share bound and the fixed point."""
    bound = 2 * len(cluster.stateful) * (1 + config.num_standby_replicas) + 3
    rounds = 0
    while rounds < bound:
        rounds += 1
        clients, result = run_round(cluster, config)
        cluster.act(result, lambda: math.inf)
        if not result.followup_needed:
            break
    assert not result.followup_needed, f"no convergence within {bound} rounds"
    check_share_bound(clients, len(cluster.tasks), result)
    for _ in range(2):  # an unchanged cluster keeps its assignment exactly
        _, again = run_round(cluster, config)
        cluster.act(again, lambda: math.inf)
        assert again == result, "the converged assignment is a fixed point"
    return rounds


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_guarantees_hold_through_random_histories(scenario) -> None:
    tasks, stateful, config, slots, initial, changes, old_state, restore_rate, rng = scenario
    cluster = Cluster(tasks, stateful, slots, old_state, rng)
    cluster.set_members(initial, frozenset())
    converge(cluster, config)

    def partial() -> int:
        return rng.randint(0, restore_rate)

    for members, fresh, rounds in changes[:-1]:  # while the membership changes
        cluster.set_members(members, fresh)
        for _ in range(rounds):
            _, result = run_round(cluster, config)
            cluster.act(result, partial)

    members, fresh, _ = changes[-1]
    cluster.set_members(members, fresh)  # from here on, the membership is stable
    rounds = converge(cluster, config)
    target(rounds, label="rounds to converge")  # steer towards long migrations
