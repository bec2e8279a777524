"""Records as JSON lines: parsing ``produce`` input and formatting ``consume`` output.

Input lines are objects with ``key``, ``value``, ``timestamp`` (epoch ms, default now) and
optionally ``partition`` and ``headers`` (an object of strings). A JSON string is stored as its
UTF-8 bytes, null as no bytes, and any other JSON value as its compact JSON text.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any

from streamtide.log import LogRecord

_INPUT_FIELDS = frozenset({"key", "value", "timestamp", "partition", "headers"})
FORMATS = ("text", "json", "base64", "hex")


class LineError(ValueError):
    """A produce input line that cannot be turned into a record."""


@dataclass(frozen=True)
class ParsedLine:
    record: LogRecord
    partition: int | None


def to_bytes(value: Any) -> bytes | None:
    """A JSON value as stored bytes: strings as UTF-8, null as None, the rest as JSON text."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_line(line: str) -> ParsedLine:
    """One input line as a record (and its explicit partition, if any); LineError if bad."""
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise LineError(f"invalid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise LineError(f"expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - _INPUT_FIELDS)
    if unknown:
        raise LineError(f"unknown field(s) {unknown}; allowed: {sorted(_INPUT_FIELDS)}")
    timestamp = obj.get("timestamp")
    if timestamp is None:
        timestamp = time.time_ns() // 1_000_000
    elif isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise LineError(f"timestamp must be an integer (epoch ms), got {timestamp!r}")
    partition = obj.get("partition")
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)):
        raise LineError(f"partition must be an integer, got {partition!r}")
    headers = obj.get("headers") or {}
    if not isinstance(headers, dict) or not all(
        isinstance(v, str) or v is None for v in headers.values()
    ):
        raise LineError("headers must be an object whose values are strings")
    record = LogRecord(
        key=to_bytes(obj.get("key")),
        value=to_bytes(obj.get("value")),
        timestamp=timestamp,
        headers=tuple((k, to_bytes(v)) for k, v in headers.items()),  # type: ignore[misc]
    )
    return ParsedLine(record, partition)


def render(data: bytes | None, fmt: str) -> Any:
    """Stored bytes as a JSON value in the given format (text, json, base64 or hex)."""
    if data is None:
        return None
    if fmt == "base64":
        return base64.b64encode(data).decode("ascii")
    if fmt == "hex":
        return data.hex()
    text = data.decode("utf-8", errors="backslashreplace")
    if fmt == "json":
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def format_record(record: LogRecord, partition: int, key_format: str, value_format: str) -> str:
    """One output line: partition, offset, timestamp, key, value (and headers if any)."""
    out: dict[str, Any] = {
        "partition": partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": render(record.key, key_format),
        "value": render(record.value, value_format),
    }
    if record.headers:
        out["headers"] = {k: render(v, "text") for k, v in record.headers}
    return json.dumps(out, ensure_ascii=False)
