"""Serializers and deserializers between Python values and bytes, in Kafka's layouts.

``None`` always maps to ``None`` both ways (a tombstone / absent key), as in Kafka. The
deprecated ``int()``, ``float()`` and ``windowed()`` keep the bytes they wrote before
(docs/serdes.md).
"""

from __future__ import annotations

import builtins
import json
import json.encoder as json_encoder
import struct
import uuid
import warnings
from collections.abc import Callable
from itertools import repeat
from typing import Any, Generic, TypeVar

from streamtide.errors import ConfigError, SerdeError
from streamtide.json_columns import decode_column, encode_column
from streamtide.time import Duration, to_millis
from streamtide.window import Window, Windowed

T = TypeVar("T")

_SHORT = struct.Struct(">h")
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_FLOAT = struct.Struct(">f")
_JSON_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
#: ``_JSON_ENCODER``'s C encoder built once (``encode`` builds one per call), without the
#: circular-reference check: a failure of any kind redoes the value the full way, which
#: raises the precise error.
# CPython's C accelerator (None where it is not built); the stubs do not declare it
_C_MAKE_ENCODER: Callable[..., Any] | None = getattr(json_encoder, "c_make_encoder", None)
_JSON_ONE_SHOT = (
    None
    if _C_MAKE_ENCODER is None
    else _C_MAKE_ENCODER(
        None,
        _JSON_ENCODER.default,
        json_encoder.encode_basestring_ascii,
        None,
        ":",
        ",",
        True,
        False,
        True,
    )
)
_JSON_DECODER = json.JSONDecoder()
_DOUBLE = struct.Struct(">d")
_MAX_LONG = (1 << 63) - 1


class Serde(Generic[T]):
    """Turns values of one type into bytes and back."""

    name = "serde"

    def serialize(self, value: T | None) -> bytes | None:
        if value is None:
            return None
        try:
            return self._to_bytes(value)
        except SerdeError:
            raise
        except Exception as exc:
            raise SerdeError(
                f"{self.name} serde cannot serialize {_short(value)} "
                f"of type {type(value).__name__}: {exc}"
            ) from exc

    def deserialize(self, data: bytes | None) -> T | None:
        if data is None:
            return None
        try:
            return self._from_bytes(data)
        except SerdeError:
            raise
        except Exception as exc:
            raise SerdeError(
                f"{self.name} serde cannot deserialize {_short(bytes(data))}: {exc}"
            ) from exc

    def serialize_many(self, values: list[Any]) -> list[bytes | None]:
        """``serialize`` of every value (a column at a time); the first failure raises the
        same ``SerdeError`` ``serialize`` would."""
        try:
            return self._to_bytes_many(values)
        except Exception:
            serialize = self.serialize
            return [serialize(value) for value in values]

    def deserialize_many(self, items: list[bytes | None]) -> list[Any]:
        """``deserialize`` of every item (a column at a time); the first failure raises the
        same ``SerdeError`` ``deserialize`` would."""
        try:
            return self._from_bytes_many(items)
        except Exception:
            deserialize = self.deserialize
            return [deserialize(data) for data in items]

    def _to_bytes_many(self, values: list[Any]) -> list[bytes | None]:
        """A fast path for a whole column; it may raise anything on bad input, after which
        ``serialize_many`` redoes the column value by value for the precise error."""
        serialize = self.serialize
        return [serialize(value) for value in values]

    def _from_bytes_many(self, items: list[bytes | None]) -> list[Any]:
        """The column counterpart of ``_from_bytes`` (see ``_to_bytes_many``)."""
        deserialize = self.deserialize
        return [deserialize(data) for data in items]

    def _to_bytes(self, value: T) -> bytes:
        raise NotImplementedError  # pragma: no cover - abstract

    def _from_bytes(self, data: bytes) -> T:
        raise NotImplementedError  # pragma: no cover - abstract

    def __repr__(self) -> str:
        return f"Serdes.{self.name}()"


