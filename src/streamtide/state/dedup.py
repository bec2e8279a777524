"""The deduplication store: (dedup id, timestamp) -> origin of the record, over a bytes store.

It is a layout, not a container: every entry lives in an ordered ``KeyValueBytesStore`` (any
kind a ``KeyValueBytesStoreSupplier`` makes), so changelogging, restore and transactions of
that store cover the dedup state as well. Two key families share the bytes store:

- base:  ``0x01 | len(id) (4 bytes) | id | ts``  ->  origin of the record
- index: ``0x02 | ts | id``                      ->  ``0x00`` (a marker)

``ts`` is the timestamp as 8 big-endian bytes shifted by 2**63, so byte order is time order
even for negative times. The length prefix keeps ids apart that are prefixes of each other,
which makes "the entries of one id between two times" a single range scan of the base family,
and "every entry older than T" a single range scan from the start of the index family.

The origin is where the stored record came from (topic, partition, offset), or "none" for a
record a punctuator produced; it is what lets a task recognise its own record when it
reprocesses it after a crash (SEMANTICS.md section 3).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from streamtide.errors import StoreError
from streamtide.processor.api import StateStore, StateStoreContext
from streamtide.record import RecordMetadata
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.stores import KeyValueBytesStoreSupplier

_BASE = b"\x01"
_INDEX = b"\x02"
_MARKER = b"\x00"
_NO_ORIGIN = b"\x00"
_HAS_ORIGIN = b"\x01"
_TS_SHIFT = 1 << 63
_TS_MIN = -_TS_SHIFT
_TS_MAX = _TS_SHIFT - 1
_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_ORIGIN = struct.Struct(">qi")  # offset, partition; the topic follows as UTF-8


def encode_ts(ts: int) -> bytes:
    """8 bytes whose unsigned byte order is the order of the (signed) timestamps."""
    return _U64.pack(min(max(ts, _TS_MIN), _TS_MAX) + _TS_SHIFT)


def decode_ts(data: bytes) -> int:
    return _U64.unpack(data)[0] - _TS_SHIFT


def _id_prefix(dedup_id: bytes) -> bytes:
    return _BASE + _U32.pack(len(dedup_id)) + dedup_id


def encode_origin(origin: RecordMetadata | None) -> bytes:
    """The stored value: a flag, then offset, partition and topic when the record has them."""
    if origin is None or origin.offset is None:
        return _NO_ORIGIN
    return _HAS_ORIGIN + _ORIGIN.pack(origin.offset, origin.partition) + origin.topic.encode()


def decode_origin(data: bytes) -> RecordMetadata | None:
    if data[:1] != _HAS_ORIGIN:
        return None
    offset, partition = _ORIGIN.unpack_from(data, 1)
    return RecordMetadata(data[1 + _ORIGIN.size :].decode(), partition, offset)


@dataclass(frozen=True)
class DedupEntry:
    """One stored record: its dedup id, timestamp and origin (None: from a punctuator)."""

    dedup_id: bytes
    timestamp: int
    origin: RecordMetadata | None

    @property
    def offset(self) -> int | None:
        return None if self.origin is None else self.origin.offset

    def is_same_record(self, origin: RecordMetadata | None) -> bool:
        """True when ``origin`` names the very record stored here (same topic, partition,
        offset). Records without an offset never match: they cannot be told apart."""
        return self.origin is not None and origin is not None and self.origin == origin


class DedupStore(StateStore):
    """Finds an id's records in a time range and purges old records, both by range scans."""

    kind = "dedup"

    def __init__(self, inner: KeyValueBytesStore) -> None:
        self.name = inner.name
        self.inner = inner
        self.persistent = inner.persistent

    # ---- lifecycle -------------------------------------------------------------------------

    def init(self, context: StateStoreContext) -> None:
        self.inner.init(context)

    def open_standalone(self) -> DedupStore:
        """Open without a task (tools, tests), if the inner store supports it."""
        opener = getattr(self.inner, "open_standalone", None)
        if opener is None:
            raise StoreError(f"store {self.name!r} cannot be opened without a task")
        opener()
        return self

    @property
    def is_open(self) -> bool:
        return self.inner.is_open

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()

    # ---- typed API -------------------------------------------------------------------------

    @staticmethod
    def _check_id(dedup_id: bytes) -> bytes:
        if not isinstance(dedup_id, (bytes, bytearray)):
            raise StoreError(f"a dedup id must be bytes, got {type(dedup_id).__name__}")
        return bytes(dedup_id)

    def put(
        self, dedup_id: bytes, timestamp: int, origin: RecordMetadata | int | None = None
    ) -> None:
        """Remember that the record ``origin`` with ``dedup_id`` at ``timestamp`` was forwarded.

        ``origin`` is the record's topic/partition/offset; a bare int is an offset without a
        topic (partition -1, topic ""), None a record that has no offset.
        """
        dedup_id = self._check_id(dedup_id)
        if isinstance(origin, int) and not isinstance(origin, bool):
            origin = RecordMetadata("", -1, origin)
        elif origin is not None and not isinstance(origin, RecordMetadata):
            raise StoreError(f"origin must be RecordMetadata, int or None, got {origin!r}")
        ts = encode_ts(timestamp)
        self.inner.put(_id_prefix(dedup_id) + ts, encode_origin(origin))
        self.inner.put(_INDEX + ts + dedup_id, _MARKER)

    def find(self, dedup_id: bytes, time_from: int, time_to: int) -> list[DedupEntry]:
        """Entries of ``dedup_id`` with ``time_from <= timestamp <= time_to``, oldest first."""
        dedup_id = self._check_id(dedup_id)
        if time_from > time_to:
            return []
        prefix = _id_prefix(dedup_id)
        start = len(prefix)
        return [
            DedupEntry(dedup_id, decode_ts(key[start:]), decode_origin(value))
            for key, value in self.inner.range(
                prefix + encode_ts(time_from), prefix + encode_ts(time_to)
            )
        ]

    def fetch(self, dedup_id: bytes) -> list[DedupEntry]:
        """Every entry of ``dedup_id``, oldest first."""
        return self.find(dedup_id, _TS_MIN, _TS_MAX)

    def remove(self, dedup_id: bytes, timestamp: int) -> bool:
        """Delete one entry; True if it existed."""
        dedup_id = self._check_id(dedup_id)
        ts = encode_ts(timestamp)
        existed = self.inner.delete(_id_prefix(dedup_id) + ts) is not None
        self.inner.delete(_INDEX + ts + dedup_id)
        return existed

    def purge_expired(self, before: int) -> int:
        """Delete every entry with ``timestamp < before``; return how many were deleted.

        A range scan of the time index from its start: only expired entries are visited.
        """
        upper = _INDEX + encode_ts(before)
        expired = []
        for key, _ in self.inner.range(_INDEX, upper):
            if key[:9] >= upper:  # ``upper`` itself (an empty id at ``before``) is not expired
                break
            expired.append((key[1:9], key[9:]))
        for ts, dedup_id in expired:
            self.inner.put(_id_prefix(dedup_id) + ts, None)
            self.inner.put(_INDEX + ts + dedup_id, None)
        return len(expired)

    def entries(self) -> Iterator[DedupEntry]:
        """Every entry, by id (length, then bytes) and time."""
        for key, value in self.inner.prefix_scan(_BASE):
            (length,) = _U32.unpack_from(key, 1)
            dedup_id = key[5 : 5 + length]
            yield DedupEntry(dedup_id, decode_ts(key[5 + length :]), decode_origin(value))

    def approximate_num_entries(self) -> int:
        """Number of (id, timestamp) entries (each is stored as two bytes-store keys)."""
        return self.inner.approximate_num_entries() // 2


@dataclass
class DedupStoreBuilder:
    """Builds a ``DedupStore`` per task over a bytes store of the supplier's kind; the
    supplier adds changelogging unless logging is disabled."""

    supplier: KeyValueBytesStoreSupplier
    logging_enabled: bool = True

    @property
    def name(self) -> str:
        return self.supplier.name

    def with_logging_disabled(self) -> DedupStoreBuilder:
        self.logging_enabled = False
        return self

    def build(self) -> DedupStore:
        return DedupStore(self.supplier.with_logging(self.logging_enabled).get())
