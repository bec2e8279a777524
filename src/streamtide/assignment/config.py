"""Settings of the task assignor."""

from __future__ import annotations

from dataclasses import dataclass

from streamtide.errors import ConfigError


def _check_int(name: str, value: object, minimum: int, why: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}{why}, got {value}")


@dataclass(frozen=True)
class AssignorConfig:
    """How many standbys each stateful task gets and how state is moved.

    ``num_standby_replicas``: standby copies per stateful task, each on another client.
    ``acceptable_recovery_lag``: a client whose lag on a task is at most this is caught up and
    may take the task over at once.
    ``max_warmup_replicas``: warm-up tasks allowed in one whole assignment. It must be at least 1:
    with none and no standbys a task could never move to a new client, and the assignment would
    never converge.
    """

    num_standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2

    def __post_init__(self) -> None:
        _check_int("num_standby_replicas", self.num_standby_replicas, 0, "")
        _check_int("acceptable_recovery_lag", self.acceptable_recovery_lag, 0, "")
        _check_int(
            "max_warmup_replicas",
            self.max_warmup_replicas,
            1,
            " (without warm-ups a task could never move to a client lacking its state)",
        )
