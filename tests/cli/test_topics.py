"""``streamtide topics``."""

from __future__ import annotations

import json

from click.testing import CliRunner

from streamtide.cli import main
from streamtide.log import LogRecord, open_log


def test_create_list_describe_delete(runner: CliRunner, log_url: str) -> None:
    result = runner.invoke(
        main, ["topics", "create", "clicks", "--partitions", "3", "--log", log_url]
    )
    assert result.exit_code == 0, result.output
    assert "created topic clicks with 3 partition(s)" in result.stdout
    runner.invoke(main, ["topics", "create", "alpha", "--log", log_url])
    result = runner.invoke(main, ["topics", "list", "--log", log_url])
    assert result.stdout.splitlines() == ["alpha", "clicks"]

    log = open_log(log_url)
    log.append("clicks", 1, [LogRecord(b"k", b"v", 1)] * 4)
    log.append("clicks", 1, [LogRecord(b"k", b"v", 1)] * 2)
    log.append("clicks", 2, [LogRecord(b"k", b"v", 1)])
    log.truncate_before("clicks", 1, 4)
    result = runner.invoke(main, ["topics", "describe", "clicks", "--log", log_url])
    assert result.exit_code == 0
    assert "partitions: 3  records: 3" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines()[2:]]
    assert rows == [["0", "0", "0", "0"], ["1", "4", "6", "2"], ["2", "0", "1", "1"]]
    result = runner.invoke(main, ["topics", "describe", "clicks", "--json", "--log", log_url])
    described = json.loads(result.stdout)
    assert described["partitions"] == 3
    assert described["offsets"][1] == {"partition": 1, "begin_offset": 4, "end_offset": 6}

    result = runner.invoke(main, ["topics", "delete", "clicks", "--log", log_url])
    assert result.exit_code == 0 and "deleted topic clicks" in result.stdout
    assert runner.invoke(main, ["topics", "list", "--log", log_url]).stdout.split() == ["alpha"]


def test_create_twice(runner: CliRunner, log_url: str) -> None:
    args = ["topics", "create", "t", "-p", "2", "--log", log_url]
    assert runner.invoke(main, args).exit_code == 0
    result = runner.invoke(main, args)
    assert result.exit_code == 1 and "already exists" in result.stderr
    assert runner.invoke(main, [*args, "--if-not-exists"]).exit_code == 0
    result = runner.invoke(
        main, ["topics", "create", "t", "-p", "3", "--if-not-exists", "--log", log_url]
    )
    assert result.exit_code == 1 and "exists with 2 partitions" in result.stderr


def test_bad_arguments(runner: CliRunner, log_url: str) -> None:
    result = runner.invoke(main, ["topics", "create", "t", "-p", "0", "--log", log_url])
    assert result.exit_code == 2
    result = runner.invoke(main, ["topics", "create", "bad/name", "--log", log_url])
    assert result.exit_code == 1 and "invalid topic name" in result.stderr


def test_missing_topic_is_a_clean_error(runner: CliRunner, log_url: str) -> None:
    for sub in ("describe", "delete"):
        result = runner.invoke(main, ["topics", sub, "ghost", "--log", log_url])
        assert result.exit_code == 1
        assert "topic 'ghost' does not exist" in result.stderr
        assert "Traceback" not in result.output


def test_log_from_environment(runner: CliRunner, log_url: str) -> None:
    result = runner.invoke(main, ["topics", "create", "envtopic"], env={"STREAMTIDE_LOG": log_url})
    assert result.exit_code == 0
    assert open_log(log_url).list_topics() == ["envtopic"]


def test_malformed_kafka_url_is_a_clean_error(runner: CliRunner) -> None:
    result = runner.invoke(main, ["topics", "list", "--log", "kafka://localhost"])
    assert result.exit_code == 1
    assert "host:port is expected" in result.stderr and "Traceback" not in result.output
