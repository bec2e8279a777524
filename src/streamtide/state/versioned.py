"""The versioned key-value store (Kafka Streams' KIP-889, with KIP-960/968 queries).

A versioned store keeps several versions per key, each valid from its timestamp until the next
version's (or for good, for the latest). ``get(key)`` reads the latest version,
``get(key, as_of)`` the version valid at a time, ``get_versions`` every version in a range.
Like Kafka's ``RocksDBVersionedStore``:

- the store's *observed stream time* is the largest timestamp ever put to it;
- *history retention* doubles as the grace period: a put or delete older than
  ``observed - history_retention`` is not applied (``put`` returns
  ``PUT_RETURN_CODE_NOT_PUT``; counted in ``dropped-records``);
- a query older than ``observed - history_retention`` sees the latest version only (which
  never expires); older versions are removed a whole segment at a time;
- ``put`` returns the ``valid_to`` of the version it wrote, or
  ``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` when it is the latest.

Everything, the observed stream time included, lives in one ordered bytes store
(``state.versioned_format``), so changelogging, restore, standbys, checkpoints, snapshots and
the local-state handover work as for every other store, and a restore rebuilds the very same
history. Expired versions are deleted one by one (not with a range delete), so a compacted
changelog (Kafka) can drop them too.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from streamtide.errors import StoreError
from streamtide.processor.api import StateStoreContext
from streamtide.processor.drops import LATE, record_drop
from streamtide.serde import Serde
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.encoding import MAX_LONG, MIN_LONG
from streamtide.state.layout import SerdeLayoutStore
from streamtide.state.stores import KeyValueBytesStoreSupplier, SupplierStoreBuilder
from streamtide.state.timestamped import ValueAndTimestamp
from streamtide.state.versioned_format import (
    HISTORY,
    OBSERVED_STREAM_TIME,
    decode_latest,
    decode_time,
    decode_version,
    encode_latest,
    encode_time,
    encode_version,
    history_key,
    history_prefix,
    latest_key,
    segment_bound,
    valid_from_of,
)

V = TypeVar("V")

#: ``put`` wrote the latest version: its validity has no end yet.
PUT_RETURN_CODE_VALID_TO_UNDEFINED = -1
#: ``put`` did nothing: the timestamp is older than the grace period.
PUT_RETURN_CODE_NOT_PUT = MIN_LONG


@dataclass(frozen=True)
class VersionedRecord(Generic[V]):
    """A value with the timestamp it is valid from and, unless it is the latest version,
    the timestamp it is valid to (exclusive)."""

    value: V
    timestamp: int
    valid_to: int | None = None


class ResultOrder(enum.Enum):
    """The order of ``get_versions``'s answer (``ANY`` is newest first, as in Kafka)."""

    ANY = "any"
    ASCENDING = "ascending"
    DESCENDING = "descending"


@dataclass(frozen=True)
class _Version:
    """One stored version of a key: where it is, and what."""

    raw_key: bytes
    valid_from: int
    valid_to: int
    value: bytes | None


