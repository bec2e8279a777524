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

The index is derived from the base family: it is written locally but kept out of the changelog
(``INDEX_KEYS``), and applying the changelog (restore, standbys) writes it again, so a stored
entry costs two changelog records over its life (its put and its tombstone), not four.

The origin is where the stored record came from (topic, partition, offset), or "none" for a
record a punctuator produced; it is what lets a task recognise its own record when it
reprocesses it after a crash (docs/deduplication.md).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from streamtide.errors import StoreError
from streamtide.processor.api import StateStoreContext
from streamtide.record import RecordMetadata
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.changelogging import ChangeLoggingKeyValueBytesStore, DerivedKeys
from streamtide.state.encoding import MAX_LONG, MIN_LONG, decode_key, encode_key, encode_long
from streamtide.state.encoding import decode_long as decode_ts
from streamtide.state.layout import BytesLayoutStore
from streamtide.state.stores import KeyValueBytesStoreSupplier, SupplierStoreBuilder

_BASE = b"\x01"
_INDEX = b"\x02"
_MARKER = b"\x00"
_NO_ORIGIN = b"\x00"
_HAS_ORIGIN = b"\x01"
_ORIGIN = struct.Struct(">qi")  # offset, partition; the topic follows as UTF-8
_TS = struct.Struct(">Q")
_BIAS = 1 << 63  # encode_long's shift (encode_ts inlined in write_entries)


def encode_ts(ts: int) -> bytes:
    """8 bytes whose unsigned byte order is the order of the (signed) timestamps (clamped to
    the range of a long)."""
    return encode_long(min(max(ts, MIN_LONG), MAX_LONG))


def _id_prefix(dedup_id: bytes) -> bytes:
    return _BASE + encode_key(dedup_id)


def _index_of(key: bytes, value: bytes | None) -> tuple[bytes, bytes | None] | None:
    """The index key's put (or tombstone) that a base key's put (or tombstone) implies."""
    if key[:1] != _BASE or len(key) < 13:
        return None
    dedup_id, offset = decode_key(key, 1)
    return _INDEX + key[offset : offset + 8] + dedup_id, None if value is None else _MARKER


#: The time index, derived from the base family (``state.changelogging.DerivedKeys``).
INDEX_KEYS = DerivedKeys(_INDEX, _index_of)


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


