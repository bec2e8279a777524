"""``streamtide produce``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from streamtide.cli import main
from streamtide.log import open_log, partition_for_key


def lines(*objs: object) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def create(runner: CliRunner, log_url: str, topic: str, partitions: int) -> None:
    args = ["topics", "create", topic, "-p", str(partitions), "--log", log_url]
    assert runner.invoke(main, args).exit_code == 0


def test_produce_from_stdin_hashes_keys(runner: CliRunner, log_url: str) -> None:
    create(runner, log_url, "t", 4)
    keys = [f"user-{i}" for i in range(20)]
    data = lines(*({"key": k, "value": {"n": i}, "timestamp": 100 + i} for i, k in enumerate(keys)))
    result = runner.invoke(main, ["produce", "t", "--log", log_url], input=data)
    assert result.exit_code == 0, result.output
    assert "produced 20 record(s) to t" in result.stderr
    log = open_log(log_url)
    seen = {}
    for p in range(4):
        for r in log.read("t", p):
            seen[r.key.decode()] = (p, r.value, r.timestamp)
    assert len(seen) == 20
    for i, k in enumerate(keys):
        assert seen[k] == (
            partition_for_key(k.encode(), 4),
            json.dumps({"n": i}, separators=(",", ":")).encode(),
            100 + i,
        )
    assert len({p for p, _, _ in seen.values()}) > 1


def test_produce_from_a_file_with_explicit_partitions(
    runner: CliRunner, log_url: str, tmp_path: Path
) -> None:
    create(runner, log_url, "t", 3)
    path = tmp_path / "in.jsonl"
    path.write_text(
        lines(
            {"key": "a", "value": "x", "timestamp": 1, "partition": 2},
            {"key": "b", "value": None, "timestamp": 2},
        )
        + "\n   \n"
        + lines({"value": 5, "timestamp": 3, "headers": {"src": "file"}})
    )
    result = runner.invoke(
        main, ["produce", "t", "--file", str(path), "--partition", "1", "--log", log_url]
    )
    assert result.exit_code == 0, result.output
    log = open_log(log_url)
    assert [(r.key, r.value) for r in log.read("t", 2)] == [(b"a", b"x")]
    got = list(log.read("t", 1))
    assert [(r.key, r.value, r.timestamp) for r in got] == [(b"b", None, 2), (None, b"5", 3)]
    assert got[1].headers == (("src", b"file"),)


def test_keyless_records_go_round_robin(runner: CliRunner, log_url: str) -> None:
    create(runner, log_url, "t", 3)
    data = lines(*({"value": str(i), "timestamp": i} for i in range(7)))
    assert runner.invoke(main, ["produce", "t", "--log", log_url], input=data).exit_code == 0
    log = open_log(log_url)
    assert [log.end_offset("t", p) for p in range(3)] == [3, 2, 2]
    assert [r.value for r in log.read("t", 0)] == [b"0", b"3", b"6"]
    # The next run continues the rotation instead of starting at partition 0 again.
    assert (
        runner.invoke(
            main, ["produce", "t", "--log", log_url], input=lines({"value": "7"})
        ).exit_code
        == 0
    )
    assert [log.end_offset("t", p) for p in range(3)] == [3, 3, 2]


def test_malformed_line_keeps_earlier_records(runner: CliRunner, log_url: str) -> None:
    create(runner, log_url, "t", 2)
    data = lines(*({"key": f"k{i}", "value": i, "timestamp": i} for i in range(5)))
    data += "{not json}\n" + lines({"key": "late", "value": 1, "timestamp": 9})
    result = runner.invoke(
        main, ["produce", "t", "--batch-size", "2", "--log", log_url], input=data
    )
    assert result.exit_code == 1
    assert "line 6: invalid JSON" in result.stderr
    assert "The 5 record(s) before it were written" in result.stderr
    assert "Traceback" not in result.output
    log = open_log(log_url)
    keys = sorted(r.key for p in range(2) for r in log.read("t", p))
    assert keys == [b"k0", b"k1", b"k2", b"k3", b"k4"]


def test_bad_field_and_bad_partition_name_the_line(runner: CliRunner, log_url: str) -> None:
    create(runner, log_url, "t", 2)
    result = runner.invoke(
        main, ["produce", "t", "--log", log_url], input=lines({"value": 1, "timestamp": "x"})
    )
    assert result.exit_code == 1 and "line 1: timestamp must be an integer" in result.stderr
    result = runner.invoke(
        main,
        ["produce", "t", "--log", log_url],
        input=lines({"value": 1}, {"value": 2, "partition": 5}),
    )
    assert result.exit_code == 1 and "line 2: partition 5 does not exist" in result.stderr
    result = runner.invoke(main, ["produce", "t", "--log", log_url], input=b'{"value": "\xff"}\n')
    assert result.exit_code == 1 and "line 1:" in result.stderr


def test_partition_option_out_of_range(runner: CliRunner, log_url: str) -> None:
    create(runner, log_url, "t", 2)
    result = runner.invoke(
        main, ["produce", "t", "-p", "2", "--log", log_url], input=lines({"value": 1})
    )
    assert result.exit_code == 1 and "no partition 2" in result.stderr
    assert open_log(log_url).end_offset("t", 0) == 0


def test_produce_to_missing_topic(runner: CliRunner, log_url: str) -> None:
    result = runner.invoke(main, ["produce", "ghost", "--log", log_url], input=lines({"value": 1}))
    assert result.exit_code == 1
    assert "topic 'ghost' does not exist" in result.stderr and "Traceback" not in result.output


def test_progress_bar_can_be_forced(runner: CliRunner, log_url: str, tmp_path: Path) -> None:
    create(runner, log_url, "t", 1)
    path = tmp_path / "in.jsonl"
    path.write_text(lines(*({"value": i} for i in range(50))))
    result = runner.invoke(main, ["produce", "t", "-f", str(path), "--progress", "--log", log_url])
    assert result.exit_code == 0
    assert "producing to t" in result.stderr
    quiet = runner.invoke(main, ["produce", "t", "-f", str(path), "--log", log_url])
    assert "producing to t" not in quiet.stderr  # stderr is not a terminal here
    assert open_log(log_url).end_offset("t", 0) == 100
