"""An application on Kafka whose client settings hold secrets never shows them: not in the
driver's logs, its status (from Python and from ``streamtide status``), its metrics, the files
it writes, or an error about its settings (docs/security.md)."""

from __future__ import annotations

import json
import logging
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from streamtide import StreamsApp
from streamtide.cli import main
from streamtide.errors import StreamtideError
from tests.engine.scenarios import (
    engine_config,
    log_options_for,
    make_events,
    session_topology,
    write_events,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

#: Accepted by the clients and unused on the test broker's plaintext listener.
SECRETS = {
    "sasl.password": "pw-c41f9e",
    "ssl.key.password": "keypw-8d20b7",
    "sasl.oauthbearer.client.secret": "oauth-2be6d3",
}


def assert_hidden(text: str, where: str) -> None:
    for name, value in SECRETS.items():
        assert value not in text, f"the value of {name} appears in {where}"


def test_client_secrets_never_show(spark, kafka_url, tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    events = [(u, v, ts + 1_000_000) for u, v, ts in make_events(120, seed=71)]
    write_events(kafka_url, events)
    options = {**log_options_for(kafka_url), "sasl.username": "alice", **SECRETS}
    state = tmp_path / "state"
    config = engine_config(
        kafka_url, str(state), app="secrets", log_options=options, metrics_port=0
    )
    app = StreamsApp(session_topology(), config, spark=spark)
    progress = app.run_until_caught_up(timeout=300)
    assert sum(p.input_records for p in progress) == len(events)  # the settings were used
    with urllib.request.urlopen(app.metrics_url, timeout=10) as response:
        assert_hidden(response.read().decode(), "the metrics")
    assert_hidden(json.dumps(app.status()), "the status")
    assert_hidden(repr(app.config) + repr(app.log), "a repr")
    app.stop()

    properties = tmp_path / "client.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in options.items()))
    env = {"STREAMTIDE_LOG_CONFIG": str(properties)}
    shown = CliRunner().invoke(
        main,
        ["status", "--application-id", "secrets", "--log", kafka_url, "--state-dir", str(state)],
        env=env,
    )
    assert shown.exit_code == 0 and "secrets" in shown.output
    assert_hidden(shown.output, "streamtide status")

    conflicting = {**options, "isolation.level": "read_uncommitted"}
    with pytest.raises(StreamtideError, match=r"isolation\.level") as refused:
        StreamsApp(session_topology(), config.with_overrides(log_options=conflicting), spark=spark)
    assert_hidden(str(refused.value), "an error about the settings")

    assert_hidden(caplog.text, "the logs")
    for path in state.rglob("*"):  # the application's records and the tasks' state
        if path.is_file():
            data = path.read_bytes()
            for name, value in SECRETS.items():
                assert value.encode() not in data, f"the value of {name} is written to {path}"
