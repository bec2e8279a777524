"""The operator behind ``KTable.suppress`` and its changelogged, time-ordered buffer.

The buffer lives in one ordered bytes store, so it is restored from its changelog after a
restart or a task move like any other store::

    b"t" | buffer time | key  ->  timestamp | headers | value   (the buffered records)
    b"k" | key                 ->  buffer time                   (where a key's record is)
    b"m"                       ->  observed stream time | records | bytes

A key keeps the buffer time it entered with (later updates replace its value in place, as in
Kafka Streams). Records leave in buffer-time order, then key order.
"""

from __future__ import annotations

import struct
from typing import Any

from streamtide.dsl.kept import StagedWrites
from streamtide.dsl.suppressed import BufferFull, Suppressed
from streamtide.errors import BufferFullError
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator
from streamtide.serde import Serde, WindowedSerde
from streamtide.state.encoding import MAX_LONG, decode_long, encode_long

_BY_TIME, _BY_KEY, _META = b"t", b"k", b"m"
_BY_TIME_END = b"u"  # just above every ``t`` key
_U32 = struct.Struct(">I")
#: buffer time, timestamp, offset and partition: what Kafka adds to a record's key and value
RECORD_OVERHEAD = 28


def encode_entry(timestamp: int, headers: tuple, value: bytes | None) -> bytes:
    parts = [encode_long(timestamp), _U32.pack(len(headers))]
    for name, data in headers:
        raw = name.encode()
        parts += [_U32.pack(len(raw)), raw, _U32.pack(len(data)), data]
    parts.append(b"\x00" if value is None else b"\x01" + value)
    return b"".join(parts)


def decode_entry(data: bytes) -> tuple[int, tuple, bytes | None]:
    timestamp = decode_long(data)
    (count,) = _U32.unpack_from(data, 8)
    at, headers = 12, []
    for _ in range(count):
        (size,) = _U32.unpack_from(data, at)
        name = data[at + 4 : at + 4 + size].decode()
        at += 4 + size
        (size,) = _U32.unpack_from(data, at)
        headers.append((name, data[at + 4 : at + 4 + size]))
        at += 4 + size
    value = None if data[at] == 0 else data[at + 1 :]
    return timestamp, tuple(headers), value


def entry_size(key: bytes, entry: bytes) -> int:
    """Key, value and header bytes plus ``RECORD_OVERHEAD`` (the encoding's own framing of
    headers and the value flag is not counted)."""
    _, headers, value = decode_entry(entry)
    header_bytes = sum(len(name.encode()) + len(data) for name, data in headers)
    return RECORD_OVERHEAD + len(key) + (0 if value is None else len(value)) + header_bytes


class SuppressionBuffer:
    """Buffered records by buffer time over a bytes store (see the module docstring).

    A floor below which nothing is buffered bounds every scan from below (read once, raised
    past what is evicted, lowered by an older put), so a scan reads the records it evicts
    and not the deleted entries of those evicted before.
    """

    def __init__(self, inner: StagedWrites) -> None:
        self.inner = inner
        meta = inner.get(_META)
        if meta is None:
            self.observed, self.records, self.size = -1, 0, 0
        else:
            self.observed, self.records, self.size = (decode_long(meta, i) for i in (0, 8, 16))
        self._floor: int | None = None  # no record below this buffer time; None: not read

    def _low(self) -> bytes:
        if self._floor is None:
            first = next(iter(self.inner.range(_BY_TIME, _BY_TIME_END)), None)
            self._floor = MAX_LONG if first is None else decode_long(first[0], 1)
        return _BY_TIME + encode_long(self._floor)

    def put(self, time: int, key: bytes, entry: bytes) -> None:
        """Buffer ``entry`` for ``key``; a key already buffered keeps its buffer time."""
        at = self.inner.get(_BY_KEY + key)
        if at is not None:
            slot = _BY_TIME + at + key
            self.size -= entry_size(key, self.inner.get(slot))  # type: ignore[arg-type]
        else:
            at = encode_long(time)
            slot = _BY_TIME + at + key
            self.inner.put(_BY_KEY + key, at)
            self.records += 1
            if self._floor is not None and time < self._floor:
                self._floor = time
        self.inner.put(slot, entry)
        self.size += entry_size(key, entry)

    def _take(self, slot: bytes, entry: bytes) -> tuple[bytes, bytes]:
        key = slot[9:]
        self.inner.put(slot, None)
        self.inner.put(_BY_KEY + key, None)
        self.records -= 1
        self.size -= entry_size(key, entry)
        return key, entry

    def pop_due(self, expiry: int) -> list[tuple[bytes, bytes]]:
        """Remove and return the ``(key, entry)`` records with buffer time ``<= expiry``, in
        buffer-time then key order."""
        low = self._low()
        if not self.records or self._floor > expiry:  # type: ignore[operator]
            return []
        found = list(self.inner.range(low, _BY_TIME + encode_long(expiry + 1)))
        due = [self._take(slot, entry) for slot, entry in found if decode_long(slot, 1) <= expiry]
        self._floor = expiry + 1
        return due

    def pop_oldest(self) -> tuple[bytes, bytes]:
        """Remove and return the oldest ``(key, entry)`` (the buffer must not be empty)."""
        slot, entry = next(iter(self.inner.range(self._low(), _BY_TIME_END)))
        self._floor = decode_long(slot, 1)
        return self._take(slot, entry)

    def save(self, observed: int, records: int, size: int) -> None:
        """Store the observed stream time and the counts (once per batch: those after its
        last row that completed)."""
        self.inner.put(_META, encode_long(observed) + encode_long(records) + encode_long(size))