class VersionedKeyValueStore(SerdeLayoutStore):
    """Versions per key in an ordered bytes store; see the module docstring."""

    kind = "versioned_key_value"
    label = "versioned store"

    PUT_RETURN_CODE_VALID_TO_UNDEFINED = PUT_RETURN_CODE_VALID_TO_UNDEFINED
    PUT_RETURN_CODE_NOT_PUT = PUT_RETURN_CODE_NOT_PUT

    def __init__(
        self,
        inner: KeyValueBytesStore,
        history_retention_ms: int,
        segment_interval_ms: int,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
    ) -> None:
        if history_retention_ms < 0:
            raise ValueError(f"history retention must not be negative, got {history_retention_ms}")
        if segment_interval_ms < 1:
            raise ValueError(f"segment interval must be positive, got {segment_interval_ms}")
        super().__init__(inner, key_serde, value_serde)
        self.history_retention_ms = history_retention_ms
        self.segment_interval_ms = segment_interval_ms
        self._metrics: Any = None
        self._expired_below: int | None = None  # a cache only: segments below were dropped

    def init(self, context: StateStoreContext) -> None:
        super().init(context)
        self._metrics = context.metrics
        self._expired_below = None

    def open_standalone(self) -> VersionedKeyValueStore:
        """Open without a task (serdes must have been given)."""
        if self.key_serde is None or self.value_serde is None:
            raise StoreError(f"store {self.name!r} needs serdes to be opened standalone")
        self._open_inner_standalone()
        self._expired_below = None
        return self

    # ---- typed API -----------------------------------------------------------------------

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Add the version ``value`` of ``key`` valid from ``timestamp`` (None: a delete);
        a version with the same key and timestamp is replaced. Returns the new version's
        ``valid_to``, ``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` (-1) if it is the latest, or
        ``PUT_RETURN_CODE_NOT_PUT`` if ``timestamp`` is older than the grace period."""
        raw = None if value is None else self.value_serde.serialize(value)  # type: ignore[union-attr]
        return self.put_raw(self._key_bytes(key), raw, int(timestamp))

    def delete(self, key: Any, timestamp: int) -> VersionedRecord[Any] | None:
        """Delete ``key`` as of ``timestamp`` and return the version valid then (None: none,
        or ``timestamp`` is older than the grace period and nothing was deleted)."""
        return self._typed(self.delete_raw(self._key_bytes(key), int(timestamp)))

    def get(self, key: Any, as_of_timestamp: int | None = None) -> VersionedRecord[Any] | None:
        """The latest version of ``key``, or with ``as_of_timestamp`` the version valid at
        that time (the one with the largest timestamp not after it); None if there is none,
        or if that time is older than the history retention and the latest version is not
        valid at it."""
        raw = self._key_bytes(key)
        if as_of_timestamp is None:
            return self._typed(self.get_latest_raw(raw))
        return self._typed(self.get_as_of_raw(raw, int(as_of_timestamp)))

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        """The latest version as a ``ValueAndTimestamp`` (how tables look keys up)."""
        found = self.get(key)
        return None if found is None else ValueAndTimestamp(found.value, found.timestamp)

    def get_as_of_with_timestamp(self, key: Any, as_of: int) -> ValueAndTimestamp | None:
        """The version valid at ``as_of`` as a ``ValueAndTimestamp`` (a versioned table's
        lookup for a stream-table join)."""
        found = self.get(key, as_of)
        return None if found is None else ValueAndTimestamp(found.value, found.timestamp)

    def get_versions(
        self,
        key: Any,
        from_timestamp: int = MIN_LONG,
        to_timestamp: int | None = None,
        order: ResultOrder = ResultOrder.ANY,
    ) -> list[VersionedRecord[Any]]:
        """Every version of ``key`` valid at some time in ``[from_timestamp, to_timestamp]``
        (KIP-968), tombstones left out, newest first unless ``order`` is ``ASCENDING``."""
        found = self.get_versions_raw(self._key_bytes(key), from_timestamp, to_timestamp, order)
        return [self._typed(r) for r in found]  # type: ignore[misc]

    @property
    def observed_stream_time(self) -> int:
        """The largest timestamp put so far (-1: none)."""
        return decode_time(self.inner.get(OBSERVED_STREAM_TIME))

    def _typed(self, record: VersionedRecord[bytes] | None) -> VersionedRecord[Any] | None:
        if record is None:
            return None
        value = self.value_serde.deserialize(record.value)  # type: ignore[union-attr]
        return VersionedRecord(value, record.timestamp, record.valid_to)

    # ---- bytes API -----------------------------------------------------------------------

    def segment_of(self, timestamp: int) -> int:
        return timestamp // self.segment_interval_ms

    def get_latest_raw(self, key: bytes) -> VersionedRecord[bytes] | None:
        raw = self.inner.get(latest_key(key))
        if raw is None:
            return None
        valid_from, value = decode_latest(raw)
        return VersionedRecord(value, valid_from)

    def get_as_of_raw(self, key: bytes, as_of: int) -> VersionedRecord[bytes] | None:
        latest = self.get_latest_raw(key)
        if latest is not None and latest.timestamp <= as_of:
            return latest
        observed = self.observed_stream_time
        if as_of < observed - self.history_retention_ms:
            return None  # beyond history retention: only the latest version answers
        for segment in range(self.segment_of(observed), self.segment_of(as_of) - 1, -1):
            prefix = history_prefix(segment, key)
            found = next(iter(self.inner.range(prefix, history_key(prefix, as_of), True)), None)
            if found is None:
                continue
            # the key's version starting last at or before ``as_of``: valid then, or a
            # tombstone, or it ended before (then no version is valid at ``as_of``)
            valid_to, value = decode_version(found[1])
            if value is None or valid_to <= as_of:
                return None
            return VersionedRecord(value, valid_from_of(found[0]), valid_to)
        return None

    def get_versions_raw(
        self,
        key: bytes,
        from_timestamp: int = MIN_LONG,
        to_timestamp: int | None = None,
        order: ResultOrder = ResultOrder.ANY,
    ) -> list[VersionedRecord[bytes]]:
        to = MAX_LONG if to_timestamp is None else to_timestamp
        found: list[VersionedRecord[bytes]] = []
        latest = self.get_latest_raw(key)
        if latest is not None and latest.timestamp <= to:
            found.append(latest)
        observed = self.observed_stream_time
        live_from = observed - self.history_retention_ms
        if to >= live_from:
            low = max(from_timestamp, live_from)
            for segment in range(self.segment_of(observed), self.segment_of(low) - 1, -1):
                in_segment = [
                    VersionedRecord(v.value, v.valid_from, v.valid_to)
                    for v in self._versions(segment, key)
                    if v.value is not None
                    and v.valid_from <= to
                    and v.valid_to > from_timestamp
                    and v.valid_to > live_from
                ]
                found.extend(reversed(in_segment))
        if order is ResultOrder.ASCENDING:
            found.reverse()
        return found

    def delete_raw(self, key: bytes, timestamp: int) -> VersionedRecord[bytes] | None:
        if timestamp < self.observed_stream_time - self.history_retention_ms:
            self._count_expired()
            return None
        existing = self.get_as_of_raw(key, timestamp)
        self.put_raw(key, None, timestamp)
        return existing

    def put_raw(self, key: bytes, value: bytes | None, timestamp: int) -> int:
        """``put`` of serialized bytes (None: a tombstone); see ``put``."""
        if key is None:
            raise self._none_key_error()
        observed = self.observed_stream_time
        if timestamp < observed - self.history_retention_ms:
            self._count_expired()
            return PUT_RETURN_CODE_NOT_PUT
        if timestamp > observed:
            observed = timestamp
            self.inner.put(OBSERVED_STREAM_TIME, encode_time(observed))
        self._expire(observed)
        latest = self.get_latest_raw(key)
        if latest is not None and timestamp >= latest.timestamp:
            if timestamp > latest.timestamp:  # the latest version now ends at ``timestamp``
                self._write(key, latest.timestamp, timestamp, latest.value)
            self._write_last(key, timestamp, value)
            return PUT_RETURN_CODE_VALID_TO_UNDEFINED
        following = None if latest is None else latest.timestamp
        preceding, following = self._neighbours(key, timestamp, observed, following)
        if preceding is not None and (
            preceding.valid_from == timestamp or preceding.valid_to > timestamp
        ):
            self.inner.put(preceding.raw_key, None)
            if preceding.valid_from < timestamp:  # it now ends where the new version begins
                self._write(key, preceding.valid_from, timestamp, preceding.value)
        if following is None:
            self._write_last(key, timestamp, value)
            return PUT_RETURN_CODE_VALID_TO_UNDEFINED
        self._write(key, timestamp, following, value)
        return following

    # ---- internals -----------------------------------------------------------------------

    def _neighbours(
        self, key: bytes, timestamp: int, observed: int, following: int | None
    ) -> tuple[_Version | None, int | None]:
        """The stored version of ``key`` starting last at or before ``timestamp`` (None when
        none can matter: a version that ended before lies in an older segment only if it is
        a tombstone), and the smallest start after ``timestamp`` (None: none), searching the
        segments from the newest down to ``timestamp``'s."""
        for segment in range(self.segment_of(observed), self.segment_of(timestamp) - 1, -1):
            preceding = None
            for version in self._versions(segment, key):
                if version.valid_from <= timestamp:
                    preceding = version
                else:
                    if following is None or version.valid_from < following:
                        following = version.valid_from
                    break
            if preceding is not None:
                return preceding, following
        return None, following

    def _versions(self, segment: int, key: bytes) -> Iterator[_Version]:
        """``key``'s versions stored in ``segment``, by ``valid_from``."""
        for raw_key, raw in self.inner.prefix_scan(history_prefix(segment, key)):
            valid_to, value = decode_version(raw)
            yield _Version(raw_key, valid_from_of(raw_key), valid_to, value)

    def _write(self, key: bytes, valid_from: int, valid_to: int, value: bytes | None) -> None:
        """Store a version that ends at ``valid_to``, in that time's segment."""
        prefix = history_prefix(self.segment_of(valid_to), key)
        self.inner.put(history_key(prefix, valid_from), encode_version(valid_to, value))

    def _write_last(self, key: bytes, timestamp: int, value: bytes | None) -> None:
        """Make the version at ``timestamp`` the latest: a value goes to the latest region; a
        tombstone to the history, in its own time's segment (so it expires like history),
        with the latest entry removed."""
        if value is not None:
            self.inner.put(latest_key(key), encode_latest(timestamp, value))
            return
        self.inner.put(latest_key(key), None)
        self._write(key, timestamp, timestamp, None)

    def _expire(self, observed: int) -> None:
        """Delete every version in segments wholly older than the history retention."""
        live = self.segment_of(observed - self.history_retention_ms)
        if self._expired_below is not None and live <= self._expired_below:
            return
        self._expired_below = live
        doomed = [k for k, _ in self.inner.range(HISTORY, segment_bound(live))]
        if doomed:
            self.inner.put_all((k, None) for k in doomed)

    def _count_expired(self) -> None:
        if self._metrics is not None:
            record_drop(self._metrics, LATE)


@dataclass(frozen=True)
class VersionedBytesStoreSupplier(KeyValueBytesStoreSupplier):
    """A bytes store supplier that also fixes a versioned store's history retention and
    segment interval (``Stores.persistent_versioned_key_value_store``)."""

    history_retention_ms: int = 0
    segment_interval_ms: int = 1


@dataclass
class VersionedKeyValueStoreBuilder(SupplierStoreBuilder):
    """Builds one ``VersionedKeyValueStore`` per task over the supplier's bytes store
    (changelogged unless logging is disabled)."""

    supplier: VersionedBytesStoreSupplier
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    logging_enabled: bool = True

    @property
    def history_retention_ms(self) -> int:
        return self.supplier.history_retention_ms

    def build(self) -> VersionedKeyValueStore:
        return VersionedKeyValueStore(
            self._inner(),
            self.supplier.history_retention_ms,
            self.supplier.segment_interval_ms,
            self.key_serde,
            self.value_serde,
        )
