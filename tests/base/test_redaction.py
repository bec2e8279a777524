"""Client secrets in log options are never shown: in reprs, validation errors, the command
line's errors, or the errors of a Kafka client that refuses its settings."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest
from click.testing import CliRunner

from streamtide import StreamsConfig
from streamtide.cli import main
from streamtide.errors import ConfigError, LogError
from streamtide.log import open_log
from streamtide.redaction import MASK, is_secret_option, redact_text, redacted_options

SECRETS = {
    "sasl.password": "pw-6f1d2c",
    "ssl.key.password": "keypw-93ab",
    "ssl.keystore.password": "storepw-71e0",
    "sasl.oauthbearer.client.secret": "oauth-5c8e",
    "sasl.jaas.config": "jaas-password=4d2a",
    "ssl.key.pem": "-----BEGIN PRIVATE KEY-----\nMIIEvQ-material-0b7d\n-----END PRIVATE KEY-----",
}
PUBLIC = {"sasl.username": "alice", "ssl.key.location": "/etc/kafka/key.pem", "acks": "all"}


def assert_hidden(text: str) -> None:
    """No secret value, nor any line of one (PEM armor aside), is in ``text``."""
    for name, value in SECRETS.items():
        for part in value.splitlines():
            if not part.startswith("-----"):
                assert part not in text, f"the value of {name} was shown"


def test_which_options_are_secret() -> None:
    assert all(is_secret_option(name) for name in SECRETS)
    assert not any(is_secret_option(name) for name in PUBLIC)
    assert is_secret_option("api.key") and is_secret_option("SASL_PASSWORD")
    assert not is_secret_option("topic.retention.ms") and not is_secret_option(
        "ssl.keystore.location"
    )


def test_shown_options_and_quoted_values_are_masked() -> None:
    shown = redacted_options({**SECRETS, **PUBLIC})
    assert shown == {**dict.fromkeys(SECRETS, MASK), **PUBLIC}
    text = f"refused: {SECRETS['sasl.password']} and {SECRETS['ssl.key.pem']} for alice"
    assert redact_text(text, {**SECRETS, **PUBLIC}) == f"refused: {MASK} and {MASK} for alice"


def test_the_config_repr_masks_secrets_and_shows_the_rest() -> None:
    config = StreamsConfig(application_id="x", log_options={**SECRETS, **PUBLIC})
    text = repr(config) + str(config)
    assert_hidden(text)
    assert "'sasl.username': 'alice'" in text and f"'sasl.password': '{MASK}'" in text
    assert config.log_options["sasl.password"] == SECRETS["sasl.password"]  # still used


def test_a_config_error_does_not_echo_the_options() -> None:
    with pytest.raises(ConfigError) as caught:
        StreamsConfig(log_options=list(SECRETS.items()))  # type: ignore[arg-type]
    assert_hidden(str(caught.value))
    with pytest.raises(ConfigError) as caught:
        StreamsConfig(log_options={**SECRETS, 7: "x"})  # type: ignore[dict-item]
    assert_hidden(str(caught.value))


def test_a_refused_client_config_is_a_log_error_without_the_secrets() -> None:
    log = open_log("kafka://127.0.0.1:1", **SECRETS, **{"security.protocol": "NOT-A-PROTOCOL"})
    with pytest.raises(LogError, match="the Kafka client refused its settings") as caught:
        log.end_offset("t", 0)
    shown = "".join(traceback.format_exception(caught.value))
    assert "_INVALID_ARG" in shown  # the client's reason is kept
    assert "During handling" not in shown and "direct cause" not in shown  # nothing chained
    assert_hidden(shown)
    log.close()


def test_command_line_errors_do_not_echo_secret_lines(tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text(
        f"sasl.password={SECRETS['sasl.password']}\n{SECRETS['ssl.key.password']}\n"
    )
    result = CliRunner().invoke(
        main,
        ["topics", "list", "--log", "kafka://127.0.0.1:1"],
        env={"STREAMTIDE_LOG_CONFIG": str(properties)},
    )
    assert result.exit_code == 1 and "line 2: expected key=value" in result.output
    assert_hidden(result.output)
    flag = f"sasl.password:{SECRETS['sasl.password']}"  # ':' for '=': not KEY=VALUE
    result = CliRunner().invoke(main, ["run", "x:y", "--application-id", "a", "--log-option", flag])
    assert result.exit_code != 0 and "--log-option #1: expected KEY=VALUE" in result.output
    assert_hidden(result.output)
    toml = tmp_path / "app.toml"
    toml.write_text(
        f'application_id = "a"\nlog_options = "sasl.password={SECRETS["sasl.password"]}"\n'
    )
    result = CliRunner().invoke(main, ["run", "x:y", "--config", str(toml)])
    assert result.exit_code != 0 and "log_options must be a table, got a str" in result.output
    assert_hidden(result.output)