class SuppressOperator(ColumnOperator):
    """Holds table updates back in a ``SuppressionBuffer`` and emits them when due.

    Stream time here is the largest timestamp of the updates this node has seen (Kafka's
    suppress processor keeps its own), kept in the buffer so it survives restarts. Final
    results (``until_window_closes``) are buffered until ``window end + wait`` and never
    emit tombstones; ``until_time_limit`` buffers a key for ``wait`` from its first update.
    A row's own update is buffered first; then every record due by the new stream time
    leaves, in buffer-time then key order; then, while the buffer is over its limits, the
    oldest records leave early (or, with ``shutdown_when_full()``, the task stops with a
    ``BufferFullError``). What leaves keeps the timestamp and headers it was buffered with.

    Read once, write once: a batch's reads and writes of the buffer's store go through
    ``kept.StagedWrites`` (a key read once, scans merged with the batch's writes) and reach
    the store when the batch is done, with the observed stream time and counts as they were
    after the batch's last row that completed.
    """

    def __init__(
        self,
        node: str,
        store_name: str,
        suppressed: Suppressed,
        wait_ms: int,
        key_serde: Serde | None,
        value_serde: Serde | None,
        windowed: bool,
    ) -> None:
        self.node = node
        self.store_name = store_name
        self.final = suppressed.final_results
        self.buffer_config = suppressed.buffer
        self.wait_ms = wait_ms
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.windowed = windowed

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        if self.key_serde is None:
            default = context.default_key_serde
            self.key_serde = WindowedSerde(default) if self.windowed else default
        self.value_serde = self.value_serde or context.default_value_serde
        self.staged = StagedWrites(context.get_state_store(self.store_name).inner)
        self.buffer = SuppressionBuffer(self.staged)

    def process_batch(self, batch: ColumnBatch) -> None:
        buffer, config = self.buffer, self.buffer_config
        final, wait = self.final, self.wait_ms
        serialize_key = self.key_serde.serialize  # type: ignore[union-attr]
        serialize_value = self.value_serde.serialize  # type: ignore[union-attr]
        keys, values, timestamps, headers = (
            batch.keys,
            batch.values,
            batch.timestamps,
            batch.headers,
        )
        out = _Left(self)
        saved = None  # the buffer's stream time and counts after the last row that completed
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key, value, timestamp = keys[p], values[p], timestamps[p]
                    if timestamp > buffer.observed:
                        buffer.observed = timestamp
                    time = key.window.end if final else timestamp
                    raw = None if value is None else serialize_value(value)
                    entry = encode_entry(timestamp, tuple(headers[p] or ()), raw)
                    buffer.put(time, serialize_key(key), entry)
                    for left in buffer.pop_due(buffer.observed - wait):
                        out.add(p, *left)
                    if config.is_over(buffer.records, buffer.size):
                        if config.when_full is BufferFull.SHUT_DOWN:
                            raise self._full()
                        while config.is_over(buffer.records, buffer.size):
                            out.add(p, *buffer.pop_oldest())
                    saved = (buffer.observed, buffer.records, buffer.size)
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if saved is not None:
            buffer.save(*saved)
        self.staged.write_back()
        if out.positions:
            self.emit(out.batch(batch))

    def _full(self) -> BufferFullError:
        buffer, config = self.buffer, self.buffer_config
        return BufferFullError(
            f"suppression buffer of {self.node!r} exceeded its max capacity: "
            f"{buffer.records}/{_shown(config.records_limit)} records and "
            f"{buffer.size}/{_shown(config.bytes_limit)} bytes; raise the limits of "
            "its BufferConfig, or use emit_early_when_full() with until_time_limit",
            node=self.node,
        )


class _Left:
    """The records that left the buffer in a batch, each emitted for the row it left at."""

    __slots__ = (
        "final",
        "headers",
        "key_serde",
        "keys",
        "positions",
        "timestamps",
        "value_serde",
        "values",
    )

    def __init__(self, operator: SuppressOperator) -> None:
        self.final = operator.final
        self.key_serde: Serde = operator.key_serde  # type: ignore[assignment]
        self.value_serde: Serde = operator.value_serde  # type: ignore[assignment]
        self.positions: list[int] = []
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self.timestamps: list[int] = []
        self.headers: list[Any] = []

    def add(self, position: int, key: bytes, entry: bytes) -> None:
        timestamp, headers, value = decode_entry(entry)
        if value is None and self.final:
            return  # a final result is never a tombstone: nothing was emitted for it
        self.positions.append(position)
        self.keys.append(self.key_serde.deserialize(key))
        self.values.append(None if value is None else self.value_serde.deserialize(value))
        self.timestamps.append(timestamp)
        self.headers.append(headers)

    def batch(self, batch: ColumnBatch) -> ColumnBatch:
        return batch.derive(self.positions, self.keys, self.values, self.timestamps, self.headers)


def _shown(limit: Any) -> str:
    return "unlimited" if limit is None else str(limit)
