"""Settings for ``streamtide run``: a TOML file and one flag per StreamsConfig setting."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
from click.testing import CliRunner

from streamtide import ErrorHandlerContext, ProcessingHandlerResponse, StreamsConfig
from streamtide.cli import main
from streamtide.cli.settings import build_config, load_file, serde_names
from streamtide.errors import ConfigError
from streamtide.serde import Serdes
from streamtide.timestamp_extractor import wallclock_timestamp


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "app.toml"
    path.write_text(text)
    return path


def skip_everything(
    context: ErrorHandlerContext, record: object, exception: Exception
) -> ProcessingHandlerResponse:
    """A handler function that a config file names."""
    return ProcessingHandlerResponse.CONTINUE


EVERY_SETTING = """
application_id = "clicks"
log = "file:///tmp/x"
state_dir = "/tmp/state"
commit_interval = 250
max_records_per_batch = 5000
num_standby_replicas = 1
acceptable_recovery_lag = 7
max_warmup_replicas = 3
processing_guarantee = "at_least_once"
deserialization_exception_handler = "log_and_continue"
processing_exception_handler = "tests.cli.test_settings.skip_everything"
errors_dead_letter_topic = "clicks-dead-letters"
default_key_serde = "string"
default_value_serde = "json"
cache_enabled = false
snapshot_interval = 9
locality_wait = 1000
metrics_port = 9464
metrics_bind_address = "0.0.0.0"
batch_processing = false
adaptive_batch_size = false
adaptive_batch_size_limit = 300000
stages_in_one_job = false
execution = "continuous"
work_unit_max_age = 60000
invalid_timestamp_handler = "log_and_skip"
auto_offset_reset = "earliest"
fatal_exceptions = ["builtins.ZeroDivisionError"]
default_timestamp_extractor = "streamtide.timestamp_extractor.wallclock_timestamp"
allow_topology_name_changes = true
ensure_explicit_internal_resource_naming = true
master = "local[1]"

