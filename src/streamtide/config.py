"""``StreamsConfig``: every setting of an application, validated when it is built."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any

from streamtide.errors import ConfigError
from streamtide.serde import Serde, Serdes
from streamtide.time import Duration, to_millis

_APP_ID = re.compile(r"^[A-Za-z0-9._-]+$")
PROCESSING_GUARANTEES = ("exactly_once", "at_least_once")
DESERIALIZATION_HANDLERS = ("fail", "log_and_continue")


@dataclass
class StreamsConfig:
    """Settings of one Streamtide application.

    Durations accept ``timedelta`` or int milliseconds and are stored as int milliseconds.
    ``processing_guarantee="at_least_once"`` is accepted for Kafka compatibility; the engine
    currently runs the exactly-once protocol for both (a stronger guarantee).
    ``locality_wait`` is applied to the SparkSession that ``StreamsApp`` builds; set
    ``spark.locality.wait`` yourself on a session you pass in. ``batch_processing`` runs each
    task's input as a batch (bulk serdes, state read once per key and batch); False runs the
    record-at-a-time path, which gives the same results more slowly.
    ``max_records_per_batch`` is the per-partition cap of a batch; with
    ``adaptive_batch_size`` the engine doubles it (up to ``adaptive_batch_size_limit``) while
    full batches finish within ``commit_interval``, and halves it (down to
    ``max_records_per_batch``) when one takes more than twice as long (``engine.batch_size``).
    ``metrics_port``: serve Prometheus metrics on ``http://127.0.0.1:<port>/metrics`` while
    the application runs (0 picks a free port; see ``StreamsApp.metrics_url``).
    """

    application_id: str = "streamtide-app"
    log: str = "file://./streamtide-data"
    state_dir: str = "./streamtide-state"
    commit_interval: Duration = 1000
    max_records_per_batch: int = 100_000
    num_standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2
    processing_guarantee: str = "exactly_once"
    deserialization_exception_handler: str = "fail"
    default_key_serde: Serde = field(default_factory=Serdes.bytes)
    default_value_serde: Serde = field(default_factory=Serdes.bytes)
    cache_enabled: bool = True
    snapshot_interval: int = 100
    locality_wait: Duration = 30_000
    batch_processing: bool = True
    adaptive_batch_size: bool = True
    adaptive_batch_size_limit: int = 200_000
    metrics_port: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.application_id, str) or not _APP_ID.match(self.application_id):
            raise ConfigError(
                f"application_id must be letters, digits, '.', '_' or '-', "
                f"got {self.application_id!r}"
            )
        self.commit_interval = _positive_ms(
            self.commit_interval, "commit_interval", allow_zero=True
        )
        self.locality_wait = _positive_ms(self.locality_wait, "locality_wait", allow_zero=True)
        _require_int(self.max_records_per_batch, "max_records_per_batch", minimum=1)
        _require_int(self.adaptive_batch_size_limit, "adaptive_batch_size_limit", minimum=1)
        _require_int(self.num_standby_replicas, "num_standby_replicas", minimum=0)
        _require_int(self.acceptable_recovery_lag, "acceptable_recovery_lag", minimum=0)
        _require_int(self.max_warmup_replicas, "max_warmup_replicas", minimum=1)
        _require_int(self.snapshot_interval, "snapshot_interval", minimum=0)
        if self.processing_guarantee not in PROCESSING_GUARANTEES:
            raise ConfigError(
                f"processing_guarantee must be one of {PROCESSING_GUARANTEES}, "
                f"got {self.processing_guarantee!r}"
            )
        if self.deserialization_exception_handler not in DESERIALIZATION_HANDLERS:
            raise ConfigError(
                "deserialization_exception_handler must be one of "
                f"{DESERIALIZATION_HANDLERS}, got {self.deserialization_exception_handler!r}"
            )
        for name in ("default_key_serde", "default_value_serde"):
            if not isinstance(getattr(self, name), Serde):
                raise ConfigError(f"{name} must be a Serde, got {getattr(self, name)!r}")
        if self.metrics_port is not None:
            _require_int(self.metrics_port, "metrics_port", minimum=0)
            if self.metrics_port > 65535:
                raise ConfigError(f"metrics_port must be <= 65535, got {self.metrics_port}")
        for name in ("cache_enabled", "batch_processing", "adaptive_batch_size"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be a bool, got {getattr(self, name)!r}")

    @property
    def dlq_topic(self) -> str:
        """Where ``log_and_continue`` sends records that could not be deserialized."""
        return f"{self.application_id}-dlq"

    def with_overrides(self, **overrides: Any) -> StreamsConfig:
        """A copy with some settings replaced (validated again)."""
        unknown = set(overrides) - {f.name for f in fields(self)}
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(overrides)
        return StreamsConfig(**values)


def _positive_ms(value: Duration, name: str, *, allow_zero: bool) -> int:
    if not isinstance(value, (int, timedelta)) or isinstance(value, bool):
        raise ConfigError(f"{name} must be a timedelta or int milliseconds, got {value!r}")
    ms = to_millis(value, name)
    if ms < 0 or (ms == 0 and not allow_zero):
        raise ConfigError(f"{name} must be positive, got {ms} ms")
    return ms


def _require_int(value: Any, name: str, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