class DedupStore(BytesLayoutStore):
    """Finds an id's records in a time range and purges old records, both by range scans."""

    kind = "dedup"

    #: Index keys below this are known deleted in this open session, so a purge starts here
    #: instead of re-walking the tombstones of every earlier purge (reset on every open).
    _purged_below: bytes = _INDEX

    def __init__(self, inner: KeyValueBytesStore) -> None:
        super().__init__(inner)
        if isinstance(inner, ChangeLoggingKeyValueBytesStore):
            inner.derived = INDEX_KEYS

    def init(self, context: StateStoreContext) -> None:
        self._purged_below = _INDEX
        super().init(context)

    def open_standalone(self) -> DedupStore:
        """Open without a task (tools, tests), if the inner store supports it."""
        self._purged_below = _INDEX
        self._open_inner_standalone()
        return self

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
        index_key = _INDEX + ts + dedup_id
        self.inner.put(index_key, _MARKER)
        if index_key < self._purged_below:
            self._purged_below = _INDEX + ts

    def write_entries(
        self, entries: list[tuple[bytes, int, tuple[str, int, int | None] | None, bool]]
    ) -> None:
        """For each ``(dedup id, timestamp, origin, keep)`` in order: ``put`` the entry when
        ``keep``, else ``discard`` it; the same writes, with one call to the inner store.
        An origin here is a ``(topic, partition, offset)`` tuple (None: no origin)."""
        writes: list[tuple[bytes, bytes | None]] = []
        prefixes: dict[bytes, bytes] = {}
        topics: dict[str, bytes] = {}
        purged_below = self._purged_below
        pack = _TS.pack
        pack_origin = _ORIGIN.pack
        for dedup_id, timestamp, origin, keep in entries:
            ts = pack(
                (
                    MIN_LONG
                    if timestamp < MIN_LONG
                    else MAX_LONG
                    if timestamp > MAX_LONG
                    else timestamp
                )
                + _BIAS
            )
            prefix = prefixes.get(dedup_id)
            if prefix is None:
                prefix = prefixes[dedup_id] = _id_prefix(self._check_id(dedup_id))
            index_key = _INDEX + ts + dedup_id
            if keep:
                if origin is None or origin[2] is None:
                    stored = _NO_ORIGIN
                else:
                    topic = topics.get(origin[0])
                    if topic is None:
                        topic = topics[origin[0]] = origin[0].encode()
                    stored = _HAS_ORIGIN + pack_origin(origin[2], origin[1]) + topic
                writes.append((prefix + ts, stored))
                writes.append((index_key, _MARKER))
                if index_key < purged_below:
                    purged_below = _INDEX + ts
            else:
                writes.append((prefix + ts, None))
                writes.append((index_key, None))
        if writes:
            self.inner.put_all(writes)
        self._purged_below = purged_below

    def find(self, dedup_id: bytes, time_from: int, time_to: int) -> list[DedupEntry]:
        """Entries of ``dedup_id`` with ``time_from <= timestamp <= time_to``, oldest first."""
        dedup_id = self._check_id(dedup_id)
        if time_from > time_to:
            return []
        prefix = _id_prefix(dedup_id)
        start = len(prefix)
        return [
            DedupEntry(dedup_id, decode_ts(key, start), decode_origin(value))
            for key, value in self.inner.range(
                prefix + encode_ts(time_from), prefix + encode_ts(time_to)
            )
        ]

    def fetch(self, dedup_id: bytes) -> list[DedupEntry]:
        """Every entry of ``dedup_id``, oldest first."""
        return self.find(dedup_id, MIN_LONG, MAX_LONG)

    def remove(self, dedup_id: bytes, timestamp: int) -> bool:
        """Delete one entry; True if it existed."""
        dedup_id = self._check_id(dedup_id)
        ts = encode_ts(timestamp)
        existed = self.inner.delete(_id_prefix(dedup_id) + ts) is not None
        self.inner.delete(_INDEX + ts + dedup_id)
        return existed

    def discard(self, dedup_id: bytes, timestamp: int) -> None:
        """Write tombstones for both keys of one entry, as a purge of it does (without reading
        whether it exists)."""
        ts = encode_ts(timestamp)
        self.inner.put(_id_prefix(dedup_id) + ts, None)
        self.inner.put(_INDEX + ts + dedup_id, None)

    def purge_expired(self, before: int) -> int:
        """Delete every entry with ``timestamp < before``; return how many were deleted.

        A range scan of the time index from where the previous purge stopped: only expired
        entries are visited.
        """
        upper = _INDEX + encode_ts(before)
        tombstones: list[tuple[bytes, bytes | None]] = []
        prefixes: dict[bytes, bytes] = {}
        for key, _ in self.inner.range(self._purged_below, upper):
            if key[:9] >= upper:  # ``upper`` itself (an empty id at ``before``) is not expired
                break
            dedup_id = key[9:]
            prefix = prefixes.get(dedup_id)
            if prefix is None:
                prefix = prefixes[dedup_id] = _id_prefix(dedup_id)
            tombstones.append((prefix + key[1:9], None))
            tombstones.append((key, None))  # the index key: _INDEX + ts + id
        if tombstones:
            self.inner.put_all(tombstones)
        if upper > self._purged_below:
            self._purged_below = upper
        return len(tombstones) // 2

    def entries(self) -> Iterator[DedupEntry]:
        """Every entry, by id (length, then bytes) and time."""
        for key, value in self.inner.prefix_scan(_BASE):
            dedup_id, offset = decode_key(key, 1)
            yield DedupEntry(dedup_id, decode_ts(key, offset), decode_origin(value))

    def approximate_num_entries(self) -> int:
        """Number of (id, timestamp) entries (each is stored as two bytes-store keys)."""
        return self.inner.approximate_num_entries() // 2


@dataclass
class DedupStoreBuilder(SupplierStoreBuilder):
    """Builds a ``DedupStore`` per task over a bytes store of the supplier's kind; the
    supplier adds changelogging unless logging is disabled."""

    supplier: KeyValueBytesStoreSupplier
    logging_enabled: bool = True

    def build(self) -> DedupStore:
        return DedupStore(self._inner())
