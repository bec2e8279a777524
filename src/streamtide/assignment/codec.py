"""Framing of the versioned metadata records: header, fields, checksum.

Every record is ``version:int32 latest_supported:int32 body crc32:uint32`` (big-endian), where
the checksum covers header and body. The checksum is what turns a flipped bit into an error
instead of a plausible but wrong record.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping

from streamtide.errors import StreamtideError, UnsupportedVersionError
from streamtide.task_id import TaskId

_HEADER = struct.Struct(">ii")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_CRC = struct.Struct(">I")
_TASK = struct.Struct(">ii")
_TASK_OFFSET = struct.Struct(">iiq")
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class CorruptMetadataError(StreamtideError, ValueError):
    """Encoded subscription or assignment bytes are truncated, damaged or malformed."""


class Writer:
    """Builds one record body field by field."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def int32(self, value: int) -> None:
        self._parts.append(_INT32.pack(value))

    def string(self, value: str) -> None:
        raw = value.encode("utf-8")
        self.int32(len(raw))
        self._parts.append(raw)

    def tasks(self, tasks: Iterable[TaskId]) -> None:
        ordered = sorted(tasks)
        self.int32(len(ordered))
        self._parts.extend(_TASK.pack(t.subtopology, t.partition) for t in ordered)

    def task_offsets(self, offsets: Mapping[TaskId, int]) -> None:
        self.int32(len(offsets))
        self._parts.extend(
            _TASK_OFFSET.pack(t.subtopology, t.partition, offsets[t]) for t in sorted(offsets)
        )

    def finish(self, version: int, latest: int) -> bytes:
        framed = _HEADER.pack(version, latest) + b"".join(self._parts)
        return framed + _CRC.pack(zlib.crc32(framed))


class Reader:
    """Reads one record body; every read is bounds-checked against the body's end."""

    def __init__(self, what: str, body: memoryview) -> None:
        self._what = what
        self._body = body
        self._pos = 0

    def invalid(self, problem: str) -> CorruptMetadataError:
        return CorruptMetadataError(f"corrupt {self._what}: {problem} at body byte {self._pos}")

    def _take(self, size: int) -> memoryview:
        if size > len(self._body) - self._pos:
            raise self.invalid(f"needs {size} more bytes, {len(self._body) - self._pos} left")
        chunk = self._body[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def int32(self) -> int:
        (value,) = _INT32.unpack(self._take(4))
        return int(value)

    def count(self, item_size: int) -> int:
        n = self.int32()
        if n < 0 or n * item_size > len(self._body) - self._pos:
            raise self.invalid(f"impossible count {n}")
        return n

    def string(self) -> str:
        raw = self._take(self.count(1))
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.invalid("invalid UTF-8 text") from exc

    def _task(self, sub: int, part: int, previous: TaskId | None) -> TaskId:
        if sub < 0 or part < 0:
            raise self.invalid(f"negative task id {sub}_{part}")
        task = TaskId(sub, part)
        if previous is not None and task <= previous:
            raise self.invalid("task ids out of order or repeated")
        return task

    def tasks(self) -> frozenset[TaskId]:
        result: list[TaskId] = []
        for _ in range(self.count(_TASK.size)):
            sub, part = _TASK.unpack(self._take(_TASK.size))
            result.append(self._task(sub, part, result[-1] if result else None))
        return frozenset(result)

    def task_offsets(self) -> dict[TaskId, int]:
        result: dict[TaskId, int] = {}
        last: TaskId | None = None
        for _ in range(self.count(_TASK_OFFSET.size)):
            sub, part, offset = _TASK_OFFSET.unpack(self._take(_TASK_OFFSET.size))
            last = self._task(sub, part, last)
            if offset < 0:
                raise self.invalid(f"negative offset sum {offset} for task {last}")
            result[last] = offset
        return result

    def end(self) -> None:
        if self._pos != len(self._body):
            raise self.invalid(f"{len(self._body) - self._pos} unexpected trailing bytes")


def peek_versions(data: bytes) -> tuple[int, int]:
    """(version used, latest version supported) of an encoded record, without decoding it."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"metadata must be bytes, got {type(data).__name__}")
    if len(data) < _HEADER.size:
        raise CorruptMetadataError(
            f"corrupt metadata: {len(data)} bytes, shorter than the {_HEADER.size}-byte header"
        )
    return _HEADER.unpack_from(data)


def open_record(what: str, data: bytes, latest_known: int) -> tuple[int, Reader]:
    """Check header and checksum of ``data``; return its version and a reader of its body.

    A version newer than ``latest_known`` raises ``UnsupportedVersionError`` before anything
    else is read, because a newer writer may frame its body differently.
    """
    version, latest = peek_versions(data)
    if version > latest_known:
        raise UnsupportedVersionError(
            f"{what} uses version {version} (its writer supports up to {latest}); "
            f"this release reads versions 1 to {latest_known}"
        )
    if version < 1 or latest < version:
        raise CorruptMetadataError(
            f"corrupt {what}: impossible versions (used {version}, latest supported {latest})"
        )
    if len(data) < _HEADER.size + _CRC.size:
        raise CorruptMetadataError(f"corrupt {what}: truncated, no checksum ({len(data)} bytes)")
    view = memoryview(data)
    (stored,) = _CRC.unpack_from(view, len(view) - _CRC.size)
    if zlib.crc32(view[: len(view) - _CRC.size]) != stored:
        raise CorruptMetadataError(f"corrupt {what}: checksum mismatch (damaged or truncated)")
    return version, Reader(what, view[_HEADER.size : len(view) - _CRC.size])


def check_version(what: str, version: int, latest_known: int) -> None:
    """Reject encoding with a version this release cannot write."""
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"version must be an int, got {version!r}")
    if not 1 <= version <= latest_known:
        raise UnsupportedVersionError(
            f"cannot write {what} version {version}: this release writes versions 1 to "
            f"{latest_known}"
        )


def check_int(what: str, value: object, low: int, high: int) -> int:
    """Reject a field value that is not an int in [low, high] (so it fits its encoding)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{what} must be an int in [{low}, {high}], got {value!r}")
    return value