def _texts(items: list[bytes | None]) -> list[str] | None:
    """The UTF-8 texts of a column of byte strings, decoded as one (a few calls, not one per
    item); None where ``_joined_text`` gives None. Invalid UTF-8 in any item raises."""
    text = _joined_text(items)
    return None if text is None else text.split("\x00")


def _joined_text(items: list[bytes | None]) -> str | None:
    """The UTF-8 text of a column of byte strings joined by NULs, decoded in one call; None
    when the column is empty, has a None, or an item holds a NUL byte itself (then the
    caller decodes item by item). Invalid UTF-8 in any item raises."""
    if not items or None in items:
        return None
    text = b"\x00".join(items).decode("utf-8")  # type: ignore[arg-type]
    return text if text.count("\x00") == len(items) - 1 else None


def _split_encoded(texts: list[str]) -> list[bytes] | None:
    """The UTF-8 bytes of each text, encoded as one joined text (a few calls, not one per
    text); None when a text holds a NUL itself (then the caller encodes text by text).
    Text that cannot be encoded raises."""
    joined = "\x00".join(texts)
    if joined.count("\x00") != len(texts) - 1:
        return None
    return joined.encode("utf-8").split(b"\x00")


def convert_each(
    many: Callable[[list[Any]], list[Any]],
    one: Callable[[Any], Any],
    items: list[Any],
    errors: dict[int, Exception],
    catch: type[Exception] = Exception,
) -> list[Any]:
    """``many(items)`` (a whole column at once), or item by item when that raises ``catch``:
    each item that fails is noted in ``errors`` by index (a row's first failure is kept) and
    stands as None in the result. Sinks serialize and sources deserialize columns this way."""
    try:
        return many(items)
    except catch:
        pass
    out: list[Any] = []
    for index, item in enumerate(items):
        try:
            out.append(one(item))
        except catch as exc:
            errors.setdefault(index, exc)
            out.append(None)
    return out


def exact_values(serde: Serde) -> frozenset[type]:
    """Classes of values that ``serde`` gives back exactly (same class, equal value) when it
    deserializes what it serialized, and that cannot change in place: a batch operator may
    keep such a value next to its bytes instead of deserializing them again."""
    kind = type(serde)
    if kind is StringSerde:
        return frozenset({str})
    if kind is JsonSerde:
        return frozenset({int, str})
    if kind is _FixedSerde and serde._kind is int:  # type: ignore[attr-defined]
        return frozenset({int})
    if kind is BytesSerde:
        return frozenset({bytes})
    return frozenset()


def null_shows_in_bytes(serde: Serde) -> bool:
    """Whether a value ``serde`` wrote is None exactly when it wrote no bytes: None becomes
    no bytes, no bytes read back as None, and nothing else it writes reads back as None (JSON
    writes ``null`` only for None). A reader that only tests its values for None may then
    test the bytes, without deserializing them (``runtime.source.SourceNode``)."""
    return type(serde) in _NULL_SHOWS_IN_BYTES


def resolve_serde(serde: Serde | None, default: Serde) -> Serde:
    """``serde``, or ``default`` when it is None; a serde that wraps an inner serde left
    unset (``inner_serde_unset``) gets ``default`` as its inner serde."""
    if serde is None:
        return default
    if getattr(serde, "inner_serde_unset", False):
        return serde.with_inner(default)  # type: ignore[attr-defined]
    return serde


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class BytesSerde(Serde[bytes]):
    name = "bytes"

    def _to_bytes(self, value: bytes) -> bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError("expected bytes")
        return bytes(value)

    def _from_bytes(self, data: bytes) -> bytes:
        return bytes(data)

    def _from_bytes_many(self, items: list[bytes | None]) -> list[Any]:
        if set(map(type, items)) <= {bytes, type(None)}:
            return list(items)
        return [None if data is None else bytes(data) for data in items]


