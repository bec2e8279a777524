"""``StreamsConfig``: every setting of an application, validated when it is built."""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any

from streamtide.errors import ConfigError
from streamtide.handlers import HANDLER_NAMES, Handler, is_handler
from streamtide.redaction import redacted_options
from streamtide.serde import Serde, Serdes
from streamtide.time import Duration, to_millis
from streamtide.timestamp_extractor import TimestampExtractor

_APP_ID = re.compile(r"^[A-Za-z0-9._-]+$")
PROCESSING_GUARANTEES = ("exactly_once", "at_least_once")
DESERIALIZATION_HANDLERS = HANDLER_NAMES
PROCESSING_HANDLERS = HANDLER_NAMES
AUTO_OFFSET_RESETS = ("earliest", "latest")
INVALID_TIMESTAMP_HANDLERS = ("fail", "log_and_skip")
EXECUTION_MODES = ("continuous", "micro_batch")


@dataclass
class StreamsConfig:
    """Settings of one Streamtide application.

    Durations accept ``timedelta`` or int milliseconds and are stored as int milliseconds.
    ``processing_guarantee="at_least_once"`` is accepted for Kafka compatibility; the engine
    currently runs the exactly-once protocol for both (a stronger guarantee).
    ``locality_wait`` is applied to the SparkSession that ``StreamsApp`` builds; set
    ``spark.locality.wait`` yourself on a session you pass in. ``log_options`` go to the log
    that ``log`` names: for ``kafka://`` logs, confluent-kafka client settings (security, SASL,
    TLS, timeouts) passed unchanged, and ``topic.*`` configs of created topics.
    ``batch_processing`` runs each
    task's input as a batch (bulk serdes, state read once per key and batch); False runs the
    record-at-a-time path, which gives the same results more slowly.
    ``stages_in_one_job`` runs every sub-topology of a batch in one Spark job; a sub-topology
    after a repartition then reads the repartition records earlier batches committed (one
    batch of extra latency per repartition). False runs one job per sub-topology, in order,
    so repartitioned records are processed in the batch that wrote them.
    ``max_records_per_batch`` is the per-partition cap of a batch; with
    ``adaptive_batch_size`` the engine doubles it (up to ``adaptive_batch_size_limit``) while
    full batches finish within ``commit_interval``, and halves it (down to
    ``max_records_per_batch``) when one takes more than twice as long (``engine.batch_size``).
    ``processing_exception_handler`` decides about a record a processor raised for, and
    ``deserialization_exception_handler`` about one that cannot be deserialized: ``"fail"``,
    ``"log_and_continue"`` or a function (``streamtide.handlers``). Skipped records go to
    ``errors_dead_letter_topic`` when it is set (records that cannot be deserialized go to
    ``<application_id>-dlq`` otherwise).
    ``execution``: ``"continuous"`` keeps one long-running work unit per executor slot that
    holds its tasks open and runs batch after batch without a Spark job each (recycled after
    ``work_unit_max_age``); ``"micro_batch"`` runs each batch as a Spark job whose work units
    open and close their tasks' stores (docs/engine.md, "Execution modes").
    ``metrics_port``: serve Prometheus metrics on ``http://<metrics_bind_address>:<port>/metrics``
    while the application runs (0 picks a free port; see ``StreamsApp.metrics_url``);
    ``metrics_bind_address`` is the address to listen on: loopback by default, an interface's
    address, a host name, or ``0.0.0.0``/``::`` for every interface (docs/metrics.md).
    ``default_timestamp_extractor``: ``fn(record, partition_time) -> int`` for every source
    without its own (``Consumed.with_(..., timestamp_extractor=fn)``); None uses each record's
    own timestamp (see ``streamtide.timestamp_extractor``).
    ``allow_topology_name_changes``: start even when state stores or internal topics the
    application ran with are gone from the topology (their state is abandoned); by default
    such a start fails, listing the old and new names. ``ensure_explicit_internal_resource_naming``
    (KIP-1111): refuse a topology with generated store or internal topic names.
    """

    application_id: str = "streamtide-app"
    log: str = "file://./streamtide-data"
    log_options: dict[str, Any] = field(default_factory=dict)
    state_dir: str = "./streamtide-state"
    commit_interval: Duration = 1000
    max_records_per_batch: int = 100_000
    num_standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2
    processing_guarantee: str = "exactly_once"
    deserialization_exception_handler: str | Handler = "fail"
    processing_exception_handler: str | Handler = "fail"
    errors_dead_letter_topic: str | None = None
    default_key_serde: Serde = field(default_factory=Serdes.bytes)
    default_value_serde: Serde = field(default_factory=Serdes.bytes)
    cache_enabled: bool = True
    snapshot_interval: int = 100
    locality_wait: Duration = 30_000
    batch_processing: bool = True
    adaptive_batch_size: bool = True
    adaptive_batch_size_limit: int = 200_000
    stages_in_one_job: bool = True
    auto_offset_reset: str | None = None
    invalid_timestamp_handler: str = "fail"
    default_timestamp_extractor: TimestampExtractor | None = None
    fatal_exceptions: tuple[type[BaseException], ...] = ()
    metrics_port: int | None = None
    metrics_bind_address: str = "127.0.0.1"
    execution: str = "continuous"
    work_unit_max_age: Duration = 3_600_000
    allow_topology_name_changes: bool = False
    ensure_explicit_internal_resource_naming: bool = False

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
        self.work_unit_max_age = _positive_ms(
            self.work_unit_max_age, "work_unit_max_age", allow_zero=False
        )
        if self.execution not in EXECUTION_MODES:
            raise ConfigError(f"execution must be one of {EXECUTION_MODES}, got {self.execution!r}")
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
        for name in ("deserialization_exception_handler", "processing_exception_handler"):
            if not is_handler(getattr(self, name)):
                raise ConfigError(
                    f"{name} must be one of {HANDLER_NAMES} or a function "
                    f"(error_context, record, exception) -> ProcessingHandlerResponse, "
                    f"got {getattr(self, name)!r}"
                )
        topic = self.errors_dead_letter_topic
        if topic is not None and (not isinstance(topic, str) or not _APP_ID.match(topic)):
            raise ConfigError(
                "errors_dead_letter_topic must be None or a topic name (letters, digits, "
                f"'.', '_' or '-'), got {topic!r}"
            )
        for name in ("default_key_serde", "default_value_serde"):
            if not isinstance(getattr(self, name), Serde):
                raise ConfigError(f"{name} must be a Serde, got {getattr(self, name)!r}")
        if self.auto_offset_reset not in (None, *AUTO_OFFSET_RESETS):
            raise ConfigError(
                f"auto_offset_reset must be None, 'earliest' or 'latest', "
                f"got {self.auto_offset_reset!r}"
            )
        if self.invalid_timestamp_handler not in INVALID_TIMESTAMP_HANDLERS:
            raise ConfigError(
                f"invalid_timestamp_handler must be one of {INVALID_TIMESTAMP_HANDLERS}, "
                f"got {self.invalid_timestamp_handler!r}"
            )
        if self.default_timestamp_extractor is not None and not callable(
            self.default_timestamp_extractor
        ):
            raise ConfigError(
                "default_timestamp_extractor must be None or a function "
                f"(record, partition_time) -> int, got {self.default_timestamp_extractor!r}"
            )
        if isinstance(self.fatal_exceptions, list):
            self.fatal_exceptions = tuple(self.fatal_exceptions)
        if not isinstance(self.fatal_exceptions, tuple) or not all(
            isinstance(t, type) and issubclass(t, BaseException) for t in self.fatal_exceptions
        ):
            raise ConfigError(
                "fatal_exceptions must be a tuple of exception types, "
                f"got {self.fatal_exceptions!r}"
            )
        for name in ("log", "state_dir"):
            value = getattr(self, name)
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
                setattr(self, name, value)
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{name} must be a non-empty str or path, got {value!r}")
        if not isinstance(self.log_options, dict):  # not shown: it may hold secrets
            kind = type(self.log_options).__name__
            raise ConfigError(f"log_options must be a dict with string keys, got a {kind}")
        wrong = [k for k in self.log_options if not isinstance(k, str)]
        if wrong:
            raise ConfigError(f"log_options must have string keys, got the key {wrong[0]!r}")
        if self.metrics_port is not None:
            _require_int(self.metrics_port, "metrics_port", minimum=0)
            if self.metrics_port > 65535:
                raise ConfigError(f"metrics_port must be <= 65535, got {self.metrics_port}")
        if not is_bind_address(self.metrics_bind_address):
            raise ConfigError(
                "metrics_bind_address must be an IP address (e.g. 127.0.0.1, ::1, 0.0.0.0) or "
                f"a host name, got {self.metrics_bind_address!r}"
            )
        for name in (
            "cache_enabled",
            "batch_processing",
            "adaptive_batch_size",
            "stages_in_one_job",
            "allow_topology_name_changes",
            "ensure_explicit_internal_resource_naming",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be a bool, got {getattr(self, name)!r}")

    def __repr__(self) -> str:
        """Every setting, with the secret values of ``log_options`` masked."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["log_options"] = redacted_options(self.log_options)
        return f"StreamsConfig({', '.join(f'{k}={v!r}' for k, v in values.items())})"

    @property
    def dlq_topic(self) -> str:
        """Where skipped records that could not be deserialized go:
        ``errors_dead_letter_topic``, else ``<application_id>-dlq``."""
        return self.errors_dead_letter_topic or f"{self.application_id}-dlq"

    def with_overrides(self, **overrides: Any) -> StreamsConfig:
        """A copy with some settings replaced (validated again)."""
        unknown = set(overrides) - {f.name for f in fields(self)}
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(overrides)
        return StreamsConfig(**values)


_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")


def is_bind_address(value: Any) -> bool:
    """Whether ``value`` is an IPv4 or IPv6 address or a host name (RFC 1123)."""
    if not isinstance(value, str) or not value:
        return False
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        return bool(_HOST_NAME.match(value))


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
