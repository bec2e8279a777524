"""Application settings from the command line: a TOML file plus one flag per setting.

Every ``StreamsConfig`` field can be set in the file (``commit_interval = 500``) and by a flag
(``--commit-interval 500``); a flag wins over the file, the file over the defaults. Durations
are int milliseconds, serdes are named (``default_value_serde = "json"``), and an error handler
is ``"fail"``, ``"log_and_continue"`` or a function named ``module.function``. The file may also
name the Spark ``master``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, TypeVar

import click

from streamtide.config import (
    AUTO_OFFSET_RESETS,
    EXECUTION_MODES,
    INVALID_TIMESTAMP_HANDLERS,
    PROCESSING_GUARANTEES,
    StreamsConfig,
    check_master,
)
from streamtide.errors import ConfigError
from streamtide.handlers import HANDLER_NAMES, Handler
from streamtide.names import resolve_name
from streamtide.serde import Serde, Serdes
from streamtide.timestamp_extractor import extractor_named

F = TypeVar("F", bound=Callable[..., Any])

#: Settings of the command, not of StreamsConfig, that a config file may hold.
RUN_SETTINGS = {"master": "local[2]"}
_CHOICES = {
    "processing_guarantee": PROCESSING_GUARANTEES,
    "invalid_timestamp_handler": INVALID_TIMESTAMP_HANDLERS,
    "auto_offset_reset": AUTO_OFFSET_RESETS,
    "execution": EXECUTION_MODES,
}
#: Error handler settings: a handler name or a function named ``module.function``.
_HANDLERS = ("deserialization_exception_handler", "processing_exception_handler")
_DURATIONS = {"commit_interval", "locality_wait", "work_unit_max_age"}
#: Settings of earlier releases that no longer exist, with what to do instead.
_REMOVED = {
    "batch_processing": "every task processes its input in batches now (one path, the same "
    "results); remove the setting",
}
#: Shorter names of boolean flags (``--cache/--no-cache``).
_BOOL_FLAGS = {"cache_enabled": "cache"}
#: One line per setting for ``--help`` (docs/engine.md has the full table).
_HELP = {
    "cache_enabled": "The record cache",
    "adaptive_batch_size": "Grow the batch cap while full batches finish within commit_interval",
    "adaptive_batch_size_limit": "Upper limit of the adaptive per-partition batch cap",
    "stages_in_one_job": "Run all sub-topologies of a batch in one Spark job",
    "application_id": "Names the application's state, internal topics and directory",
    "state_dir": "Local RocksDB state of the executors",
    "commit_interval": "A batch starts at least this often, in ms",
    "max_records_per_batch": "Records per source partition and batch, at most",
    "num_standby_replicas": "Standby copies of each stateful task",
    "acceptable_recovery_lag": "Changelog records within which a copy counts as caught up",
    "max_warmup_replicas": "Warm-up tasks in flight at once",
    "processing_guarantee": "Processing guarantee",
    "deserialization_exception_handler": "What a record that cannot be deserialized does: "
    "fail, log_and_continue or a module.function",
    "processing_exception_handler": "What a record a processor raised for does: "
    "fail, log_and_continue or a module.function",
    "errors_dead_letter_topic": "Where skipped records go (default for records that cannot "
    "be deserialized: <application_id>-dlq)",
    "default_key_serde": "Serde for keys where an operator was given none",
    "default_value_serde": "Serde for values where an operator was given none",
    "snapshot_interval": "Snapshot a task's stores every N commits (0: never)",
    "locality_wait": "How long Spark waits for the executor a task is pinned to, in ms",
    "execution": "continuous (long-running work units) or micro_batch (a Spark job a batch)",
    "work_unit_max_age": "Replace a long-running work unit after this long, in ms",
    "metrics_port": "Serve Prometheus metrics on ADDRESS:PORT/metrics (0: a free port)",
    "metrics_bind_address": "The address the metrics endpoint listens on (0.0.0.0: every "
    "interface)",
    "invalid_timestamp_handler": "What a record with a negative timestamp does",
    "default_timestamp_extractor": "A function (module.function) that gives each consumed "
    "record its timestamp",
    "auto_offset_reset": "Where to start when committed offsets no longer fit the topic",
    "log_options": "A log client setting KEY=VALUE (repeatable; a table in the file)",
    "fatal_exceptions": "An exception type (module.Name) reported once, never retried "
    "(repeatable; a list in the file)",
    "allow_topology_name_changes": "Start although stores or internal topics the application "
    "ran with are gone (their state is abandoned)",
    "ensure_explicit_internal_resource_naming": "Refuse generated store and internal topic names",
}
#: Settings given as repeated flags, collected into a dict or a tuple.
_REPEATED = {"log_options": "--log-option", "fatal_exceptions": "--fatal-exception"}


def exception_type(name: Any, where: str) -> type[BaseException]:
    """The exception class a dotted name (``module.Name`` or ``module:Name``) names."""
    found = resolve_name(name, where, "exception type", "name an exception type as module.Name")
    if not (isinstance(found, type) and issubclass(found, BaseException)):
        raise ConfigError(f"{where}: {name!r} is not an exception type")
    return found


def handler(name: Any, where: str) -> str | Handler:
    """A handler name as is, or the function a dotted name (``module.function``) names."""
    if isinstance(name, str) and name in HANDLER_NAMES:
        return name
    usage = f"give one of {HANDLER_NAMES} or a function as module.function"
    found = resolve_name(name, where, "handler function", usage)
    if not callable(found) or isinstance(found, type):
        raise ConfigError(f"{where}: {name!r} is not a function")
    return found


def _log_options(items: Any, where: str) -> dict[str, Any]:
    if isinstance(items, dict):
        return {str(k): v for k, v in items.items()}
    options = {}
    for number, item in enumerate(items, start=1):
        key, sep, value = str(item).partition("=")
        if not sep or not key:  # the item is not quoted: it may hold a secret
            raise ConfigError(f"{where} #{number}: expected KEY=VALUE")
        options[key] = value
    return options


def serde_names() -> tuple[str, ...]:
    """Serdes that can be named in a config: Serdes' factories that take no argument (Kafka's
    names, then the deprecated ``int`` and ``float``, which keep their 8-byte layouts)."""
    candidates = (
        *("bytes", "string", "short", "integer", "long", "float32", "double", "uuid", "void"),
        *("json", "int", "float"),
    )
    return tuple(n for n in candidates if callable(getattr(Serdes, n, None)))


def _serde(name: Any, where: str) -> Serde:
    if not isinstance(name, str) or name not in serde_names():
        raise ConfigError(f"{where} must name a serde ({', '.join(serde_names())}), got {name!r}")
    return getattr(Serdes, name)()


def setting_names() -> list[str]:
    return [f.name for f in fields(StreamsConfig)]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def config_options(func: F) -> F:
    """Add one option per StreamsConfig setting (unset options are None)."""
    for f in reversed(fields(StreamsConfig)):
        default = f.default if f.default is not MISSING else f.default_factory()
        shown = default.name if isinstance(default, Serde) else default
        if f.name == "log":
            func = click.option(
                "--log",
                "log",
                envvar="STREAMTIDE_LOG",
                default=None,
                metavar="URL",
                help=f"Log to use (env: STREAMTIDE_LOG; default {shown}).",
            )(func)
            continue
        if f.name in _REPEATED:
            option = click.option(
                _REPEATED[f.name],
                f.name,
                multiple=True,
                default=None,
                help=f"{_HELP[f.name]}.",
            )
            func = option(func)
            continue
        if isinstance(default, bool):
            flag = _BOOL_FLAGS.get(f.name, _flag(f.name)[2:])
            option = click.option(
                f"--{flag}/--no-{flag}",
                f.name,
                default=None,
                help=f"{_HELP.get(f.name, f.name)} (default {'on' if default else 'off'}).",
            )
        else:
            names = [_flag(f.name)]
            if f.name == "num_standby_replicas":
                names.append("--standbys")
            option = click.option(
                *names,
                f.name,
                type=_click_type(f.name, str(f.type)),
                default=None,
                help=f"{_HELP.get(f.name, f.name)} (default {_shown(shown)}).",
            )
        func = option(func)
    return func


def _click_type(name: str, annotation: str) -> Any:
    if name in _CHOICES:
        return click.Choice(_CHOICES[name])
    if "Serde" in annotation:
        return click.Choice(serde_names())
    if name in _DURATIONS:
        return click.IntRange(min=0)
    if "int" in annotation:
        return click.IntRange(min=0)
    return str


def _shown(default: Any) -> str:
    return "off" if default is None else str(default)


def load_file(path: str | Path) -> dict[str, Any]:
    """The settings in a TOML file, checked: every key is a setting, serdes are named."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    known = {*setting_names(), *RUN_SETTINGS}
    settings: dict[str, Any] = {}
    for key, value in data.items():
        if key in _REMOVED:
            raise ConfigError(f"{path}: setting {key!r} was removed: {_REMOVED[key]}")
        if key not in known:
            raise ConfigError(
                f"{path}: unknown setting {key!r}; known settings: {', '.join(sorted(known))}"
            )
        if key.endswith("_serde"):
            value = _serde(value, f"{path}: {key}")
        elif key == "log_options":
            if not isinstance(value, dict):
                kind = type(value).__name__
                raise ConfigError(f"{path}: log_options must be a table, got a {kind}")
            value = _log_options(value, f"{path}: log_options")
        elif key in _HANDLERS:
            value = handler(value, f"{path}: {key}")
        elif key == "fatal_exceptions":
            if not isinstance(value, list):
                raise ConfigError(f"{path}: fatal_exceptions must be a list, got {value!r}")
            value = tuple(exception_type(v, f"{path}: fatal_exceptions") for v in value)
        elif key == "default_timestamp_extractor":
            value = extractor_named(value, f"{path}: {key}")
        settings[key] = value
    return settings