class StringSerde(Serde[str]):
    name = "string"

    def serialize(self, value: str | None) -> bytes | None:
        if value.__class__ is str:  # the common case in one call; the rest as the base does
            try:
                return value.encode("utf-8")
            except UnicodeError:
                pass
        return Serde.serialize(self, value)

    def deserialize(self, data: bytes | None) -> str | None:
        if data.__class__ is bytes:
            try:
                return data.decode("utf-8")
            except UnicodeError:
                pass
        return Serde.deserialize(self, data)

    def _to_bytes(self, value: str) -> bytes:
        if not isinstance(value, str):
            raise TypeError("expected str")
        return value.encode("utf-8")

    def _from_bytes(self, data: bytes) -> str:
        return bytes(data).decode("utf-8")

    def _to_bytes_many(self, values: list[Any]) -> list[bytes | None]:
        kinds = set(map(type, values))
        if kinds - {str, type(None)}:
            raise TypeError("expected str")
        if values and type(None) not in kinds:
            encoded = _split_encoded(values)
            if encoded is not None:
                return encoded  # type: ignore[return-value]
        return [None if value is None else value.encode("utf-8") for value in values]

    def _from_bytes_many(self, items: list[bytes | None]) -> list[Any]:
        texts = _texts(items)
        if texts is not None:
            return texts
        return [None if data is None else data.decode("utf-8") for data in items]


class _FixedSerde(Serde[T]):
    """A number in a fixed-width big-endian layout (Kafka's numeric serdes)."""

    def __init__(self, name: str, layout: struct.Struct, kind: type) -> None:
        self.name = name
        self._layout = layout
        self._kind = kind
        self._pack = layout.pack
        self._unpack = layout.unpack

    def serialize(self, value: T | None) -> bytes | None:
        if value.__class__ is self._kind:  # the common case in one call (bool is no int here)
            try:
                return self._pack(value)
            except (struct.error, OverflowError):
                pass
        return Serde.serialize(self, value)

    def deserialize(self, data: bytes | None) -> T | None:
        if data.__class__ is bytes:
            try:
                return self._unpack(data)[0]
            except struct.error:
                pass
        return Serde.deserialize(self, data)

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # struct.Struct does not pickle; serdes travel to Spark executors.
        return (_FixedSerde._rebuild, (self.name, self._layout.format, self._kind))

    @staticmethod
    def _rebuild(name: str, layout: str, kind: type) -> _FixedSerde:
        return _FixedSerde(name, struct.Struct(layout), kind)

    def _to_bytes(self, value: T) -> bytes:
        if isinstance(value, bool) or not isinstance(value, (int, self._kind)):
            raise TypeError(f"expected {self._kind.__name__}")
        return self._layout.pack(self._kind(value))

    def _from_bytes(self, data: bytes) -> T:
        if len(data) != self._layout.size:
            raise ValueError(f"expected {self._layout.size} bytes, got {len(data)}")
        return self._layout.unpack(data)[0]

    def _to_bytes_many(self, values: list[Any]) -> list[bytes | None]:
        if set(map(type, values)) - {int, self._kind, type(None)}:
            raise TypeError(f"expected {self._kind.__name__}")
        pack, kind = self._layout.pack, self._kind
        if set(map(type, values)) == {kind}:  # the common case: one C loop
            return list(map(pack, values))
        return [None if value is None else pack(kind(value)) for value in values]

    def _from_bytes_many(self, items: list[bytes | None]) -> list[Any]:
        unpack = self._layout.unpack  # struct.error on any item of another length
        return [None if data is None else unpack(data)[0] for data in items]


def _integer(name: str, layout: struct.Struct) -> Serde[int]:
    return _FixedSerde(name, layout, int)


def _floating(name: str, layout: struct.Struct) -> Serde[float]:
    return _FixedSerde(name, layout, float)


class UUIDSerde(Serde[uuid.UUID]):
    """A UUID as its canonical 36-character text in UTF-8 (Kafka's UUIDSerde)."""

    name = "uuid"

    def _to_bytes(self, value: uuid.UUID) -> bytes:
        if not isinstance(value, uuid.UUID):
            raise TypeError("expected uuid.UUID")
        return str(value).encode("utf-8")

    def _from_bytes(self, data: bytes) -> uuid.UUID:
        text = bytes(data).decode("utf-8")
        if len(text) != 36:
            raise ValueError("expected the 36-character form of a UUID")
        return uuid.UUID(text)


