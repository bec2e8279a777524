"""Key and value formats of ``consume`` and ``produce`` (``cli/formats.py``), and their use."""

from __future__ import annotations

import json
import struct

import pytest
from click.testing import CliRunner

from streamtide.cli import main
from streamtide.cli.formats import (
    FORMAT_NAMES,
    FormatError,
    get_format,
    iso,
    parse,
    parse_time,
    render,
)
from streamtide.log import LogRecord, open_log

HOUR = 3_600_000
T0 = 1_767_607_200_000  # 2026-01-05T10:00:00Z


def test_layouts_are_the_documented_bytes() -> None:
    assert parse(-2, "long") == struct.pack(">q", -2)
    assert parse("7", "int") == b"\x00\x00\x00\x07"
    assert parse(1.5, "double") == struct.pack(">d", 1.5)
    assert parse({"a": [1]}, "json") == b'{"a":[1]}'
    assert parse("00ff", "bytes") == b"\x00\xff" == parse("00ff", "hex")
    assert parse("AP8=", "base64") == b"\x00\xff"
    assert parse("é", "string") == "é".encode()
    window = parse(f"alice@[{iso(T0)},{iso(T0 + HOUR)})", "legacy-windowed-string")
    assert window == b"alice" + struct.pack(">qq", T0, T0 + HOUR)
    assert parse(
        {"key": 5, "start": T0, "end": str(T0 + 1)}, "legacy-windowed-long"
    ) == struct.pack(">qqq", 5, T0, T0 + 1)
    assert parse(None, "long") is None and render(None, "legacy-windowed-long") is None


def windowed(key: bytes, start: int, end: int) -> bytes:
    """The windowed-key layout: inner key, then start and end as 8-byte big-endian longs."""
    return key + struct.pack(">qq", start, end)


def test_windowed_keys_print_with_iso_times() -> None:
    data = windowed(b"bob", T0, T0 + 5_000)
    assert (
        render(data, "legacy-windowed-string")
        == "bob@[2026-01-05T10:00:00.000Z,2026-01-05T10:00:05.000Z)"
    )
    assert parse(render(data, "legacy-windowed-string"), "legacy-windowed-string") == data


@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_every_format_round_trips(name: str) -> None:
    windows = {
        f"{layout}-windowed-{kind}": f"{key}@[{iso(T0)},{iso(T0 + 60_000)})"
        for layout in ("session", "time", "legacy")
        for kind, key in (("string", "k"), ("long", "-3"))
    }
    samples = {
        **windows,
        "long": 2**40,
        "int": -5,
        "double": 0.25,
        "json": {"x": [1, None]},
        "bytes": "00ff10",
        "hex": "abcd",
        "base64": "AP8=",
        "legacy-windowed-string": f"k@[{iso(0)},{iso(1)})",
        "legacy-windowed-long": f"-3@[{iso(T0)},{iso(T0 + 60_000)})",
    }
    value = samples.get(name, "plain text")
    fmt = get_format(name, window_size_ms=60_000)  # the size only matters to time windows
    assert render(parse(value, fmt), fmt) == value


@pytest.mark.parametrize(
    ("value", "name", "message"),
    [
        ("x", "long", "long needs an integer"),
        (2**31, "int", "does not fit in int"),
        ("abc", "double", "double needs a number"),
        ("zz", "bytes", "not a hex string"),
        ("alice", "legacy-windowed-string", r"key@\[start,end\)"),
        ("a@[yesterday,1)", "legacy-windowed-string", "not a time"),
        ({"key": "a"}, "legacy-windowed-string", "needs key, start and end"),
    ],
)
def test_bad_input_is_named(value, name: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        parse(value, name)


def test_bad_bytes_and_names() -> None:
    with pytest.raises(FormatError, match="long needs 8 bytes, got 3"):
        render(b"abc", "long")
    with pytest.raises(FormatError, match="unknown format 'longg'; known formats: string"):
        get_format("longg")
    assert render(struct.pack(">d", float("inf")), "double") == "inf"


def test_times() -> None:
    assert iso(T0) == "2026-01-05T10:00:00.000Z"
    assert parse_time("2026-01-05T10:00:00Z") == T0 == parse_time("2026-01-05T11:00:00+01:00")
    assert parse_time("2026-01-05T10:00:00") == T0 and parse_time(str(T0)) == T0


def test_consume_prints_windowed_keys_longs_and_iso_times(log_url: str) -> None:
    log = open_log(log_url)
    log.create_topic("counts", 1)
    key = windowed(b"ann", T0, T0 + HOUR)
    log.append("counts", 0, [LogRecord(key, struct.pack(">q", 3), T0 + 10)])
    result = CliRunner().invoke(
        main,
        [
            "consume",
            "counts",
            "--log",
            log_url,
            "--from-beginning",
            "--key-format",
            "legacy-windowed-string",
            "--value-format",
            "long",
            "--timestamps",
            "iso",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "partition": 0,
        "offset": 0,
        "timestamp": "2026-01-05T10:00:00.010Z",
        "key": "ann@[2026-01-05T10:00:00.000Z,2026-01-05T11:00:00.000Z)",
        "value": 3,
    }
    bad = CliRunner().invoke(
        main, ["consume", "counts", "--log", log_url, "--from-beginning", "--value-format", "int"]
    )
    assert bad.exit_code == 1
    assert "partition 0, offset 0: int needs 4 bytes, got 8" in bad.output
    unknown = CliRunner().invoke(main, ["consume", "counts", "--log", log_url, "--key-format", "x"])
    assert unknown.exit_code == 2 and "'x' is not one of" in unknown.output


def test_produce_reads_the_same_formats(log_url: str) -> None:
    open_log(log_url).create_topic("t", 1)
    lines = [
        {
            "key": "ann@[2026-01-05T10:00:00Z,2026-01-05T11:00:00Z)",
            "value": 42,
            "timestamp": "2026-01-05T10:00:00Z",
        },
        {"key": {"key": "bob", "start": T0, "end": T0 + 1}, "value": "-1", "timestamp": 5},
    ]
    result = CliRunner().invoke(
        main,
        [
            "produce",
            "t",
            "--log",
            log_url,
            "--key-format",
            "legacy-windowed-string",
            "--value-format",
            "long",
        ],
        input="\n".join(json.dumps(line) for line in lines),
    )
    assert result.exit_code == 0, result.output
    records = list(open_log(log_url).read("t", 0))
    assert [r.key for r in records] == [
        windowed(b"ann", T0, T0 + HOUR),
        windowed(b"bob", T0, T0 + 1),
    ]
    assert [struct.unpack(">q", r.value)[0] for r in records] == [42, -1]
    assert [r.timestamp for r in records] == [T0, 5]
    bad = CliRunner().invoke(
        main, ["produce", "t", "--log", log_url, "--value-format", "int"], input='{"value": "x"}\n'
    )
    assert bad.exit_code == 1 and "line 1: value: int needs an integer, got 'x'" in bad.output
