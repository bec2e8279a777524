"""Serializers and deserializers between Python values and bytes.

``None`` always maps to ``None`` both ways (a tombstone / absent key), as in Kafka.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from streamtide.errors import SerdeError
from streamtide.window import Window, Windowed

T = TypeVar("T")

_LONG = struct.Struct(">q")
_JSON_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
_JSON_DECODER = json.JSONDecoder()
_DOUBLE = struct.Struct(">d")


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

    def _to_bytes(self, value: str) -> bytes:
        if not isinstance(value, str):
            raise TypeError("expected str")
        return value.encode("utf-8")

    def _from_bytes(self, data: bytes) -> str:
        return bytes(data).decode("utf-8")

    def _to_bytes_many(self, values: list[Any]) -> list[bytes | None]:
        if set(map(type, values)) - {str, type(None)}:
            raise TypeError("expected str")
        return [None if value is None else value.encode("utf-8") for value in values]

    def _from_bytes_many(self, items: list[bytes | None]) -> list[Any]:
        return [None if data is None else data.decode("utf-8") for data in items]


class IntSerde(Serde[int]):
    """8-byte big-endian signed integers, compatible with Kafka's LongSerde."""

    name = "int"

    def _to_bytes(self, value: int) -> bytes:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("expected int")
        return _LONG.pack(value)

    def _from_bytes(self, data: bytes) -> int:
        if len(data) != 8:
            raise ValueError(f"expected 8 bytes, got {len(data)}")
        return _LONG.unpack(data)[0]

    def _to_bytes_many(self, values: list[Any]) -> list[bytes | None]:
        if set(map(type, values)) - {int, type(None)}:
            raise TypeError("expected int")
        pack = _LONG.pack
        return [None if value is None else pack(value) for value in values]

    def _from_bytes_many(self, items: list[bytes | None]) -> list[Any]:
        unpack = _LONG.unpack  # struct.error on any item that is not 8 bytes
        return [None if data is None else unpack(data)[0] for data in items]


class FloatSerde(Serde[float]):
    """IEEE 754 doubles, big-endian (Kafka's DoubleSerde)."""

    name = "float"

    def _to_bytes(self, value: float) -> bytes:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError("expected float")
        return _DOUBLE.pack(float(value))

    def _from_bytes(self, data: bytes) -> float:
        if len(data) != 8:
            raise ValueError(f"expected 8 bytes, got {len(data)}")
        return _DOUBLE.unpack(data)[0]


class JsonSerde(Serde[Any]):
    """UTF-8 JSON with sorted keys, so equal values have equal bytes."""

    name = "json"

    def _to_bytes(self, value: Any) -> bytes:
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")

    def _from_bytes(self, data: bytes) -> Any:
        return json.loads(bytes(data).decode("utf-8"))

    def _to_bytes_many(self, values: list[Any]) -> list[bytes | None]:
        dumps = _JSON_ENCODER.encode
        return [None if value is None else dumps(value).encode("utf-8") for value in values]

    def _from_bytes_many(self, items: list[bytes | None]) -> list[Any]:
        loads = _JSON_DECODER.decode
        return [None if data is None else loads(data.decode("utf-8")) for data in items]


class WindowedSerde(Serde[Windowed]):
    """A windowed key: the inner key's bytes, then window start and end as 8-byte longs."""

    name = "windowed"

    def __init__(self, inner: Serde) -> None:
        self.inner = inner

    def _to_bytes(self, value: Windowed) -> bytes:
        if not isinstance(value, Windowed):
            raise TypeError("expected Windowed")
        key = self.inner.serialize(value.key) or b""
        return key + _LONG.pack(value.window.start) + _LONG.pack(value.window.end)

    def _from_bytes(self, data: bytes) -> Windowed:
        if len(data) < 16:
            raise ValueError(f"a windowed key needs at least 16 bytes, got {len(data)}")
        data = bytes(data)
        start = _LONG.unpack_from(data, len(data) - 16)[0]
        end = _LONG.unpack_from(data, len(data) - 8)[0]
        return Windowed(self.inner.deserialize(data[:-16]), Window(start, end))

    def __repr__(self) -> str:
        return f"Serdes.windowed({self.inner!r})"


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
    """Factory of the built-in serdes."""

    @staticmethod
    def bytes() -> Serde[bytes]:
        return BytesSerde()

    @staticmethod
    def string() -> Serde[str]:
        return StringSerde()

    @staticmethod
    def int() -> Serde[int]:
        return IntSerde()

    @staticmethod
    def float() -> Serde[float]:
        return FloatSerde()

    @staticmethod
    def json() -> Serde[Any]:
        return JsonSerde()

    @staticmethod
    def windowed(inner: Serde) -> Serde[Windowed]:
        return WindowedSerde(inner)

    @staticmethod
    def from_functions(
        to_bytes: Callable[[Any], bytes], from_bytes: Callable[[bytes], Any], name: str = "custom"
    ) -> Serde[Any]:
        return FunctionSerde(to_bytes, from_bytes, name)
