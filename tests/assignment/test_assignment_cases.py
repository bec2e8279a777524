"""The assignor's acceptance cases (K1-K5, L1-L3, F1-F3), plus close variants."""

from __future__ import annotations

from streamtide.assignment import Assignment, AssignorConfig, ClientState, TaskId, assign


def t(text: str) -> TaskId:
    return TaskId.parse(text)


def ts(*texts: str) -> frozenset[TaskId]:
    return frozenset(t(x) for x in texts)


def tasks0(n: int) -> list[TaskId]:
    """Tasks 0_0 .. 0_{n-1}."""
    return [TaskId(0, p) for p in range(n)]


def ran(*texts: str, slots: int = 1) -> ClientState:
    """A client that ran ``texts`` as active last time."""
    return ClientState(slots, prev_active=ts(*texts))


def standby(lags: dict[str, int], slots: int = 1, active: tuple[str, ...] = ()) -> ClientState:
    """A client holding the tasks of ``lags`` as standby with those lags."""
    return ClientState(
        slots,
        prev_active=ts(*active),
        prev_standby=ts(*lags),
        lags={t(k): v for k, v in lags.items()},
    )


def by_client(mapping) -> dict[str, frozenset[TaskId]]:
    return {c: frozenset(v) for c, v in mapping.items()}


def check(
    result: Assignment,
    active: dict[str, frozenset[TaskId]],
    standby_: dict[str, frozenset[TaskId]] | None = None,
    warmup: dict[str, frozenset[TaskId]] | None = None,
    followup: bool = False,
) -> None:
    empty = {c: frozenset() for c in active}
    assert by_client(result.active) == active
    assert by_client(result.standby) == {**empty, **(standby_ or {})}
    assert by_client(result.warmup) == {**empty, **(warmup or {})}
    assert result.followup_needed is followup


LAG100 = {"acceptable_recovery_lag": 100}


def test_K1_actives_stay_and_two_standbys_go_to_the_other_clients() -> None:
    clients = {"p1": ran("0_0"), "p2": ran("0_1"), "p3": ran("0_2")}
    result = assign(clients, tasks0(3), tasks0(3), AssignorConfig(num_standby_replicas=2))
    check(
        result,
        active={"p1": ts("0_0"), "p2": ts("0_1"), "p3": ts("0_2")},
        standby_={"p1": ts("0_1", "0_2"), "p2": ts("0_0", "0_2"), "p3": ts("0_0", "0_1")},
    )


def test_K2_caught_up_standbys_take_over_their_tasks() -> None:
    clients = {
        "p1": standby({"0_2": 0}),
        "p2": standby({"0_1": 0}),
        "p3": standby({"0_0": 0}),
    }
    result = assign(clients, tasks0(3), tasks0(3), AssignorConfig())
    check(result, active={"p1": ts("0_2"), "p2": ts("0_1"), "p3": ts("0_0")})


def test_K3_standby_goes_to_the_holder_with_room() -> None:
    clients = {
        "p1": standby({"0_1": 0}, active=("0_0",)),
        "p2": standby({"0_1": 0}, slots=2, active=("0_2",)),
    }
    result = assign(clients, tasks0(3), tasks0(3), AssignorConfig())
    check(result, active={"p1": ts("0_0"), "p2": ts("0_1", "0_2")})


def test_K4_overloaded_owner_keeps_first_tasks_rest_to_least_loaded() -> None:
    clients = {"p3": ran("0_0", "0_1", "0_2", "0_3"), "p1": ClientState(1), "p2": ClientState(1)}
    result = assign(clients, tasks0(4), [], AssignorConfig())
    check(result, active={"p1": ts("0_2"), "p2": ts("0_3"), "p3": ts("0_0", "0_1")})


def test_K5_new_client_gets_the_new_tasks() -> None:
    clients = {"p1": ran("0_1", "0_2"), "p2": ran("0_0", "0_3"), "p3": ClientState(1)}
    result = assign(clients, tasks0(6), [], AssignorConfig())
    check(result, active={"p1": ts("0_1", "0_2"), "p2": ts("0_0", "0_3"), "p3": ts("0_4", "0_5")})


def test_L1_new_client_warms_up_one_task_while_owner_keeps_all() -> None:
    clients = {"p1": ran("0_0", "0_1", "0_2", "0_3"), "p2": ClientState(1)}
    config = AssignorConfig(max_warmup_replicas=1, **LAG100)
    result = assign(clients, tasks0(4), tasks0(4), config)
    check(
        result,
        active={"p1": ts("0_0", "0_1", "0_2", "0_3"), "p2": ts()},
        warmup={"p2": ts("0_2")},
        followup=True,
    )