[log_options]
"socket.timeout.ms" = 5000
"""


def test_the_file_takes_every_setting(tmp_path: Path) -> None:
    config, run = build_config(write(tmp_path, EVERY_SETTING), {})
    assert run == {"master": "local[1]"}
    names = {f.name for f in fields(StreamsConfig)}
    set_in_file = {line.split(" = ")[0] for line in EVERY_SETTING.strip().splitlines()}
    set_in_file.add("log_options")  # a table
    assert names <= set_in_file  # the test keeps up with new settings
    assert config.commit_interval == 250 and config.max_records_per_batch == 5000
    assert config.processing_guarantee == "at_least_once" and config.cache_enabled is False
    assert config.default_key_serde.name == "string" and config.default_value_serde.name == "json"
    assert config.metrics_port == 9464 and config.locality_wait == 1000
    assert config.metrics_bind_address == "0.0.0.0"
    assert config.batch_processing is False and config.adaptive_batch_size is False
    assert config.adaptive_batch_size_limit == 300_000
    assert config.stages_in_one_job is False
    assert config.execution == "continuous" and config.work_unit_max_age == 60_000
    assert config.invalid_timestamp_handler == "log_and_skip"
    assert config.auto_offset_reset == "earliest"
    assert config.fatal_exceptions == (ZeroDivisionError,)
    assert config.deserialization_exception_handler == "log_and_continue"
    handler = config.processing_exception_handler
    assert callable(handler) and handler.__name__ == "skip_everything"
    assert config.errors_dead_letter_topic == "clicks-dead-letters"
    assert config.default_timestamp_extractor is wallclock_timestamp
    assert config.log_options == {"socket.timeout.ms": 5000}
    assert config.allow_topology_name_changes is True
    assert config.ensure_explicit_internal_resource_naming is True


def test_repeated_flags_for_log_options_and_fatal_exceptions(tmp_path: Path) -> None:
    config, _ = build_config(
        None,
        {
            "application_id": "a",
            "log_options": ("security.protocol=SSL", "acks=all"),
            "fatal_exceptions": ("builtins.KeyError",),
        },
    )
    assert config.log_options == {"security.protocol": "SSL", "acks": "all"}
    assert config.fatal_exceptions == (KeyError,)
    config, _ = build_config(
        None,
        {
            "application_id": "a",
            "default_timestamp_extractor": "streamtide.timestamp_extractor:wallclock_timestamp",
        },
    )
    assert config.default_timestamp_extractor is wallclock_timestamp
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        build_config(None, {"application_id": "a", "log_options": ("nonsense",)})
    with pytest.raises(ConfigError, match="cannot find exception type"):
        build_config(None, {"application_id": "a", "fatal_exceptions": ("nowhere.Missing",)})


def test_handlers_are_names_or_functions_given_as_module_function() -> None:
    config, _ = build_config(
        None,
        {
            "application_id": "a",
            "processing_exception_handler": "log_and_continue",
            "deserialization_exception_handler": "tests.cli.test_settings:skip_everything",
        },
    )
    assert config.processing_exception_handler == "log_and_continue"
    assert config.deserialization_exception_handler.__name__ == "skip_everything"
    for name, message in [
        ("ignore", "give one of"),
        ("nowhere.handler", "cannot find handler function"),
        ("builtins.KeyError", "is not a function"),
    ]:
        with pytest.raises(ConfigError, match=message):
            build_config(None, {"application_id": "a", "processing_exception_handler": name})


def test_flags_override_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, EVERY_SETTING)
    config, run = build_config(
        path,
        {
            "commit_interval": 10,
            "cache_enabled": True,
            "default_key_serde": "bytes",
            "master": "local[2]",
            "log": None,
        },
    )
    assert config.commit_interval == 10 and config.cache_enabled is True
    assert config.default_key_serde.name == "bytes" and config.log == "file:///tmp/x"
    assert run["master"] == "local[2]"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'application_id = "a"\ncommit_intervall = 5\n',
            "app.toml: unknown setting 'commit_intervall'",
        ),
        ('application_id = "a"\ncommit_interval = "soon"\n', "app.toml: commit_interval must be"),
        (
            'application_id = "a"\ndefault_key_serde = "longer"\n',
            "app.toml: default_key_serde must name a serde",
        ),
        (
            'application_id = "a"\nnum_standby_replicas = -1\n',
            "app.toml: num_standby_replicas must be >= 0",
        ),
        (
            'application_id = "a"\ndefault_timestamp_extractor = "nowhere.at_all"\n',
            "app.toml: default_timestamp_extractor: cannot find timestamp extractor",
        ),
        ("application_id = \n", "app.toml is not valid TOML"),
        ("commit_interval = 5\n", "give --application-id"),
    ],
)
def test_bad_files_name_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config(write(tmp_path, text), {})


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_file(tmp_path / "nope.toml")


def test_serde_names_are_the_factories_without_arguments() -> None:
    assert {"bytes", "string", "json"} <= set(serde_names())
    assert all(callable(getattr(Serdes, n)) for n in serde_names())


def test_run_help_lists_a_flag_per_setting_and_rejects_bad_values(tmp_path: Path) -> None:
    runner = CliRunner()
    text = runner.invoke(main, ["run", "--help"]).output
    special = {
        "cache_enabled": "--cache / --no-cache",
        "log_options": "--log-option",
        "fatal_exceptions": "--fatal-exception",
    }
    for f in fields(StreamsConfig):
        flag = special.get(f.name, "--" + f.name.replace("_", "-"))
        assert flag in text, flag
    bad = runner.invoke(main, ["run", "m:t", "--config", str(write(tmp_path, "oops = 1\n"))])
    assert bad.exit_code == 1 and "unknown setting 'oops'" in bad.output
    bad = runner.invoke(main, ["run", "m:t", "--application-id", "a", "--default-key-serde", "x"])
    assert bad.exit_code == 2 and "'x' is not one of" in bad.output
