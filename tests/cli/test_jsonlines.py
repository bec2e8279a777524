"""Parsing produce input and rendering consume output (``cli/jsonlines.py``)."""

from __future__ import annotations

import json

import pytest

from streamtide.cli.jsonlines import LineError, format_record, parse_line, render, to_bytes
from streamtide.log import LogRecord


def test_to_bytes() -> None:
    assert to_bytes("héllo") == "héllo".encode()
    assert to_bytes(None) is None
    assert to_bytes({"b": [1, 2.5, None], "a": "ü"}) == '{"b":[1,2.5,null],"a":"ü"}'.encode()
    assert to_bytes(5) == b"5" and to_bytes(True) == b"true" and to_bytes("") == b""


def test_parse_line() -> None:
    parsed = parse_line('{"key": "alice", "value": {"page": "/"}, "timestamp": 1000}')
    assert parsed.record == LogRecord(b"alice", b'{"page":"/"}', 1000)
    assert parsed.partition is None
    parsed = parse_line('{"value": "x", "partition": 2, "headers": {"h": "v", "n": null}}')
    assert parsed.partition == 2 and parsed.record.key is None
    assert parsed.record.headers == (("h", b"v"), ("n", None))
    assert abs(parsed.record.timestamp - __import__("time").time() * 1000) < 60_000


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{bad", "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"key": "a", "vaule": 1}', "unknown field"),
        ('{"timestamp": "now"}', "timestamp must be an integer"),
        ('{"timestamp": 1.5}', "timestamp must be an integer"),
        ('{"timestamp": true}', "timestamp must be an integer"),
        ('{"partition": "1"}', "partition must be an integer"),
        ('{"headers": {"h": 1}}', "headers must be"),
        ('{"headers": [1]}', "headers must be"),
    ],
)
def test_parse_line_errors(line: str, message: str) -> None:
    with pytest.raises(LineError, match=message):
        parse_line(line)


def test_render_formats() -> None:
    assert render(b'{"a":1}', "text") == '{"a":1}'
    assert render(b'{"a":1}', "json") == {"a": 1}
    assert render(b"not json", "json") == "not json"
    assert render(b"\x00\xff", "base64") == "AP8="
    assert render(b"\x00\xff", "hex") == "00ff"
    assert render(b"\xff", "text") == "\\xff"
    assert render(None, "hex") is None


def test_format_record() -> None:
    line = format_record(LogRecord(b"k", b"7", 5, (("h", b"v"),), 12), 3, "text", "json")
    assert json.loads(line) == {
        "partition": 3,
        "offset": 12,
        "timestamp": 5,
        "key": "k",
        "value": 7,
        "headers": {"h": "v"},
    }
    assert "headers" not in json.loads(
        format_record(LogRecord(None, None, 0, (), 0), 0, "text", "text")
    )