def test_L2_learners_take_standby_slots_instead_of_warmups() -> None:
    clients = {"p1": ran("0_0", "0_1", "0_2", "0_3"), "p2": ClientState(1)}
    config = AssignorConfig(num_standby_replicas=1, max_warmup_replicas=1, **LAG100)
    result = assign(clients, tasks0(4), tasks0(4), config)
    check(
        result,
        active={"p1": ts("0_0", "0_1", "0_2", "0_3"), "p2": ts()},
        standby_={"p2": ts("0_0", "0_1", "0_2", "0_3")},
        followup=True,
    )


def test_L3_caught_up_standby_moves_now_the_other_warms_up() -> None:
    clients = {"p1": ran("0_0", "0_1", "0_2", "0_3"), "p2": standby({"0_2": 0})}
    config = AssignorConfig(max_warmup_replicas=1, **LAG100)
    result = assign(clients, tasks0(4), tasks0(4), config)
    check(
        result,
        active={"p1": ts("0_0", "0_1", "0_3"), "p2": ts("0_2")},
        warmup={"p2": ts("0_3")},
        followup=True,
    )


def test_F1_orphan_fails_over_to_caught_up_standby_planned_client_warms_up() -> None:
    clients = {"p2": standby({"0_0": 50}, active=("0_1",)), "p3": ClientState(1)}
    result = assign(clients, tasks0(2), tasks0(2), AssignorConfig(**LAG100))
    check(
        result,
        active={"p2": ts("0_0", "0_1"), "p3": ts()},
        warmup={"p3": ts("0_0")},
        followup=True,
    )


def test_F2_orphan_goes_to_the_most_caught_up_standby() -> None:
    clients = {"p2": standby({"0_0": 5000}), "p3": standby({"0_0": 50})}
    result = assign(clients, tasks0(1), tasks0(1), AssignorConfig(**LAG100))
    check(result, active={"p2": ts(), "p3": ts("0_0")})


def test_F3_nobody_caught_up_task_restores_on_the_least_lagging_holder() -> None:
    clients = {"p2": standby({"0_0": 5000}), "p3": ClientState(1)}
    result = assign(clients, tasks0(1), tasks0(1), AssignorConfig(**LAG100))
    check(result, active={"p2": ts("0_0"), "p3": ts()})


# Variants that pin down the details the table rows rely on.


def test_L1_next_round_moves_the_warmed_up_task_and_warms_the_next() -> None:
    """After L1, p2 has restored 0_2 to within the acceptable lag: it moves, 0_3 warms up."""
    clients = {"p1": ran("0_0", "0_1", "0_2", "0_3"), "p2": standby({"0_2": 30})}
    config = AssignorConfig(max_warmup_replicas=1, **LAG100)
    result = assign(clients, tasks0(4), tasks0(4), config)
    check(
        result,
        active={"p1": ts("0_0", "0_1", "0_3"), "p2": ts("0_2")},
        warmup={"p2": ts("0_3")},
        followup=True,
    )


def test_a_lag_equal_to_the_acceptable_lag_is_caught_up() -> None:
    clients = {"p1": ran("0_0", "0_1", "0_2", "0_3"), "p2": standby({"0_2": 100, "0_3": 101})}
    result = assign(clients, tasks0(4), tasks0(4), AssignorConfig(**LAG100))
    check(
        result,
        active={"p1": ts("0_0", "0_1", "0_3"), "p2": ts("0_2")},
        warmup={"p2": ts("0_3")},
        followup=True,
    )


def test_warmup_budget_is_for_the_whole_assignment() -> None:
    clients = {"p1": ran(*(f"0_{i}" for i in range(6))), "p2": ClientState(1), "p3": ClientState(1)}
    config = AssignorConfig(max_warmup_replicas=3, **LAG100)
    result = assign(clients, tasks0(6), tasks0(6), config)
    assert sum(len(w) for w in result.warmup.values()) == 3
    assert result.active["p1"] == ts(*(f"0_{i}" for i in range(6)))
    assert result.followup_needed


def test_stateless_tasks_move_at_once_and_get_no_replicas() -> None:
    clients = {"p1": ran("0_0", "0_1", "0_2", "0_3"), "p2": ClientState(1)}
    config = AssignorConfig(num_standby_replicas=1, acceptable_recovery_lag=0)
    result = assign(clients, tasks0(4), [], config)
    check(result, active={"p1": ts("0_0", "0_1"), "p2": ts("0_2", "0_3")})


