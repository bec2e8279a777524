"""``streamtide consume``."""

from __future__ import annotations

import json

from click.testing import CliRunner

from streamtide.cli import main
from streamtide.log import LogRecord, open_log


def setup_topic(log_url: str) -> None:
    log = open_log(log_url)
    log.create_topic("t", 2)
    log.append("t", 0, [LogRecord(f"k{i}".encode(), f"v{i}".encode(), i) for i in range(5)])
    log.append("t", 1, [LogRecord(None, b'{"n":1}', 50, (("h", b"x"),))])


def consume(runner: CliRunner, log_url: str, *args: str) -> tuple[int, list[dict], str]:
    result = runner.invoke(main, ["consume", "t", "--log", log_url, *args])
    return (
        result.exit_code,
        [json.loads(line) for line in result.stdout.splitlines()],
        result.stderr,
    )


def test_from_beginning_prints_every_partition(runner: CliRunner, log_url: str) -> None:
    setup_topic(log_url)
    code, out, _ = consume(runner, log_url, "--from-beginning")
    assert code == 0
    assert [(o["partition"], o["offset"]) for o in out] == [(0, i) for i in range(5)] + [(1, 0)]
    assert out[0] == {"partition": 0, "offset": 0, "timestamp": 0, "key": "k0", "value": "v0"}
    assert out[-1] == {
        "partition": 1,
        "offset": 0,
        "timestamp": 50,
        "key": None,
        "value": '{"n":1}',
        "headers": {"h": "x"},
    }


def test_offset_partition_and_max(runner: CliRunner, log_url: str) -> None:
    setup_topic(log_url)
    code, out, _ = consume(runner, log_url, "--partition", "0", "--offset", "2", "--max", "2")
    assert code == 0 and [o["value"] for o in out] == ["v2", "v3"]
    code, out, _ = consume(runner, log_url, "--from-beginning", "--max", "0")
    assert code == 0 and out == []
    code, out, _ = consume(runner, log_url, "--offset", "4")
    assert [(o["partition"], o["offset"]) for o in out] == [(0, 4)]


def test_formats(runner: CliRunner, log_url: str) -> None:
    setup_topic(log_url)
    _, out, _ = consume(runner, log_url, "-p", "1", "--from-beginning", "--value-format", "json")
    assert out[0]["value"] == {"n": 1}
    _, out, _ = consume(
        runner,
        log_url,
        "-p",
        "0",
        "--from-beginning",
        "--max",
        "1",
        "--key-format",
        "hex",
        "--value-format",
        "base64",
    )
    assert out[0]["key"] == b"k0".hex() and out[0]["value"] == "djA="


def test_default_starts_at_the_end(runner: CliRunner, log_url: str) -> None:
    setup_topic(log_url)
    code, out, err = consume(runner, log_url)
    assert code == 0 and out == [] and "--from-beginning" in err


def test_follow_stops_at_max_or_timeout(runner: CliRunner, log_url: str) -> None:
    setup_topic(log_url)
    code, out, _ = consume(runner, log_url, "--from-beginning", "--follow", "--max", "3")
    assert code == 0 and len(out) == 3
    code, out, _ = consume(runner, log_url, "--follow", "--timeout", "0.3")
    assert code == 0 and out == []


def test_errors(runner: CliRunner, log_url: str) -> None:
    setup_topic(log_url)
    result = runner.invoke(main, ["consume", "ghost", "--log", log_url, "--from-beginning"])
    assert result.exit_code == 1 and "topic 'ghost' does not exist" in result.stderr
    assert "Traceback" not in result.output
    code, _, err = consume(runner, log_url, "--partition", "7")
    assert code == 1 and "no partition 7" in err
    code, _, err = consume(runner, log_url, "--offset", "1", "--from-beginning")
    assert code == 2 and "exclude each other" in err
    open_log(log_url).append("t", 0, [LogRecord(b"k", b"v", 9)])
    open_log(log_url).truncate_before("t", 0, 5)
    code, _, err = consume(runner, log_url, "-p", "0", "--offset", "1")
    assert code == 1 and "truncated" in err


def test_progress_bar_can_be_forced(runner: CliRunner, log_url: str) -> None:
    setup_topic(log_url)
    result = runner.invoke(
        main, ["consume", "t", "--from-beginning", "--progress", "--log", log_url]
    )
    assert result.exit_code == 0 and "consuming t" in result.stderr
    assert len(result.stdout.splitlines()) == 6
