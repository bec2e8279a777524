"""The windowed key formats of the installed ``streamtide consume`` and ``produce``: each reads
the bytes of the serde of the same name, and a name that no longer says which layout it reads
is refused with the names to use."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from streamtide import Serdes, Window, Windowed
from streamtide.log import LogRecord, open_log
from tests.cli.installed import error_lines, streamtide

MINUTE = 60_000
T0 = 1_767_607_200_000  # 2026-01-05T10:00:00Z


def _keys(log_url: str, topic: str, keys: list[bytes]) -> None:
    log = open_log(log_url)
    log.create_topic(topic, 1, exist_ok=True)
    log.append(topic, 0, [LogRecord(k, struct.pack(">q", n), T0) for n, k in enumerate(keys)])
    log.close()


def _consumed(log_url: str, topic: str, *formats: str) -> list[dict]:
    result = streamtide("consume", topic, "--log", log_url, "--from-beginning", *formats)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_session_and_time_windowed_keys_print_their_own_windows(tmp_path: Path) -> None:
    log_url = f"file://{tmp_path / 'log'}"
    session = Serdes.session_windowed(Serdes.string())
    early, late = Window(T0, T0 + 4 * MINUTE), Window(T0 + 9 * MINUTE, T0 + 9 * MINUTE)
    _keys(log_url, "sessions", [session.serialize(Windowed("ann", w)) for w in (early, late)])
    timed = Serdes.time_windowed(Serdes.long(), MINUTE)
    _keys(log_url, "minutes", [timed.serialize(Windowed(42, Window(T0, T0 + MINUTE)))])

    sessions = _consumed(
        log_url, "sessions", "--key-format", "session-windowed-string", "--value-format", "long"
    )
    assert [r["key"] for r in sessions] == [
        "ann@[2026-01-05T10:00:00.000Z,2026-01-05T10:04:00.000Z)",
        "ann@[2026-01-05T10:09:00.000Z,2026-01-05T10:09:00.000Z)",
    ]
    assert [r["value"] for r in sessions] == [0, 1]
    minutes = _consumed(
        log_url, "minutes", "--key-format", "time-windowed-long", "--window-size", "60000"
    )
    assert minutes[0]["key"] == "42@[2026-01-05T10:00:00.000Z,2026-01-05T10:01:00.000Z)"

    # the legacy layout (start, end) applied to session keys (end, start) says so in a line
    wrong = streamtide(
        "consume", "sessions", "--log", log_url, "--from-beginning",
        "--key-format", "legacy-windowed-string",
    )  # fmt: skip
    assert wrong.returncode == 1
    (line,) = error_lines(wrong)
    assert "partition 0, offset 0" in line and "is before its start" in line
    assert "pick another --key-format" in line


def test_time_windows_need_their_size_and_old_names_point_to_the_new_ones(tmp_path: Path) -> None:
    log_url = f"file://{tmp_path / 'log'}"
    _keys(log_url, "minutes", [Serdes.time_windowed(Serdes.string(), MINUTE).serialize(
        Windowed("ann", Window(T0, T0 + MINUTE))
    )])  # fmt: skip
    no_size = streamtide(
        "consume", "minutes", "--log", log_url, "--from-beginning",
        "--key-format", "time-windowed-string",
    )  # fmt: skip
    assert no_size.returncode == 2
    assert "time-windowed-string needs the window size (--window-size MS" in no_size.stderr
    assert "Traceback" not in no_size.stderr
    for command in ("consume", "produce"):
        old = streamtide(command, "minutes", "--log", log_url, "--key-format", "windowed-string")
        assert old.returncode == 2
        assert "session-windowed-string (Serdes.session_windowed)" in old.stderr
        assert "time-windowed-string with --window-size MS" in old.stderr
        assert "legacy-windowed-string (Serdes.windowed)" in old.stderr


def test_produce_writes_what_consume_reads_and_the_serdes_decode(tmp_path: Path) -> None:
    log_url = f"file://{tmp_path / 'log'}"
    open_log(log_url).create_topic("windows", 1)
    lines = [
        {"key": "ann@[2026-01-05T10:00:00Z,2026-01-05T10:01:00Z)", "value": 3, "timestamp": T0},
        {"key": {"key": "bob", "start": T0 + MINUTE}, "value": 4, "timestamp": T0},
    ]
    text = "\n".join(json.dumps(line) for line in lines)
    formats = ("--key-format", "time-windowed-string", "--window-size", "60000")
    produced = streamtide(
        "produce", "windows", "--log", log_url, *formats, "--value-format", "long", stdin=text
    )
    assert produced.returncode == 0, produced.stderr
    serde = Serdes.time_windowed(Serdes.string(), MINUTE)
    keys = [serde.deserialize(r.key) for r in open_log(log_url).read("windows", 0)]
    assert keys == [
        Windowed("ann", Window(T0, T0 + MINUTE)),
        Windowed("bob", Window(T0 + MINUTE, T0 + 2 * MINUTE)),
    ]
    assert [r["key"] for r in _consumed(log_url, "windows", *formats)] == [
        "ann@[2026-01-05T10:00:00.000Z,2026-01-05T10:01:00.000Z)",
        "bob@[2026-01-05T10:01:00.000Z,2026-01-05T10:02:00.000Z)",
    ]
    wrong_end = streamtide(
        "produce", "windows", "--log", log_url, *formats,
        stdin=json.dumps({"key": {"key": "c", "start": T0, "end": T0 + 5}, "value": "x"}),
    )  # fmt: skip
    assert wrong_end.returncode == 1
    (line,) = error_lines(wrong_end)
    assert "line 1: key: a window of 60000 ms (--window-size)" in line
