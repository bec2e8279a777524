"""The operator behind ``KTable.suppress`` and its changelogged, time-ordered buffer.

The buffer lives in one ordered bytes store, so it is restored from its changelog after a
restart or a task move like any other store::

    b"t" | buffer time | key  ->  timestamp | headers | values  (the buffered records)
    b"k" | key                 ->  buffer time                   (where a key's record is)
    b"m"                       ->  observed stream time | records | bytes

A key keeps the buffer time it entered with (later updates replace its value in place, as in
Kafka Streams). Records leave in buffer-time order, then key order.

The buffer keeps both sides of a table update (``Change``), each serialized with the table's
value serde, and, like Kafka's time-ordered change buffer, the key's prior value: the old
value of the update that brought it into the buffer, which is what was last emitted for the
key. What leaves is ``Change(new, prior)`` when the tables below ask for old values (a filter
then forwards a tombstone only for a key whose last emitted value passed), else the new
value. Entries without prior and old values are written in the layout that predates them
(``encode_entry``), so buffers and changelogs written before still restore.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from streamtide.dsl.change import Change, as_change
from streamtide.dsl.kept import StagedWrites
from streamtide.dsl.suppressed import BufferFull, Suppressed
from streamtide.errors import BufferFullError, SerdeError, TopologyError
from streamtide.processor.api import DefaultSerdes, ProcessorContext
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator
from streamtide.serde import Serde, WindowedSerde
from streamtide.state.encoding import MAX_LONG, decode_long, encode_long

_BY_TIME, _BY_KEY, _META = b"t", b"k", b"m"
_BY_TIME_END = b"u"  # just above every ``t`` key
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_SAME_AS_PRIOR = -2
#: buffer time, timestamp, offset and partition: what Kafka adds to a record's key and value
RECORD_OVERHEAD = 28


class Buffered(NamedTuple):
    """A buffered update: ``prior`` is the key's value before it entered the buffer (what
    was last emitted downstream), ``old`` and ``new`` the values of its latest update (each
    serialized; None: absent)."""

    timestamp: int
    headers: tuple
    prior: bytes | None
    old: bytes | None
    new: bytes | None


def _pack_optional(value: bytes | None) -> bytes:
    return _I32.pack(-1) if value is None else _I32.pack(len(value)) + value


def encode_entry(entry: Buffered) -> bytes:
    """``timestamp | headers | values``; values are a flag and the new value (0: absent,
    1: present) when no prior or old value is kept, else flag 2 and the prior, old and new
    values, each a signed length (-1: absent; -2 for old: the same as prior) and bytes."""
    parts = [encode_long(entry.timestamp), _U32.pack(len(entry.headers))]
    for name, data in entry.headers:
        raw = name.encode()
        parts += [_U32.pack(len(raw)), raw, _U32.pack(len(data)), data]
    prior, old, new = entry.prior, entry.old, entry.new
    if prior is None and old is None:
        parts.append(b"\x00" if new is None else b"\x01" + new)
    else:
        same = old is not None and old == prior
        old_part = _I32.pack(_SAME_AS_PRIOR) if same else _pack_optional(old)
        parts += [b"\x02", _pack_optional(prior), old_part, _pack_optional(new)]
    return b"".join(parts)


def _unpack_optional(data: bytes, at: int) -> tuple[int | None, int]:
    """The signed length at ``at`` (None when absent) and where the value starts."""
    (size,) = _I32.unpack_from(data, at)
    return (None if size == -1 else size), at + 4


def decode_entry(data: bytes) -> Buffered:
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
    flag = data[at]
    if flag > 2:
        raise SerdeError(f"a suppression buffer entry has an unknown value layout {flag}")
    if flag != 2:  # no prior or old value kept (the only layout before old values were)
        return Buffered(
            timestamp, tuple(headers), None, None, None if flag == 0 else data[at + 1 :]
        )
    values: list[bytes | None] = []
    at += 1
    for _ in range(3):
        size, at = _unpack_optional(data, at)
        if size == _SAME_AS_PRIOR:
            values.append(values[0])
        elif size is None:
            values.append(None)
        else:
            values.append(data[at : at + size])
            at += size
    return Buffered(timestamp, tuple(headers), *values)


def entry_size(key: bytes, entry: bytes) -> int:
    """Key, value and header bytes plus ``RECORD_OVERHEAD`` (the encoding's own framing is
    not counted); an old value equal to the prior one counts once, as in Kafka Streams."""
    buffered = decode_entry(entry)
    header_bytes = sum(len(name.encode()) + len(data) for name, data in buffered.headers)
    values = [buffered.prior, buffered.new]
    if buffered.old != buffered.prior:
        values.append(buffered.old)
    value_bytes = sum(len(value) for value in values if value is not None)
    return RECORD_OVERHEAD + len(key) + value_bytes + header_bytes


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

    def put(
        self,
        time: int,
        key: bytes,
        timestamp: int,
        headers: tuple,
        old: bytes | None,
        new: bytes | None,
    ) -> None:
        """Buffer an update of ``key``: a key already buffered keeps its buffer time and its
        prior value (the old value of the update that brought it in, what was last emitted
        for it), and takes the update's old and new values."""
        at = self.inner.get(_BY_KEY + key)
        if at is not None:
            slot = _BY_TIME + at + key
            buffered = self.inner.get(slot)
            self.size -= entry_size(key, buffered)  # type: ignore[arg-type]
            prior = decode_entry(buffered).prior  # type: ignore[arg-type]
        else:
            at = encode_long(time)
            slot = _BY_TIME + at + key
            prior = old
            self.inner.put(_BY_KEY + key, at)
            self.records += 1
            if self._floor is not None and time < self._floor:
                self._floor = time
        entry = encode_entry(Buffered(timestamp, headers, prior, old, new))
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
    ``BufferFullError``). What leaves keeps the timestamp and headers it was buffered with;
    with ``send_old_values`` (the tables below asked) it is ``Change(new, prior)``.

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
        send_old_values: bool = False,
    ) -> None:
        self.node = node
        self.send_old_values = send_old_values
        self.store_name = store_name
        self.final = suppressed.final_results
        self.buffer_config = suppressed.buffer
        self.wait_ms = wait_ms
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.windowed = windowed

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        if not isinstance(context, DefaultSerdes):
            raise TopologyError(f"suppress {self.node!r}: the task context has no default serdes")
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
                    change = as_change(value)
                    buffer.put(
                        time,
                        serialize_key(key),  # type: ignore[arg-type]  # a non-None key has bytes
                        timestamp,
                        tuple(headers[p] or ()),
                        None if change.old is None else serialize_value(change.old),
                        None if change.new is None else serialize_value(change.new),
                    )
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
        "send_old_values",
        "timestamps",
        "value_serde",
        "values",
    )

    def __init__(self, operator: SuppressOperator) -> None:
        self.final = operator.final
        self.send_old_values = operator.send_old_values
        self.key_serde: Serde = operator.key_serde  # type: ignore[assignment]
        self.value_serde: Serde = operator.value_serde  # type: ignore[assignment]
        self.positions: list[int] = []
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self.timestamps: list[int] = []
        self.headers: list[Any] = []

    def add(self, position: int, key: bytes, entry: bytes) -> None:
        buffered = decode_entry(entry)
        if buffered.new is None and self.final:
            return  # a final result is never a tombstone: nothing was emitted for it
        deserialize = self.value_serde.deserialize
        value = None if buffered.new is None else deserialize(buffered.new)
        if self.send_old_values:
            prior = buffered.prior
            value = Change(value, None if prior is None else deserialize(prior))
        self.positions.append(position)
        self.keys.append(self.key_serde.deserialize(key))
        self.values.append(value)
        self.timestamps.append(buffered.timestamp)
        self.headers.append(buffered.headers)

    def batch(self, batch: ColumnBatch) -> ColumnBatch:
        return batch.derive(self.positions, self.keys, self.values, self.timestamps, self.headers)


def _shown(limit: Any) -> str:
    return "unlimited" if limit is None else str(limit)
