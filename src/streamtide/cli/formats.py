"""How ``consume`` prints and ``produce`` reads keys and values: one format per byte layout.

- ``string`` (alias ``text``): UTF-8. ``produce`` also takes any other JSON value, stored as
  its JSON text.
- ``long``: 8-byte big-endian signed; ``int``: 4-byte big-endian signed; ``double``: 8-byte
  big-endian IEEE 754.
- ``json``: UTF-8 JSON text, printed parsed.
- ``bytes`` (alias ``hex``): any bytes, written as hex; ``base64``: any bytes, as base64.
- Windowed keys, one format per windowed serde, with a UTF-8 (``-string``) or 8-byte long
  (``-long``) inner key, printed as ``key@[start,end)`` with ISO-8601 UTC times:
  ``session-windowed-*`` (``Serdes.session_windowed``: key, end, start),
  ``time-windowed-*`` (``Serdes.time_windowed``: key, start; the end is start plus the window
  size, which the format is given) and ``legacy-windowed-*`` (the deprecated
  ``Serdes.windowed``: key, start, end). ``produce`` takes that form (times ISO or epoch ms)
  or an object ``{"key": ..., "start": ..., "end": ...}``; a time-windowed key may leave out
  the end.

The fixed layouts are written out here; the windowed ones are the serdes' own, so what an
application writes with a windowed serde is read back with the format of the same name.
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

from streamtide.errors import SerdeError
from streamtide.serde import Serde, Serdes, SessionWindowedSerde, WindowedSerde
from streamtide.window import Window, Windowed

_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_DOUBLE = struct.Struct(">d")
_WINDOWED = re.compile(r"^(?P<key>.*)@\[(?P<start>[^,\[\]]+),(?P<end>[^,\[\]]+)\)$", re.DOTALL)
_MAX_LONG = (1 << 63) - 1


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
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        raise FormatError(f"{ms} ms is not a time between the years 1 and 9999") from None
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


def _window_parts(value: Any, end_optional: bool) -> tuple[Any, Any, Any]:
    """Key, start and end (None if left out) of a windowed key written as text or object."""
    if isinstance(value, dict):
        needed = ("key", "start") if end_optional else ("key", "start", "end")
        if set(needed) - set(value):
            names = "key and start" if end_optional else "key, start and end"
            raise FormatError(f"a windowed key object needs {names}: {value!r}")
        return value["key"], value["start"], value.get("end")
    if isinstance(value, str) and (match := _WINDOWED.match(value)):
        return match["key"], match["start"], match["end"]
    raise FormatError(
        f'a windowed key is written key@[start,end) or {{"key": .., "start": .., "end": ..}}, '
        f"got {value!r}"
    )


def _windowed(name: str, serde: Serde, inner: Format, size_ms: int | None = None) -> Format:
    """The windowed key layout of ``serde`` (a windowed serde over raw bytes), its inner key
    in the format ``inner``; ``size_ms``: a time window's size, whose end is not stored."""

    def render(data: bytes) -> str:
        try:
            windowed = serde.deserialize(data)
        except SerdeError as e:
            raise FormatError(f"not a {name} key: {e}") from None
        assert windowed is not None
        window = windowed.window
        return f"{inner.render(windowed.key)}@[{iso(window.start)},{iso(window.end)})"

    def parse(value: Any) -> bytes:
        key, start, end = _window_parts(value, end_optional=size_ms is not None)
        start_ms = parse_time(start)
        if size_ms is None:
            end_ms = parse_time(end)
        else:
            end_ms = min(start_ms + size_ms, _MAX_LONG)
            if end is not None and parse_time(end) != end_ms:
                raise FormatError(
                    f"a window of {size_ms} ms (--window-size) starting at {start} ends at "
                    f"{iso(end_ms)}, not {end}"
                )
        try:
            data = serde.serialize(Windowed(inner.parse(key), Window(start_ms, end_ms)))
        except (SerdeError, ValueError) as e:
            raise FormatError(str(e)) from None
        assert data is not None
        return data

    return Format(name, render, parse)


_STRING = Format("string", _render_string, _parse_string)
_LONG_FORMAT = Format("long", _fixed(_LONG, "long"), lambda v: _integer(v, _LONG, "long"))
_BYTES = Format("bytes", lambda data: data.hex(), _parse_hex)

_LONG_KEY = Format("long", _LONG_FORMAT.render, _LONG_FORMAT.parse)
_INNER = {"string": _STRING, "long": _LONG_KEY}

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
}
for _kind, _inner in _INNER.items():
    FORMATS[f"session-windowed-{_kind}"] = _windowed(
        f"session-windowed-{_kind}", SessionWindowedSerde(Serdes.bytes()), _inner
    )
for _kind, _inner in _INNER.items():
    FORMATS[f"legacy-windowed-{_kind}"] = _windowed(
        f"legacy-windowed-{_kind}", WindowedSerde(Serdes.bytes()), _inner
    )
#: Formats that need the window size (``--window-size``): their layout does not store the end.
TIME_WINDOWED = tuple(f"time-windowed-{kind}" for kind in _INNER)
_SESSION_AND_TIME = (*(n for n in FORMATS if n.startswith("session-")), *TIME_WINDOWED)
FORMAT_NAMES = (
    *(n for n in FORMATS if "windowed" not in n),
    *_SESSION_AND_TIME,
    *(n for n in FORMATS if n.startswith("legacy-")),
)
#: Names of earlier releases, for a message that says which name to use now.
RENAMED = {
    f"windowed-{kind}": (
        f"'windowed-{kind}' was the legacy layout (Serdes.windowed: key, start, end); pick the "
        f"format of the serde that wrote the keys: session-windowed-{kind} "
        f"(Serdes.session_windowed), time-windowed-{kind} with --window-size MS "
        f"(Serdes.time_windowed) or legacy-windowed-{kind} (Serdes.windowed)"
    )
    for kind in _INNER
}


def get_format(name: str, window_size_ms: int | None = None) -> Format:
    """The format called ``name`` (``window_size_ms``: the window size a time-windowed format
    needs); FormatError saying what is wrong otherwise."""
    if name in FORMATS:
        return FORMATS[name]
    if name in TIME_WINDOWED:
        if window_size_ms is None:
            raise FormatError(
                f"{name} needs the window size (--window-size MS, the size given to "
                "Serdes.time_windowed): its keys store the window start only"
            )
        serde = Serdes.time_windowed(Serdes.bytes(), window_size_ms)
        return _windowed(name, serde, _INNER[name.rpartition("-")[2]], window_size_ms)
    if name in RENAMED:
        raise FormatError(RENAMED[name])
    raise FormatError(f"unknown format {name!r}; known formats: {', '.join(FORMAT_NAMES)}")


def _resolved(fmt: str | Format) -> Format:
    return fmt if isinstance(fmt, Format) else get_format(fmt)


def render(data: bytes | None, fmt: str | Format) -> Any:
    """Stored bytes as a JSON value in the format ``fmt`` (or its name; None stays None)."""
    return None if data is None else _resolved(fmt).render(data)


def parse(value: Any, fmt: str | Format) -> bytes | None:
    """A JSON value as bytes in the format ``fmt`` (or its name; None stays None)."""
    return None if value is None else _resolved(fmt).parse(value)
