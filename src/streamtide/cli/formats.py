"""How ``consume`` prints and ``produce`` reads keys and values: one format per byte layout.

The layouts are defined here, independently of the serdes, so the command line keeps reading
what it wrote:

- ``string`` (alias ``text``): UTF-8. ``produce`` also takes any other JSON value, stored as
  its JSON text.
- ``long``: 8-byte big-endian signed; ``int``: 4-byte big-endian signed; ``double``: 8-byte
  big-endian IEEE 754.
- ``json``: UTF-8 JSON text, printed parsed.
- ``bytes`` (alias ``hex``): any bytes, written as hex; ``base64``: any bytes, as base64.
- ``windowed-string``, ``windowed-long``: a windowed key: the inner key (UTF-8, or 8-byte
  long), then window start and end as 8-byte big-endian epoch milliseconds. Printed as
  ``key@[start,end)`` with ISO-8601 UTC times; ``produce`` takes that form (times ISO or epoch
  ms) or an object ``{"key": ..., "start": ..., "end": ...}``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_DOUBLE = struct.Struct(">d")
_WINDOWED = re.compile(r"^(?P<key>.*)@\[(?P<start>[^,\[\]]+),(?P<end>[^,\[\]]+)\)$", re.DOTALL)


class FormatError(ValueError):
    """Bytes that do not fit a format, or input that cannot be written in it."""


@dataclass(frozen=True)
class Format:
    """A byte layout: ``render`` turns stored bytes into a JSON value, ``parse`` the reverse."""

    name: str
    render: Callable[[bytes], Any]
    parse: Callable[[Any], bytes]


# ---- times -------------------------------------------------------------------------------


def iso(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds, e.g. 2026-01-05T10:00:00.000Z."""
    moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: Any) -> int:
    """Epoch milliseconds from an int, a string of digits, or an ISO-8601 time (UTC if no
    offset is given)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise FormatError(f"not a time (epoch ms or ISO-8601): {value!r}") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return round(moment.timestamp() * 1000)
    raise FormatError(f"not a time (epoch ms or ISO-8601): {value!r}")


# ---- layouts -----------------------------------------------------------------------------


def _render_string(data: bytes) -> str:
    return data.decode("utf-8", errors="backslashreplace")


def _parse_string(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _render_json(data: bytes) -> Any:
    text = data.decode("utf-8", errors="backslashreplace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _parse_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _fixed(layout: struct.Struct, what: str) -> Callable[[bytes], Any]:
    def render(data: bytes) -> Any:
        if len(data) != layout.size:
            raise FormatError(f"{what} needs {layout.size} bytes, got {len(data)}")
        return layout.unpack(data)[0]

    return render


def _integer(value: Any, layout: struct.Struct, what: str) -> bytes:
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(f"{what} needs an integer, got {value!r}")
    try:
        return layout.pack(value)
    except struct.error:
        raise FormatError(f"{value} does not fit in {what} ({layout.size} bytes)") from None


def _parse_double(value: Any) -> bytes:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise FormatError(f"double needs a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FormatError(f"double needs a number, got {value!r}")
    return _DOUBLE.pack(float(value))


def _render_double(data: bytes) -> Any:
    number = _fixed(_DOUBLE, "double")(data)
    return number if math.isfinite(number) else str(number)  # JSON has no inf/nan


def _parse_hex(value: Any) -> bytes:
    if not isinstance(value, str):
        raise FormatError(f"bytes are written as a hex string, got {value!r}")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise FormatError(f"not a hex string: {value!r}") from None


def _parse_base64(value: Any) -> bytes:
    if not isinstance(value, str):
        raise FormatError(f"base64 needs a string, got {value!r}")
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        raise FormatError(f"not base64: {value!r}") from None


def _windowed(inner: Format) -> Format:
    def render(data: bytes) -> str:
        if len(data) < 16:
            raise FormatError(f"a windowed key needs at least 16 bytes, got {len(data)}")
        key = inner.render(data[:-16])
        start, end = _LONG.unpack_from(data, len(data) - 16)[0], _LONG.unpack(data[-8:])[0]
        return f"{key}@[{iso(start)},{iso(end)})"

    def parse(value: Any) -> bytes:
        if isinstance(value, dict):
            missing = {"key", "start", "end"} - set(value)
            if missing:
                raise FormatError(f"a windowed key object needs key, start and end: {value!r}")
            key, start, end = value["key"], value["start"], value["end"]
        elif isinstance(value, str) and (match := _WINDOWED.match(value)):
            key, start, end = match["key"], match["start"], match["end"]
        else:
            raise FormatError(
                f"a windowed key is written key@[start,end) or "
                f'{{"key": .., "start": .., "end": ..}}, got {value!r}'
            )
        return inner.parse(key) + _LONG.pack(parse_time(start)) + _LONG.pack(parse_time(end))

    return Format(f"windowed-{inner.name}", render, parse)


_STRING = Format("string", _render_string, _parse_string)
_LONG_FORMAT = Format("long", _fixed(_LONG, "long"), lambda v: _integer(v, _LONG, "long"))
_BYTES = Format("bytes", lambda data: data.hex(), _parse_hex)

FORMATS: dict[str, Format] = {
    "string": _STRING,
    "text": Format("text", _render_string, _parse_string),
    "long": _LONG_FORMAT,
    "int": Format("int", _fixed(_INT, "int"), lambda v: _integer(v, _INT, "int")),
    "double": Format("double", _render_double, _parse_double),
    "json": Format("json", _render_json, _parse_json),
    "bytes": _BYTES,
    "hex": Format("hex", _BYTES.render, _BYTES.parse),
    "base64": Format("base64", lambda d: base64.b64encode(d).decode("ascii"), _parse_base64),
    "windowed-string": _windowed(_STRING),
    "windowed-long": _windowed(Format("long", _LONG_FORMAT.render, _LONG_FORMAT.parse)),
}
FORMAT_NAMES = tuple(FORMATS)


def get_format(name: str) -> Format:
    """The format called ``name``; FormatError listing the known names otherwise."""
    try:
        return FORMATS[name]
    except KeyError:
        raise FormatError(
            f"unknown format {name!r}; known formats: {', '.join(FORMAT_NAMES)}"
        ) from None


def render(data: bytes | None, name: str) -> Any:
    """Stored bytes as a JSON value in the format ``name`` (None stays None)."""
    return None if data is None else get_format(name).render(data)


def parse(value: Any, name: str) -> bytes | None:
    """A JSON value as bytes in the format ``name`` (None stays None)."""
    return None if value is None else get_format(name).parse(value)