class VoidSerde(Serde[None]):
    """Only ``None`` (no bytes) both ways; anything else is an error (Kafka's VoidSerde)."""

    name = "void"

    def _to_bytes(self, value: None) -> bytes:
        raise TypeError("the void serde writes only None")

    def _from_bytes(self, data: bytes) -> None:
        raise ValueError("the void serde reads only absent (None) data")


class JsonSerde(Serde[Any]):
    """UTF-8 JSON with sorted keys, so equal values have equal bytes."""

    name = "json"

    def serialize(self, value: Any) -> bytes | None:
        if _JSON_ONE_SHOT is not None and value is not None:
            try:
                return "".join(_JSON_ONE_SHOT(value, 0)).encode("utf-8")
            except Exception:
                pass  # the full path below gives the precise error
        return Serde.serialize(self, value)

    def _to_bytes(self, value: Any) -> bytes:
        return _JSON_ENCODER.encode(value).encode("utf-8")

    def _from_bytes(self, data: bytes) -> Any:
        return json.loads(bytes(data).decode("utf-8"))

    def _to_bytes_many(self, values: list[Any]) -> list[bytes | None]:
        if None not in values:
            encoded = encode_column(values, self._to_bytes)
            if encoded is not None:
                return encoded  # type: ignore[return-value]
        dumps = _JSON_ENCODER.encode
        if _JSON_ONE_SHOT is not None:
            one_shot, join = _JSON_ONE_SHOT, "".join
            if values and None not in values:
                # every value's text in one C loop, encoded as one text: JSON text of ASCII
                # output holds no NUL (it is escaped), so the split gives back each value
                encoded = _split_encoded(list(map(join, map(one_shot, values, repeat(0)))))
                if encoded is not None:
                    return encoded  # type: ignore[return-value]
            return [
                None if value is None else join(one_shot(value, 0)).encode("utf-8")
                for value in values
            ]
        return [None if value is None else dumps(value).encode("utf-8") for value in values]

    def _from_bytes_many(self, items: list[bytes | None]) -> list[Any]:
        decoded = decode_column(items)
        if decoded is not None:
            return decoded
        # The decoder's scanner parses one value; text it does not consume entirely (white
        # space around the value, or anything invalid) goes through the full decoder.
        # scan_once is set by JSONDecoder.__init__ and absent from the stubs
        scan = _JSON_DECODER.scan_once  # type: ignore[attr-defined]
        decode = _JSON_DECODER.decode
        text = _joined_text(items)
        if text is not None:
            # the common case in C loops: each text scanned whole as one value (a scan that
            # fails ends the map early, a value with space around it ends short of its text)
            texts = text.split("\x00")
            scanned = list(map(scan, texts, repeat(0)))
            if len(scanned) == len(texts) and [end for _, end in scanned] == list(map(len, texts)):
                return [value for value, _ in scanned]
            # one scan per value through the joined text (decoded once); no value can run
            # into the next one: the NUL between them is invalid JSON wherever it appears
            size = len(text)
            values: list[Any] = []
            append = values.append
            start = 0
            for _ in range(len(items)):
                try:
                    value, stop = scan(text, start)
                except StopIteration:
                    stop = -1
                if stop == size or (stop >= 0 and text[stop] == "\x00"):
                    append(value)
                    start = stop + 1
                    continue
                end = text.find("\x00", start)
                end = size if end < 0 else end
                append(decode(text[start:end]))
                start = end + 1
            return values
        out: list[Any] = []
        for data in items:
            if data is None:
                out.append(None)
                continue
            text = data.decode("utf-8")
            try:
                value, end = scan(text, 0)
            except StopIteration:
                end = -1
            out.append(value if end == len(text) else decode(text))
        return out