def build_config(
    path: str | Path | None, flags: dict[str, Any]
) -> tuple[StreamsConfig, dict[str, Any]]:
    """The StreamsConfig and the run settings from the file (if any) with ``flags`` (None =
    not given) on top. Errors name the file and the setting."""
    from_file = load_file(path) if path is not None else {}
    run = {k: from_file.pop(k, default) for k, default in RUN_SETTINGS.items()}
    run.update({k: v for k, v in flags.items() if k in RUN_SETTINGS and v is not None})
    try:
        check_master(run["master"])
    except ConfigError as exc:
        raise ConfigError(f"{'--master' if flags.get('master') else path}: {exc}") from None
    try:
        config = StreamsConfig(**from_file)
    except (ConfigError, TypeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    given = {k: v for k, v in flags.items() if k not in RUN_SETTINGS and v is not None and v != ()}
    for key in [k for k in given if k.endswith("_serde")]:
        given[key] = _serde(given[key], _flag(key))
    if "log_options" in given:
        given["log_options"] = {
            **config.log_options,
            **_log_options(given["log_options"], "--log-option"),
        }
    for key in [k for k in given if k in _HANDLERS]:
        given[key] = handler(given[key], _flag(key))
    if "fatal_exceptions" in given:
        given["fatal_exceptions"] = tuple(
            exception_type(n, "--fatal-exception") for n in given["fatal_exceptions"]
        )
    if "default_timestamp_extractor" in given:
        given["default_timestamp_extractor"] = extractor_named(
            given["default_timestamp_extractor"], "--default-timestamp-extractor"
        )
    if "application_id" not in from_file and "application_id" not in given:
        raise ConfigError("give --application-id, or application_id in the --config file")
    return config.with_overrides(**given), run
