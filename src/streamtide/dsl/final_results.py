"""Emit-final windowed aggregations (``EmitStrategy.on_window_close()``, Kafka's KIP-825).

A window's final result is emitted once, when the window closes, and updates of open windows
are not emitted at all. To find the windows that close without scanning the open ones, each
aggregation keeps a second, changelogged store: an index of the windows not yet emitted,
ordered by the time they close at (time and sliding windows by their start, sessions by
their end), then by serialized key. When stream time passes the oldest indexed entry's close
time, one range scan of the index yields exactly the windows to emit (in Kafka's order: time,
then key); their entries are deleted in the same batch of writes as the emission, so a
restart or a task move neither re-emits a final result nor loses one. Between closes, a
record costs one comparison.

Final results bypass the record cache (as in Kafka Streams) and carry the window's result
timestamp (time and sliding windows: the largest record timestamp; sessions: the session
end). The forms are ``session_operator.SessionFinalOperator``,
``time_window_operator.TimeWindowFinalOperator`` and
``sliding_operator.SlidingWindowFinalOperator``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtide.processor.column_batch import EmittedRows
from streamtide.serde import Serde, Serdes
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.encoding import MAX_LONG, MIN_LONG, decode_long, encode_long
from streamtide.state.stores import KeyValueBytesStoreSupplier, KeyValueStoreBuilder
from streamtide.state.timestamped import decode
from streamtide.window import Window, Windowed

#: The index store of an emit-final aggregation is named after its window or session store.
INDEX_SUFFIX = "-final-index"


def index_store_builder(store_name: str, store_kind: str, logging: bool) -> KeyValueStoreBuilder:
    """The changelogged bytes store that indexes ``store_name``'s windows not yet emitted."""
    supplier = KeyValueBytesStoreSupplier(store_name + INDEX_SUFFIX, store_kind)
    builder = KeyValueStoreBuilder(supplier, Serdes.bytes(), Serdes.bytes())
    if not logging:
        builder.with_logging_disabled()
    return builder


class CloseIndex:
    """Windows not yet emitted, as ``close-ordering time | suffix`` keys over a bytes store.

    It keeps a floor below which nothing is indexed (read once, then raised past every range
    it empties), so each scan reads only the entries it takes: never the open windows, nor
    the deleted entries of windows already emitted. ``due_from`` is the lowest bound a
    ``take_due`` can find anything at (the floor, or the oldest entry while it is known:
    after the first read and after an add), so a record whose close time has not reached it
    costs its operator a comparison and no call.

    Adds and removes are staged in memory (the latest write of each entry) and handed to the
    store at once before a scan and when the operator's batch ends (``write_back``): the
    store, and so its changelog, ends as the writes one by one would leave it.
    """

    def __init__(self, inner: KeyValueBytesStore) -> None:
        self.inner = inner
        self._floor: int | None = None  # no entry below it; None: not read yet
        self._oldest: int | None = None  # the oldest entry's time when known, else None
        #: entries written since the store last got them (value None: removed)
        self._staged: dict[bytes, bytes | None] = {}
        #: ``take_due(upper)`` finds nothing for ``upper < due_from``
        self.due_from = MIN_LONG

    def _read_floor(self) -> int:
        first = next(iter(self.inner.range(None, None)), None)
        floor = MAX_LONG if first is None else decode_long(first[0])
        self._oldest = floor
        return floor

    def _set_due_from(self) -> None:
        floor, oldest = self._floor, self._oldest
        if floor is None:
            self.due_from = MIN_LONG
        else:
            self.due_from = floor if oldest is None or oldest < floor else oldest

    def add(self, time: int, suffix: bytes) -> None:
        self._staged[encode_long(time) + suffix] = b""
        if time < self.due_from:
            self.lower(time)

    def lower(self, time: int) -> None:
        """An entry at ``time``, below ``due_from``, was staged (``staged`` written directly)."""
        if self._floor is not None and time < self._floor:
            self._floor = time
        if self._oldest is not None and time < self._oldest:
            self._oldest = time
        self._set_due_from()

    @property
    def staged(self) -> dict[bytes, bytes | None]:
        """The staged writes, for an operator that writes entries itself (key: the entry's
        ``encode_long(time) + suffix``; value ``b""``, or None to remove it; an add below
        ``due_from`` must call ``lower``)."""
        return self._staged

    def remove(self, time: int, suffix: bytes) -> None:
        self._staged[encode_long(time) + suffix] = None

    def write_back(self) -> None:
        """Hand the staged writes to the store (a scan and the batch's end need them)."""
        staged = self._staged
        if staged:
            self.inner.put_all(list(staged.items()))
            staged.clear()

    def take_due(self, upper: int) -> list[tuple[int, bytes]]:
        """Remove and return the entries with time ``<= upper``, in order."""
        self.write_back()
        floor = self._floor
        if floor is None:
            floor = self._floor = self._read_floor()
        oldest = self._oldest
        if upper < floor or (oldest is not None and upper < oldest):
            self._set_due_from()
            return []
        due = [
            (time, key[8:])
            for key, _ in self.inner.range(encode_long(floor), encode_long(upper + 1))
            if (time := decode_long(key)) <= upper
        ]
        for time, suffix in due:
            self.remove(time, suffix)
        self._floor = upper + 1
        self._oldest = None
        self._set_due_from()
        return due


def emit_closed_windows(
    index: CloseIndex,
    last_start: int,
    span: int,
    final: Callable[[bytes, int], tuple[Any, int] | None],
    key_serde: Serde,
    out: EmittedRows,
    position: int,
) -> None:
    """Emit, for the row at ``position``, every indexed window (of a time or sliding window
    aggregation) starting at or before ``last_start``, with its result ``final(key bytes,
    start)`` (value and timestamp; None: nothing to emit); ``span`` is end minus start."""
    if last_start < index.due_from:
        return
    due = index.take_due(last_start)
    if not due:
        return
    deserialize = key_serde.deserialize
    for start, key_bytes in due:
        found = final(key_bytes, start)
        if found is not None:
            key = deserialize(key_bytes)
            out.add(position, Windowed(key, Window(start, start + span)), *found)


def stored_final(store: Any, value_serde: Serde, key_bytes: bytes, start: int) -> Any:
    """A closing window's value and timestamp as a timestamped window store holds them (read
    even though the window may have expired), or None."""
    stored = store.get_stored(key_bytes, start)
    if stored is None:
        return None
    raw, timestamp = decode(stored)
    return value_serde.deserialize(raw), timestamp
