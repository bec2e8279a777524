"""Records as JSON lines: parsing ``produce`` input and formatting ``consume`` output.

Input lines are objects with ``key``, ``value``, ``timestamp`` (epoch ms or ISO-8601, default
now) and optionally ``partition`` and ``headers`` (an object of strings). Keys and values are
written in a format of ``cli.formats``; the default, ``text``, stores a JSON string as its UTF-8
bytes and any other JSON value as its compact JSON text. null is always no bytes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from streamtide.cli import formats
from streamtide.cli.formats import Format, FormatError, iso
from streamtide.log import LogRecord

_INPUT_FIELDS = frozenset({"key", "value", "timestamp", "partition", "headers"})


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


def parse_line(
    line: str, key_format: str | Format = "text", value_format: str | Format = "text"
) -> ParsedLine:
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
    elif isinstance(timestamp, str) and not timestamp.strip().lstrip("-").isdigit():
        try:
            timestamp = formats.parse_time(timestamp)
        except FormatError:
            raise LineError(
                f"timestamp must be an integer (epoch ms) or an ISO-8601 time, got {timestamp!r}"
            ) from None
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
    try:
        key = formats.parse(obj.get("key"), key_format)
    except FormatError as e:
        raise LineError(f"key: {e}") from None
    try:
        value = formats.parse(obj.get("value"), value_format)
    except FormatError as e:
        raise LineError(f"value: {e}") from None
    record = LogRecord(
        key=key,
        value=value,
        timestamp=timestamp,
        headers=tuple((k, to_bytes(v)) for k, v in headers.items()),  # type: ignore[misc]
    )
    return ParsedLine(record, partition)


def render(data: bytes | None, fmt: str | Format) -> Any:
    """Stored bytes as a JSON value in the given format (see ``cli.formats``)."""
    return formats.render(data, fmt)


def format_record(
    record: LogRecord,
    partition: int,
    key_format: str | Format,
    value_format: str | Format,
    timestamps: str = "ms",
) -> str:
    """One output line: partition, offset, timestamp (epoch ms, or ISO-8601 with
    ``timestamps="iso"``), key, value (and headers if any). FormatError names the record."""
    try:
        key = render(record.key, key_format)
        value = render(record.value, value_format)
        timestamp = iso(record.timestamp) if timestamps == "iso" else record.timestamp
    except FormatError as e:
        raise FormatError(
            f"the record at partition {partition}, offset {record.offset}: {e}"
        ) from None
    out: dict[str, Any] = {
        "partition": partition,
        "offset": record.offset,
        "timestamp": timestamp,
        "key": key,
        "value": value,
    }
    if record.headers:
        out["headers"] = {k: render(v, "text") for k, v in record.headers}
    return json.dumps(out, ensure_ascii=False)
