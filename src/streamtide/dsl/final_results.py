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

import heapq
from collections.abc import Callable
from typing import Any

from streamtide.processor.column_batch import EmittedRows
from streamtide.serde import Serde, Serdes
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.encoding import MIN_LONG, decode_long, encode_long
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


#: How far past a scan's upper bound the close index looks for the store's next entry.
_LOOKAHEAD_MS = 1 << 16


class CloseIndex:
    """Windows not yet emitted, as ``close-ordering time | suffix`` keys over a bytes store.

    A batch's adds and removes are staged in memory (the latest write of each entry, the
    adds also in a heap by time) and handed to the store once, when the operator's batch
    ends (``write_back``): the store, and so its changelog, ends as the writes one by one
    would leave it. A ``take_due`` takes the due entries of the store (as the batch began:
    those not removed since) and of the heap.

    For the store it keeps a floor below which nothing is indexed (raised past every range
    it empties) and the time of the store's next entry past the last scan (a lower bound,
    looked for up to ``_LOOKAHEAD_MS`` ahead), so the store is scanned only when an entry
    of it can be due, and only for the entries taken. ``due_from`` is the lowest bound a
    ``take_due`` can find anything at: a record whose close time has not reached it costs
    its operator a comparison and no call.
    """

    def __init__(self, inner: KeyValueBytesStore) -> None:
        self.inner = inner
        self._floor: int | None = None  # no entry of the store below it; None: not read yet
        self._next: int | None = None  # no entry of the store in [floor, next); None: unknown
        #: the batch's writes (key: ``encode_long(time) + suffix``; value ``b""``, or None to
        #: remove the entry); an operator may write here itself if it also pushes each add
        #: onto ``added`` and lowers ``due_from`` to its time
        self.staged: dict[bytes, bytes | None] = {}
        #: a heap of the batch's adds as (time, key), removed ones included
        self.added: list[tuple[int, bytes]] = []
        #: ``take_due(upper)`` finds nothing for ``upper < due_from``
        self.due_from = MIN_LONG

    def _set_due_from(self) -> None:
        due = MIN_LONG if self._next is None else self._next
        added = self.added
        self.due_from = added[0][0] if added and added[0][0] < due else due

    def add(self, time: int, suffix: bytes) -> None:
        key = encode_long(time) + suffix
        self.staged[key] = b""
        heapq.heappush(self.added, (time, key))
        if time < self.due_from:
            self.due_from = time

    def remove(self, time: int, suffix: bytes) -> None:
        self.staged[encode_long(time) + suffix] = None

    def write_back(self) -> None:
        """Hand the batch's writes to the store (when the operator's batch ends)."""
        staged = self.staged
        if staged:
            self.inner.put_all(list(staged.items()))
            staged.clear()
        added = self.added
        if added:  # what is left of them is in the store now
            oldest = added[0][0]
            if self._next is not None and oldest < self._next:
                self._next = oldest
            if self._floor is not None and oldest < self._floor:
                self._floor = oldest
            added.clear()
        self._set_due_from()

    def take_due(self, upper: int) -> list[tuple[int, bytes]]:
        """Remove and return the entries with time ``<= upper``, in order."""
        due: dict[bytes, int] = {}
        staged = self.staged
        if self._next is None or upper >= self._next:
            floor = self._floor
            beyond = upper + 1 + _LOOKAHEAD_MS
            following = beyond
            low = None if floor is None else encode_long(floor)
            for key, _ in self.inner.range(low, encode_long(beyond)):
                time = decode_long(key)
                if time > upper:
                    following = time
                    break
                if staged.get(key, b"") is not None:  # (not removed in this batch)
                    due[key] = time
            self._floor = upper + 1
            self._next = following
        added = self.added
        while added and added[0][0] <= upper:
            time, key = heapq.heappop(added)
            if staged.get(key) is not None:
                due[key] = time
        for key in due:
            staged[key] = None
        self._set_due_from()
        return [(time, key[8:]) for key, time in sorted(due.items())]


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
