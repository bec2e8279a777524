from __future__ import annotations

from datetime import timedelta

import pytest

from streamtide import ConfigError, Record, Serdes, StreamsConfig, Window
from streamtide.time import MockClock, non_negative_millis, to_millis


def test_durations_accept_timedelta_or_int_ms() -> None:
    assert to_millis(timedelta(seconds=1, milliseconds=5)) == 1005
    assert to_millis(timedelta(days=1)) == 86_400_000
    assert to_millis(250) == 250
    with pytest.raises(TypeError, match="timedelta or int"):
        to_millis(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        to_millis(True)
    with pytest.raises(ValueError, match="interval must not be negative"):
        non_negative_millis(-1, "interval")


def test_mock_clock_moves_only_forward() -> None:
    clock = MockClock(100)
    assert clock.advance(timedelta(seconds=1)) == 1100
    with pytest.raises(ValueError):
        clock.set(5)


def test_record_with_methods_return_new_records() -> None:
    record = Record("k", "v", 5)
    changed = record.with_key("k2").with_value("v2").with_timestamp(9)
    assert record == Record("k", "v", 5)
    assert changed == Record("k2", "v2", 9)


def test_window_validates_its_bounds() -> None:
    with pytest.raises(ValueError, match="before its start"):
        Window(10, 5)


def test_config_defaults_and_validation() -> None:
    config = StreamsConfig(application_id="clicks", commit_interval=timedelta(seconds=2))
    assert config.commit_interval == 2000 and config.dlq_topic == "clicks-dlq"
    with pytest.raises(ConfigError, match="application_id"):
        StreamsConfig(application_id="has space")
    with pytest.raises(ConfigError, match="num_standby_replicas must be >= 0"):
        StreamsConfig(num_standby_replicas=-1)
    with pytest.raises(ConfigError, match="processing_guarantee"):
        StreamsConfig(processing_guarantee="maybe")
    with pytest.raises(ConfigError, match="deserialization_exception_handler"):
        StreamsConfig(deserialization_exception_handler="ignore")
    with pytest.raises(ConfigError, match="processing_exception_handler"):
        StreamsConfig(processing_exception_handler=KeyError)  # a type, not a function
    with pytest.raises(ConfigError, match="errors_dead_letter_topic"):
        StreamsConfig(errors_dead_letter_topic="no spaces")
    assert config.with_overrides(errors_dead_letter_topic="dead").dlq_topic == "dead"
    with pytest.raises(ConfigError, match="max_records_per_batch must be an int"):
        StreamsConfig(max_records_per_batch="many")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="default_key_serde must be a Serde"):
        StreamsConfig(default_key_serde=str)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown setting"):
        config.with_overrides(colour="blue")
    assert config.with_overrides(default_key_serde=Serdes.string()).application_id == "clicks"


@pytest.mark.parametrize(
    ("setting", "value"),
    [("state_dir", 42), ("state_dir", ""), ("log", None), ("auto_offset_reset", "oldest")],
)
def test_config_values_are_type_checked(setting, value) -> None:
    with pytest.raises(ConfigError, match=setting):
        StreamsConfig(**{setting: value})


def test_paths_are_accepted_for_directories(tmp_path) -> None:
    config = StreamsConfig(state_dir=tmp_path / "s", log=tmp_path / "log")
    assert config.state_dir == str(tmp_path / "s") and config.log == str(tmp_path / "log")


def test_the_state_directory_is_expanded_on_the_host_that_asks(tmp_path, monkeypatch) -> None:
    """One setting, each executor's own disk: variables and ~ expand where the state is."""
    from pathlib import Path

    config = StreamsConfig(state_dir="$STREAMTIDE_TEST_HOST/state")
    assert config.state_dir == "$STREAMTIDE_TEST_HOST/state"  # kept as given, shipped as is
    monkeypatch.setenv("STREAMTIDE_TEST_HOST", str(tmp_path / "host-a"))
    assert config.local_state_dir() == tmp_path / "host-a" / "state"
    monkeypatch.setenv("STREAMTIDE_TEST_HOST", str(tmp_path / "host-b"))
    assert config.local_state_dir() == tmp_path / "host-b" / "state"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert StreamsConfig(state_dir="~/s").local_state_dir() == Path(tmp_path) / "s"
    assert StreamsConfig(state_dir="./rel").local_state_dir() == Path("rel")