class TimeWindowedSerde(Serde[Windowed]):
    """A time-windowed key in Kafka's layout: the inner key's bytes, then the window start as
    an 8-byte long. The end is not stored: it is start + ``window_size_ms`` (capped at the
    largest long, as in Kafka)."""

    name = "time_windowed"

    def __init__(self, inner: Serde, window_size_ms: int) -> None:
        self.inner = inner
        self.window_size_ms = window_size_ms

    def _to_bytes(self, value: Windowed) -> bytes:
        if not isinstance(value, Windowed):
            raise TypeError("expected Windowed")
        return (self.inner.serialize(value.key) or b"") + _LONG.pack(value.window.start)

    def _from_bytes(self, data: bytes) -> Windowed:
        if len(data) < 8:
            raise ValueError(f"a time-windowed key needs at least 8 bytes, got {len(data)}")
        data = bytes(data)
        start = _LONG.unpack_from(data, len(data) - 8)[0]
        end = min(start + self.window_size_ms, _MAX_LONG)
        return Windowed(self.inner.deserialize(data[:-8]), Window(start, end))

    def __repr__(self) -> str:
        return f"Serdes.time_windowed({self.inner!r}, {self.window_size_ms})"


class _BoundsLayoutSerde(Serde[Windowed]):
    """A windowed key as the inner key's bytes followed by both window bounds as 8-byte
    longs, in the order ``end_first`` says."""

    end_first = False
    label = "windowed"

    def __init__(self, inner: Serde) -> None:
        self.inner = inner

    def _to_bytes(self, value: Windowed) -> bytes:
        if not isinstance(value, Windowed):
            raise TypeError("expected Windowed")
        key = self.inner.serialize(value.key) or b""
        first, second = (
            (value.window.end, value.window.start)
            if self.end_first
            else (value.window.start, value.window.end)
        )
        return key + _LONG.pack(first) + _LONG.pack(second)

    def _from_bytes(self, data: bytes) -> Windowed:
        if len(data) < 16:
            raise ValueError(f"a {self.label} key needs at least 16 bytes, got {len(data)}")
        data = bytes(data)
        first = _LONG.unpack_from(data, len(data) - 16)[0]
        second = _LONG.unpack_from(data, len(data) - 8)[0]
        start, end = (second, first) if self.end_first else (first, second)
        return Windowed(self.inner.deserialize(data[:-16]), Window(start, end))

    def __repr__(self) -> str:
        return f"Serdes.{self.name}({self.inner!r})"


class SessionWindowedSerde(_BoundsLayoutSerde):
    """A session-windowed key in Kafka's layout: the inner key's bytes, then the session end
    and start as 8-byte longs (end first)."""

    name = "session_windowed"
    label = "session-windowed"
    end_first = True


class WindowedSerde(_BoundsLayoutSerde):
    """The legacy windowed layout of Streamtide 0.1: the inner key's bytes, then window start
    and end as 8-byte longs. No Kafka tool reads it; kept to read and write data stored with
    it (``Serdes.windowed``, deprecated)."""

    name = "windowed"


#: Serdes of ``null_shows_in_bytes`` (exact classes: a subclass may read None from bytes).
_NULL_SHOWS_IN_BYTES = frozenset({BytesSerde, StringSerde, _FixedSerde, UUIDSerde, JsonSerde})


def windowed_base_serde(serde: Serde) -> Serde | None:
    """The serde of the base key inside a windowed key serde (None for any other serde):
    sinks partition windowed keys by the base key, as Kafka's WindowedStreamPartitioner."""
    if isinstance(serde, (TimeWindowedSerde, _BoundsLayoutSerde)):
        return serde.inner
    return None


class FunctionSerde(Serde[T]):
    """A serde built from two functions, for user types."""

    def __init__(
        self, to_bytes: Callable[[T], bytes], from_bytes: Callable[[bytes], T], name: str
    ) -> None:
        self._encode = to_bytes
        self._decode = from_bytes
        self.name = name

    def _to_bytes(self, value: T) -> bytes:
        return self._encode(value)

    def _from_bytes(self, data: bytes) -> T:
        return self._decode(data)