def test_standby_prefers_least_lag_then_lowest_load_then_lowest_id() -> None:
    clients = {
        "p1": ran("0_0"),
        "p2": ran("1_0", slots=2),
        "p3": standby({"0_0": 500}, slots=2),
        "p4": standby({"0_0": 70}, active=("1_1",)),
    }
    tasks = [t("0_0"), t("0_1"), t("1_0"), t("1_1")]
    result = assign(clients, tasks, ts("0_0", "0_1"), AssignorConfig(num_standby_replicas=1))
    assert by_client(result.active) == {
        "p1": ts("0_0"),
        "p2": ts("1_0"),
        "p3": ts("0_1"),  # least loaded; nobody has state for 0_1
        "p4": ts("1_1"),
    }
    # 0_0: p4 (lag 70) wins over p3 (lag 500) although p3 carries less load per slot.
    # 0_1: nobody has state; p2 (1 task / 2 slots) beats p1 (1/1) and p4 (2/1) on load.
    assert by_client(result.standby) == {"p1": ts(), "p2": ts("0_1"), "p3": ts(), "p4": ts("0_0")}
    assert not result.followup_needed


def failover_cluster(lag_p2: int, lag_p3: int) -> dict[str, ClientState]:
    """0_0's owner is gone; p2 and p3 hold copies but are full, so 0_0 is planned on p4."""
    return {
        "p2": standby({"0_0": lag_p2}, active=("0_1", "0_2")),
        "p3": standby({"0_0": lag_p3}, slots=2, active=("0_3", "0_4", "0_5")),
        "p4": ClientState(1),
    }


def test_failover_goes_to_the_least_lag_before_the_lowest_load() -> None:
    result = assign(failover_cluster(10, 80), tasks0(6), tasks0(6), AssignorConfig(**LAG100))
    check(
        result,
        active={"p2": ts("0_0", "0_1", "0_2"), "p3": ts("0_3", "0_4", "0_5"), "p4": ts()},
        warmup={"p4": ts("0_0")},
        followup=True,
    )


def test_failover_ties_on_lag_go_to_the_lowest_load_before_the_lowest_id() -> None:
    # Equal lags: p3 (3 tasks / 2 slots) is less loaded than p2 (2 tasks / 1 slot).
    result = assign(failover_cluster(10, 10), tasks0(6), tasks0(6), AssignorConfig(**LAG100))
    check(
        result,
        active={"p2": ts("0_1", "0_2"), "p3": ts("0_0", "0_3", "0_4", "0_5"), "p4": ts()},
        warmup={"p4": ts("0_0")},
        followup=True,
    )


def test_failover_without_any_state_restores_where_planned() -> None:
    clients = {"p2": ClientState(1), "p3": ClientState(1)}
    result = assign(clients, tasks0(2), tasks0(2), AssignorConfig(num_standby_replicas=1))
    check(
        result,
        active={"p2": ts("0_0"), "p3": ts("0_1")},
        standby_={"p2": ts("0_1"), "p3": ts("0_0")},
    )


def test_history_of_tasks_outside_the_topology_is_ignored() -> None:
    clients = {"p1": standby({"7_0": 3}, active=("9_9",)), "p2": ClientState(1)}
    result = assign(clients, tasks0(2), tasks0(2), AssignorConfig())
    check(result, active={"p1": ts("0_0"), "p2": ts("0_1")})


def test_same_input_same_output_whatever_the_order() -> None:
    clients = {
        "p3": standby({"0_1": 40, "0_3": 500}, slots=2, active=("0_0",)),
        "p1": ran("0_2", "0_4", "0_5"),
        "p2": standby({"0_5": 0}),
    }
    tasks = tasks0(7)
    config = AssignorConfig(num_standby_replicas=1, acceptable_recovery_lag=100)
    first = assign(clients, tasks, tasks[:5], config)
    reordered = dict(reversed(list(clients.items())))
    again = assign(reordered, list(reversed(tasks)), set(tasks[:5]), config)
    assert again == first
    assert str(again) == str(first)


def test_describe_lists_every_client_in_one_line() -> None:
    clients = {"p1": ran("0_0", "0_1", "0_2", "0_3"), "p2": ClientState(1)}
    result = assign(clients, tasks0(4), tasks0(4), AssignorConfig(max_warmup_replicas=1, **LAG100))
    line = result.describe()
    assert "\n" not in line
    assert line == str(result)
    assert line == (
        "p1: active 0_0,0_1,0_2,0_3 / standby - / warm-up -; "
        "p2: active - / standby - / warm-up 0_2; follow-up needed"
    )
    assert result.owner(t("0_2")) == "p1"
    assert result.owner(t("9_9")) is None
