"""The log commands with a ``kafka://`` log on the test broker. The file log is the oracle:
the same commands on both logs print the same records (keys hash to the same partitions,
offsets are dense without transactions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from streamtide.cli import main
from streamtide.log import open_log

pytestmark = pytest.mark.kafka

LINES = [
    {"key": "alice", "value": {"page": "/"}, "timestamp": 1_000},
    {"key": "bob", "value": "plain text", "timestamp": 2_000, "headers": {"trace": "t1"}},
    {"key": None, "value": "keyless", "timestamp": 3_000},
    {"key": "carol", "value": None, "timestamp": 4_000, "partition": 2},
    {"key": "alice", "value": {"page": "/about"}, "timestamp": 5_000},
]


@pytest.fixture
def kafka_env(kafka_url: str, tmp_path: Path) -> dict[str, str]:
    """STREAMTIDE_LOG and a client config file (created topics keep old timestamps)."""
    config = tmp_path / "client.properties"
    config.write_text("# test broker\ntopic.retention.ms = -1\n\nsocket.timeout.ms=10000\n")
    return {"STREAMTIDE_LOG": kafka_url, "STREAMTIDE_LOG_CONFIG": str(config)}


def run(runner: CliRunner, env: dict[str, str], *args: str, stdin: str | None = None):
    return runner.invoke(main, list(args), env=env, input=stdin)


def round_trip(runner: CliRunner, env: dict[str, str]) -> list[dict]:
    assert run(runner, env, "topics", "create", "clicks", "-p", "3").exit_code == 0
    stdin = "\n".join(json.dumps(line) for line in LINES) + "\n"
    produced = run(runner, env, "produce", "clicks", stdin=stdin)
    assert produced.exit_code == 0, produced.output
    assert "produced 5 record(s) to clicks" in produced.stderr
    consumed = run(runner, env, "consume", "clicks", "--from-beginning")
    assert consumed.exit_code == 0, consumed.output
    return [json.loads(line) for line in consumed.stdout.splitlines()]


def test_produce_and_consume_print_what_the_file_log_prints(
    runner: CliRunner, kafka_env: dict[str, str], tmp_path: Path
) -> None:
    on_kafka = round_trip(runner, kafka_env)
    on_files = round_trip(runner, {"STREAMTIDE_LOG": f"file://{tmp_path / 'files'}"})
    assert on_kafka == on_files
    assert len(on_kafka) == 5
    assert {"partition": 2, "offset": 0, "timestamp": 4_000, "key": "carol", "value": None} in (
        on_kafka
    )
    with_header = next(r for r in on_kafka if r["key"] == "bob")
    assert with_header["headers"] == {"trace": "t1"} and with_header["value"] == "plain text"


def test_consume_ranges_on_kafka(runner: CliRunner, kafka_env: dict[str, str]) -> None:
    records = round_trip(runner, kafka_env)
    partition = records[0]["partition"]
    mine = [r for r in records if r["partition"] == partition]
    result = run(runner, kafka_env, "consume", "clicks", "-p", str(partition), "--offset", "1")
    assert [json.loads(line) for line in result.stdout.splitlines()] == mine[1:]
    result = run(runner, kafka_env, "consume", "clicks", "--from-beginning", "--max", "2")
    assert len(result.stdout.splitlines()) == 2
    result = run(runner, kafka_env, "consume", "clicks")  # from the end: nothing new
    assert result.exit_code == 0 and result.stdout == "" and "no records" in result.stderr


def test_topics_commands_on_kafka(runner: CliRunner, kafka_env: dict[str, str]) -> None:
    created = run(
        runner, kafka_env, "topics", "create", "store-changelog", "-p", "2",
        "--config", "cleanup.policy=compact",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    assert run(runner, kafka_env, "topics", "list").stdout.splitlines() == ["store-changelog"]
    again = run(runner, kafka_env, "topics", "create", "store-changelog", "-p", "2")
    assert again.exit_code == 1 and "already exists" in again.stderr
    ok = run(runner, kafka_env, "topics", "create", "store-changelog", "-p", "2", "--if-not-exists")
    assert ok.exit_code == 0
    described = run(runner, kafka_env, "topics", "describe", "store-changelog", "--json")
    assert json.loads(described.stdout)["partitions"] == 2
    log = open_log(kafka_env["STREAMTIDE_LOG"])
    assert log.topic_configs("store-changelog")["cleanup.policy"] == "compact"  # type: ignore[attr-defined]
    log.close()
    assert run(runner, kafka_env, "topics", "delete", "store-changelog").exit_code == 0
    missing = run(runner, kafka_env, "topics", "describe", "store-changelog")
    assert missing.exit_code == 1 and "does not exist" in missing.stderr
    assert "Traceback" not in missing.output


def test_a_bad_client_config_file_is_a_clean_error(
    runner: CliRunner, kafka_env: dict[str, str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=PLAINTEXT\nnot a setting\n")
    result = run(runner, {**kafka_env, "STREAMTIDE_LOG_CONFIG": str(bad)}, "topics", "list")
    assert result.exit_code == 1 and "line 2: expected key=value" in result.stderr
    gone = run(
        runner, {**kafka_env, "STREAMTIDE_LOG_CONFIG": str(tmp_path / "nope")}, "topics", "list"
    )
    assert gone.exit_code == 1 and "cannot read STREAMTIDE_LOG_CONFIG file" in gone.stderr
