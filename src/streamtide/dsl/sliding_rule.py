"""The sliding-window rule for one row, over a key's windows kept in memory for a batch.

Kafka Streams' algorithm (KStreamSlidingWindowAggregate, its reverse-iterator variant, so
updates are emitted in the same order): for a row at ``t`` the key's windows starting in
``[t - 2 * difference, t + 1]`` are looked at once, newest first, and

- the row is added to every existing window that contains ``t``;
- ``t``'s left window ``[t - difference, t]`` is created (seeded with the aggregate of the
  window just before it when the previous record lies within the difference);
- ``t``'s right window ``[t + 1, t + 1 + difference]`` is created when later records fall in
  it (seeded with the aggregate of the window holding them), and the previous record's right
  window when ``t`` falls in it.

Records earlier than one difference after the epoch cannot have a left window (its start
would be negative): they go to the window ``[0, difference]``. A window too old for a row
(``end < stream_time - grace``) is skipped and counted (``expired_window``). The operator
(``sliding_operator``) reads the windows, keeps the changes and emits the updates.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any, TypeAlias

from streamtide.dsl.kept import UNREAD
from streamtide.processor.column_batch import ColumnBatch, EmittedRows
from streamtide.state.timestamped import decode

if TYPE_CHECKING:
    from streamtide.dsl.sliding_operator import SlidingWindowAggregateOperator

#: A window's aggregate in memory: serialized (None: deleted in this batch), itself when
#: deserializing gives it back exactly (else ``UNREAD``), and the result's timestamp.
Entry = tuple["bytes | None", Any, int]
#: A window's aggregate as a row sees it: the value and the timestamp (None: no aggregate
#: yet, as ``reduce``'s fresh windows).
Agg: TypeAlias = "tuple[Any, int] | None"


class KeyWindows:
    """One key's windows in the batch: their starts in order (windows that exist) and their
    entries (also those the batch deleted)."""

    __slots__ = ("entries", "key_bytes", "starts")

    def __init__(self, key_bytes: bytes, found: list[tuple[int, bytes]]) -> None:
        self.key_bytes = key_bytes
        self.starts = [start for start, _ in found]
        self.entries: dict[int, Entry] = {}
        for start, stored in found:
            raw, timestamp = decode(stored)
            self.entries[start] = (raw, UNREAD, timestamp)

    def between(self, low: int, high: int) -> list[int]:
        """The starts of the existing windows in ``[low, high]``, ascending."""
        starts = self.starts
        return starts[bisect.bisect_left(starts, low) : bisect.bisect_right(starts, high)]

    def exists(self, start: int) -> bool:
        entry = self.entries.get(start)
        return entry is not None and entry[0] is not None


class SlidingRow:
    """The rule for one row (see the module docstring), over its key's windows in memory."""

    __slots__ = (
        "batch",
        "close",
        "key",
        "now",
        "op",
        "out",
        "p",
        "t",
        "value",
        "windows",
    )

    def __init__(
        self,
        op: SlidingWindowAggregateOperator,
        batch: ColumnBatch,
        out: EmittedRows,
        p: int,
        windows: KeyWindows,
        key: Any,
        value: Any,
        t: int,
        now: int,
        close: int,
    ) -> None:
        self.op, self.batch, self.out, self.p = op, batch, out, p
        self.windows, self.key, self.value, self.t, self.now = windows, key, value, t, now
        self.close = close

    def process(self) -> None:
        """A row at ``t >= difference``."""
        op, windows, t = self.op, self.windows, self.t
        difference = op.difference
        low = max(0, t - 2 * difference, self.now - op._live_for)
        left_agg: Lazy | None = None
        right_agg: Agg = None
        left_exists = right_exists = False
        previous: int | None = None
        entries = windows.entries
        seen = set()  # the windows looked at (a store read's), whatever the row changes
        for start in reversed(windows.between(low, t + 1)):
            seen.add(start)
            end = start + difference
            if start == t + 1:
                right_exists = True
            elif end > t:
                agg = op._read(entries[start])
                if right_agg is None:
                    right_agg = agg
                self.update(start, agg)
            elif end == t:
                left_exists = True
                agg = op._read(entries[start])
                self.update(start, agg)
                if agg[1] < t:
                    previous = agg[1]
                else:
                    return  # a record at t was seen: every window of t exists already
            else:
                left_agg = Lazy(op, entries[start])
                previous = entries[start][2]
                break
        if previous is not None:
            previous_right = previous + 1
            if previous_right not in seen and previous_right + difference >= t:
                self.update(previous_right, op._fresh(t))
        if not left_exists:
            if previous is not None and t - difference <= previous and left_agg is not None:
                seed: Agg = (left_agg.value(), t)
            else:
                seed = op._fresh(t)
            self.update(t - difference, seed)
        if not right_exists and right_agg is not None and right_agg[1] > t:
            self.put_right_window(right_agg)

    def early(self) -> None:
        """A row before ``difference``: its windows are kept in ``[0, difference]``."""
        op, windows, t = self.op, self.windows, self.t
        combined: Agg = None
        has_combined = False
        right_agg: Agg = None
        right_exists = False
        previous: int | None = None
        entries = windows.entries
        seen = windows.between(max(0, self.now - op._live_for), t + 1)
        for start in seen:
            if start == 0:
                combined, has_combined = op._read(entries[start]), True
                if combined[1] < t:
                    previous = combined[1]
            elif start <= t:
                right_agg = op._read(entries[start])
                self.update(start, right_agg)
            elif start == t + 1:
                right_exists = True
        if right_agg is None and combined is not None and combined[1] > t:
            right_agg = combined
        if not right_exists and right_agg is not None and right_agg[1] > t:
            self.put_right_window(right_agg)
        if previous is not None and previous + 1 not in seen:
            self.update(previous + 1, op._fresh(t))
        if not has_combined:
            self.update(0, op._fresh(t))
        else:
            self.update(0, combined)

    def put_right_window(self, agg: tuple[Any, int]) -> None:
        """Create ``t``'s right window holding exactly the later records' aggregate."""
        start = self.t + 1
        value, timestamp = agg
        self.op._put(self.windows, start, value, timestamp, self.now)
        self.op._updated(
            self.batch, self.out, self.p, self.key, self.windows.key_bytes, start, value, timestamp
        )

    def update(self, start: int, agg: Agg) -> None:
        """Add the row to the window at ``start`` (holding ``agg``) and emit it."""
        op = self.op
        if start + op.difference < self.close:
            op._drops[2] += 1
            return
        if agg is None:
            new, timestamp = self.value, self.t
        else:
            new = op.aggregator(self.key, self.value, agg[0])
            timestamp = self.t if self.t > agg[1] else agg[1]
        op._put(self.windows, start, new, timestamp, self.now)
        op._updated(
            self.batch, self.out, self.p, self.key, self.windows.key_bytes, start, new, timestamp
        )


class Lazy:
    """The window just before a row's left window: deserialized only if it seeds it."""

    __slots__ = ("entry", "op")

    def __init__(self, op: SlidingWindowAggregateOperator, entry: Entry) -> None:
        self.op, self.entry = op, entry

    def value(self) -> Any:
        return self.op._read(self.entry)[0]