class Serdes:
    """Factory of the built-in serdes. Names and byte layouts are Kafka's (``Serdes.Integer()``
    is ``Serdes.integer()`` here, and so on), so Kafka clients and Kafka Streams applications
    read what Streamtide writes and the other way round. Numbers are big-endian."""

    @staticmethod
    def bytes() -> Serde[bytes]:
        """Bytes unchanged (Kafka's ByteArraySerde)."""
        return BytesSerde()

    @staticmethod
    def string() -> Serde[str]:
        """UTF-8 text (Kafka's StringSerde)."""
        return StringSerde()

    @staticmethod
    def short() -> Serde[int]:
        """2-byte signed integers (Kafka's ShortSerde)."""
        return _integer("short", _SHORT)

    @staticmethod
    def integer() -> Serde[int]:
        """4-byte signed integers (Kafka's IntegerSerde)."""
        return _integer("integer", _INT)

    @staticmethod
    def long() -> Serde[int]:
        """8-byte signed integers (Kafka's LongSerde)."""
        return _integer("long", _LONG)

    @staticmethod
    def float32() -> Serde[float]:
        """4-byte IEEE 754 floats (Kafka's FloatSerde). Python floats are doubles, so
        values are rounded to single precision; signalling NaNs come back quiet."""
        return _floating("float32", _FLOAT)

    @staticmethod
    def double() -> Serde[float]:
        """8-byte IEEE 754 doubles (Kafka's DoubleSerde)."""
        return _floating("double", _DOUBLE)

    @staticmethod
    def uuid() -> Serde[uuid.UUID]:
        """``uuid.UUID`` as its 36-character text (Kafka's UUIDSerde)."""
        return UUIDSerde()

    @staticmethod
    def void() -> Serde[None]:
        """Only None (Kafka's VoidSerde), e.g. for keys of keyless topics."""
        return VoidSerde()

    @staticmethod
    def json() -> Serde[Any]:
        """UTF-8 JSON with sorted keys."""
        return JsonSerde()

    @staticmethod
    def time_windowed(inner: Serde, window_size: Duration) -> Serde[Windowed]:
        """Keys of time windows: inner key + start (Kafka's TimeWindowedSerde); the window
        size gives the end back on reading."""
        size = to_millis(window_size, "window_size")
        if size <= 0:
            raise ConfigError(f"window_size must be positive, got {size} ms")
        return TimeWindowedSerde(inner, size)

    @staticmethod
    def session_windowed(inner: Serde) -> Serde[Windowed]:
        """Keys of session windows: inner key + end + start (Kafka's SessionWindowedSerde)."""
        return SessionWindowedSerde(inner)

    @staticmethod
    def int() -> Serde[int]:
        """Deprecated: 8-byte integers, the same bytes as ``long()`` (Kafka's
        ``Integer`` is ``integer()``, 4 bytes)."""
        _deprecated("int", "use Serdes.long() for the same 8 bytes, or Serdes.integer() for 4")
        return _integer("int", _LONG)

    @staticmethod
    def float() -> Serde[float]:
        """Deprecated: 8-byte doubles, the same bytes as ``double()``. A later release gives
        ``float()`` Kafka's 4-byte layout (today ``float32()``)."""
        _deprecated(
            "float",
            "use Serdes.double() for the same 8 bytes, or Serdes.float32() for Kafka's 4-byte "
            "Float; a later release gives float() the 4-byte layout",
        )
        return _floating("float", _DOUBLE)

    @staticmethod
    def windowed(inner: Serde) -> Serde[Windowed]:
        """Deprecated: the legacy key + start + end layout, which no Kafka tool reads; kept
        for data stored with it."""
        _deprecated(
            "windowed",
            "use Serdes.time_windowed(inner, size) or Serdes.session_windowed(inner) for "
            "Kafka's layouts; windowed() stays for data already written with it",
        )
        return WindowedSerde(inner)

    @staticmethod
    def from_functions(
        to_bytes: Callable[[Any], builtins.bytes],
        from_bytes: Callable[[builtins.bytes], Any],
        name: str = "custom",
    ) -> Serde[Any]:
        """A serde from two functions, for user types."""
        return FunctionSerde(to_bytes, from_bytes, name)


def _deprecated(name: str, advice: str) -> None:
    warnings.warn(f"Serdes.{name}() is deprecated: {advice}", DeprecationWarning, stacklevel=3)
