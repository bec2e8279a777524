"""TaskId, AssignorConfig, ClientState and assign() input checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtide.assignment import AssignorConfig, ClientState, TaskId, assign
from streamtide.errors import ConfigError

T0, T1 = TaskId(0, 0), TaskId(0, 1)


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_task_id_prints_and_parses_back(sub: int, part: int) -> None:
    task = TaskId(sub, part)
    assert str(task) == f"{sub}_{part}"
    assert TaskId.parse(str(task)) == task
    assert hash(TaskId.parse(str(task))) == hash(task)


def test_a_task_id_hashes_once_and_survives_pickling() -> None:
    import dataclasses
    import pickle

    task = TaskId(3, 7)
    copy = pickle.loads(pickle.dumps(task))
    assert copy == task and hash(copy) == hash(task) == hash((3, 7))
    assert {task: 1}[copy] == 1
    assert TaskId.parse("3_7") is TaskId.parse("3_7")  # read back once, then looked up
    assert dataclasses.asdict(task) == {"subtopology": 3, "partition": 7}
    assert repr(task) == "TaskId(subtopology=3, partition=7)"


def test_task_ids_order_by_subtopology_then_partition() -> None:
    texts = ["1_0", "0_10", "0_2", "2_1", "0_0"]
    assert [str(t) for t in sorted(map(TaskId.parse, texts))] == [
        "0_0",
        "0_2",
        "0_10",
        "1_0",
        "2_1",
    ]


@pytest.mark.parametrize(
    "text", ["", "0", "0_", "_1", "a_1", "0_1_2", "-1_0", "01_2", " 0_1", "0-1"]
)
def test_task_id_parse_rejects_malformed_text(text: str) -> None:
    with pytest.raises(ValueError, match="not a task id"):
        TaskId.parse(text)


def test_task_id_rejects_negative_and_non_int_parts() -> None:
    with pytest.raises(ValueError, match="partition must be >= 0"):
        TaskId(0, -1)
    with pytest.raises(ValueError, match="subtopology must be an int"):
        TaskId("0", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be an int"):
        TaskId(True, 1)
    with pytest.raises(AttributeError):
        T0.partition = 5  # type: ignore[misc]


def test_config_defaults() -> None:
    config = AssignorConfig()
    assert (
        config.num_standby_replicas,
        config.acceptable_recovery_lag,
        config.max_warmup_replicas,
    ) == (0, 10_000, 2)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("num_standby_replicas", -1, "num_standby_replicas must be >= 0"),
        ("acceptable_recovery_lag", -5, "acceptable_recovery_lag must be >= 0"),
        ("max_warmup_replicas", 0, "max_warmup_replicas must be >= 1"),
        ("max_warmup_replicas", -2, "max_warmup_replicas must be >= 1"),
        ("num_standby_replicas", 1.5, "num_standby_replicas must be an int"),
        ("acceptable_recovery_lag", None, "acceptable_recovery_lag must be an int"),
        ("num_standby_replicas", True, "num_standby_replicas must be an int"),
    ],
)
def test_config_rejects_bad_values(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        AssignorConfig(**{field: value})
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"slots": 0}, "slots must be >= 1"),
        ({"slots": -1}, "slots must be >= 1"),
        ({"slots": 1.0}, "slots must be an int"),
        ({"slots": 1, "lags": {T0: -1}, "prev_standby": {T0}}, "lag of task 0_0 must be >= 0"),
        ({"slots": 1, "lags": {T0: 1.5}, "prev_standby": {T0}}, "lag of task 0_0 must be an int"),
        ({"slots": 1, "lags": {T1: 3}, "prev_standby": {T0}}, "neither as active nor as standby"),
        ({"slots": 1, "lags": {"0_0": 3}, "prev_standby": {T0}}, "lags keys must be TaskId"),
        (
            {"slots": 1, "prev_active": {T0}, "prev_standby": {T0, T1}},
            "both as active and as standby",
        ),
        ({"slots": 1, "prev_active": {"0_0"}}, "prev_active must hold TaskId"),
        ({"slots": 1, "prev_standby": "0_0"}, "prev_standby must be a collection"),
        ({"slots": 1, "lags": [(T0, 1)]}, "lags must be a mapping"),
    ],
)
def test_client_state_rejects_bad_values(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ClientState(**kwargs)


def test_client_state_is_immutable_and_copies_its_inputs() -> None:
    lags = {T1: 7}
    state = ClientState(2, prev_active=[T0], prev_standby=[T1], lags=lags)
    lags[T1] = 1000
    assert state.lag(T1) == 7
    assert state.lag(T0) == 0
    assert state.lag(TaskId(5, 5)) == float("inf")
    assert state.prev_active == frozenset({T0})
    with pytest.raises(TypeError):
        state.lags[T1] = 1  # type: ignore[index]


def test_assign_rejects_no_clients() -> None:
    with pytest.raises(ConfigError, match="without clients"):
        assign({}, [T0], [], AssignorConfig())


def test_assign_rejects_stateful_tasks_not_in_tasks() -> None:
    with pytest.raises(ConfigError, match="stateful tasks that are not in tasks: 0_1"):
        assign({"p1": ClientState(1)}, [T0], [T0, T1], AssignorConfig())


def test_assign_rejects_a_task_claimed_by_two_owners() -> None:
    clients = {"p1": ClientState(1, prev_active={T0}), "p2": ClientState(1, prev_active={T0})}
    with pytest.raises(ConfigError, match="0_0 is reported as active by both p1 and p2"):
        assign(clients, [T0], [T0], AssignorConfig())


@pytest.mark.parametrize(
    ("clients", "tasks", "config", "message"),
    [
        ({"p1": ClientState(1)}, "0_0", AssignorConfig(), "tasks must be a collection"),
        ({"p1": ClientState(1)}, ["0_0"], AssignorConfig(), "tasks must hold TaskId"),
        ({"": ClientState(1)}, [T0], AssignorConfig(), "client ids must be non-empty strings"),
        ({1: ClientState(1)}, [T0], AssignorConfig(), "client ids must be non-empty strings"),
        ({"p1": 1}, [T0], AssignorConfig(), "client p1 must be a ClientState"),
        ([("p1", ClientState(1))], [T0], AssignorConfig(), "clients must be a mapping"),
        (
            {"p1": ClientState(1)},
            [T0],
            {"num_standby_replicas": 1},
            "config must be an AssignorConfig",
        ),
    ],
)
def test_assign_rejects_malformed_arguments(clients, tasks, config, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        assign(clients, tasks, [], config)


def test_assign_without_tasks_gives_every_client_empty_sets() -> None:
    result = assign({"p2": ClientState(1), "p1": ClientState(3)}, [], [])
    assert dict(result.active) == {"p1": frozenset(), "p2": frozenset()}
    assert dict(result.standby) == dict(result.warmup) == dict(result.active)
    assert not result.followup_needed
