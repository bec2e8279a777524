"""Windowed stream-stream joins: ``KStream.join/left_join/outer_join(other, joiner, windows)``.

Kafka Streams' semantics (3.1 and later, with the spurious-result fix):

- Each side has a processor that, for a record at ``t`` with key ``k``, looks up the other
  side's records of ``k`` in ``[t - before, t + after]`` (the right side mirrors the window),
  emits ``joiner(left_value, right_value)`` for each with timestamp ``max`` of both, and then
  keeps the record in its own side's window store (``JoinWindowStore``), so records join in
  whichever order they arrive.
- Records with a None key or value are dropped (``dropped-records``), except that a left or
  outer join emits a None-key record's non-joined result at once (KIP-962).
- A record of an outer side that finds no partner waits in the shared ``OuterJoinStore``
  until its window closes: a left record at ``t`` once stream time passes
  ``t + after + grace``, a right record once it passes ``t + before + grace``. Whenever an
  in-order record arrives, the closed ones are emitted as ``joiner(value, None)`` (or
  ``joiner(None, value)``) with their own timestamps, in timestamp order, the right side's
  first at equal timestamps; a partner arriving in time removes them. A record that is already
  too late for its window (``t + after < stream time``) emits its non-joined result at once.
- A side keeps a record while ``t > newest timestamp of that side - (before + after +
  grace)`` (the retention of Kafka's join stores).

"Stream time" is the task's (``context.current_stream_time_ms()``), which is committed state,
so a restarted or moved task emits exactly what an uninterrupted one would. Non-joined
results are emitted on every in-order record (Kafka's default throttles this to once per
second of wall-clock time, which would make the output depend on processing speed).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.join_windows import JoinWindows, StreamJoined
from streamtide.dsl.params import DEFAULT_STORE_TYPE, ensure_callable
from streamtide.dsl.processors import PassThroughOperator
from streamtide.errors import TopologyError
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch, EmittedRows
from streamtide.processor.operator import ColumnOperator
from streamtide.serde import StringSerde
from streamtide.state.join_stores import (
    JoinWindowStoreBuilder,
    OuterJoinStore,
    OuterJoinStoreBuilder,
    unpack_items,
)
from streamtide.state.stores import KeyValueBytesStoreSupplier

if TYPE_CHECKING:
    from streamtide.dsl.kstream import KStream

#: A close time later than any: no record is waiting.
NEVER = 1 << 62

#: ``joiner(left_value, right_value) -> joined value`` (None stands for a missing partner).
ValueJoiner = Callable[[Any, Any], Any]


class StreamStreamJoinOperator(ColumnOperator):
    """One side of a windowed stream-stream join (see the module docstring).

    The rows of a batch come from this side's source only (the task never puts rows of two
    source topics in one piece, and a self-join hands its rows on one at a time), so the
    other side's store does not change during a batch: it is read once per distinct key of
    the batch, over the widest window the key's rows need, and each row takes its partners
    from there (deserialized for the row, as a lookup per record gives them). Each row then
    appends itself to its own side's store, as record by record."""

    def __init__(
        self,
        *,
        is_left: bool,
        own_store: str,
        other_store: str,
        outer_store: str | None,
        windows: JoinWindows,
        joiner: ValueJoiner,
        outer: bool,
    ) -> None:
        self.is_left = is_left
        self.own_store_name = own_store
        self.other_store_name = other_store
        self.outer_store_name = outer_store
        self.windows = windows
        self.outer = outer
        # ``joiner(this_value, other_value)``: the right side flips its arguments
        if is_left:
            self.join: ValueJoiner = joiner
        else:
            self.join = lambda this_value, other_value: joiner(other_value, this_value)
        self.joiner = joiner
        # this side looks ``before`` back and ``after`` ahead (the right side mirrors)
        self.before = windows.before_ms if is_left else windows.after_ms
        self.after = windows.after_ms if is_left else windows.before_ms

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.own = context.get_state_store(self.own_store_name)
        self.other = context.get_state_store(self.other_store_name)
        self.waiting: OuterJoinStore | None = None
        if self.outer_store_name is not None:
            self.waiting = context.get_state_store(self.outer_store_name)
        self.string_keys = type(self.other.key_serde) is StringSerde

    def _ranges(self, batch: ColumnBatch) -> tuple[list[Any], dict[Any, Any], dict[int, Any]]:
        """Each row's key identity (None: no key, no value, or a key the serde refused),
        each distinct key's partners in the other side's store over the widest window its
        rows need (timestamps and packed values), and the serde's error for each row whose
        key it refused (that row fails where a lookup would have)."""
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        before, after = self.before, self.after
        serialize = self.other.key_serde.serialize
        string_keys = self.string_keys
        idents: list[Any] = []
        key_bytes: dict[Any, bytes] = {}
        bounds: dict[Any, list[int]] = {}
        errors: dict[int, Any] = {}
        for p, key in enumerate(keys):
            if key is None or values[p] is None:
                idents.append(None)
                continue
            if string_keys and key.__class__ is str:
                ident = key
                if ident not in key_bytes:
                    key_bytes[ident] = key.encode("utf-8")
            else:
                try:
                    ident = serialize(key)
                except Exception as error:
                    errors[p] = error
                    idents.append(None)
                    continue
                key_bytes[ident] = ident
            idents.append(ident)
            timestamp = timestamps[p]
            low, high = max(0, timestamp - before), max(0, timestamp + after)
            bound = bounds.get(ident)
            if bound is None:
                bounds[ident] = [low, high]
            else:
                if low < bound[0]:
                    bound[0] = low
                if high > bound[1]:
                    bound[1] = high
        fetch = self.other.fetch_stored
        stored = {
            ident: fetch(key_bytes[ident], low, high) for ident, (low, high) in bounds.items()
        }
        return idents, stored, errors

    def process_batch(self, batch: ColumnBatch) -> None:
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        stream_times = batch.stream_times
        join, outer, is_left, waiting = self.join, self.outer, self.is_left, self.waiting
        before, after = self.before, self.after
        deserialize, append = self.other.value_serde.deserialize, self.own.append
        idents, stored, errors = self._ranges(batch)
        out = EmittedRows()
        add = out.add
        nulls = 0
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key, value, timestamp = keys[p], values[p], timestamps[p]
                    if key is None or value is None:
                        if outer and key is None and value is not None:
                            add(p, key, join(value, None), timestamp)
                        else:
                            nulls += 1
                        continue
                    stream_time = stream_times[p]
                    if waiting is not None and timestamp == stream_time:
                        self._emit_closed(out, p, stream_time)
                    ident = idents[p]
                    if ident is None:
                        raise errors[p]  # the key serde refused the key
                    time_to = max(0, timestamp + after)
                    stamps, packed = stored[ident]
                    first = bisect_left(stamps, max(0, timestamp - before))
                    last = bisect_right(stamps, time_to)
                    partners = [
                        (stamps[i], deserialize(item))
                        for i in range(first, last)
                        for item in unpack_items(packed[i])
                    ]
                    for other_timestamp, other_value in partners:
                        if waiting is not None:
                            waiting.remove(other_timestamp, not is_left, key)
                        joined = join(value, other_value)
                        add(p, key, joined, max(timestamp, other_timestamp))
                    if outer and not partners:
                        if waiting is None or time_to < stream_time:
                            add(p, key, join(value, None), timestamp)
                        else:
                            waiting.append(timestamp, is_left, key, value)
                            if waiting.next_close is not None:
                                close = self._close_time(timestamp, is_left)
                                waiting.next_close = min(waiting.next_close, close)
                    append(key, timestamp, value)
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if nulls:
            drops.record_drops(self.context.metrics, drops.NULL_KEY_OR_VALUE, nulls)
        self.emit(out.batch(batch))

    def _close_time(self, timestamp: int, is_left: bool) -> int:
        """A waiting record's window has closed once stream time is past this."""
        look_ahead = self.windows.after_ms if is_left else self.windows.before_ms
        return timestamp + look_ahead + self.windows.grace_ms

    def _emit_closed(self, out: EmittedRows, position: int, stream_time: int) -> None:
        """Emit (as made from the row at ``position``) and forget the waiting records whose
        window has closed, oldest first; the scan stops once both sides have reached a
        record whose window is still open.

        The store remembers (in memory, shared by both sides) the earliest time at which a
        record still waiting can close, so that most rows need no scan at all."""
        waiting = self.waiting
        assert waiting is not None
        if waiting.next_close is not None and stream_time <= waiting.next_close:
            return
        closed = []
        open_until: dict[bool, int] = {}  # per side: close time of its oldest open record
        for entry in waiting.scan():
            if len(open_until) == 2:
                break
            if entry.is_left in open_until:
                continue
            close = self._close_time(entry.timestamp, entry.is_left)
            if close >= stream_time:
                open_until[entry.is_left] = close
                continue
            closed.append(entry)
        waiting.next_close = min(open_until.values(), default=NEVER)
        joiner = self.joiner
        for entry in closed:
            for value in entry.values:
                joined = joiner(value, None) if entry.is_left else joiner(None, value)
                out.add(position, entry.key, joined, entry.timestamp)
            waiting.remove_entry(entry)


#: Which sides emit records without partner, per operation.
OUTER_SIDES = {"join": (False, False), "left_join": (True, False), "outer_join": (True, True)}


def join_streams(
    operation: str,
    left: KStream,
    right: Any,
    joiner: Any,
    windows: Any = None,
    stream_joined: Any = None,
) -> KStream:
    """Add a windowed ``operation`` (a key of ``OUTER_SIDES``) of ``left`` and ``right`` to
    the topology; the joined stream."""
    from streamtide.dsl.kstream import KStream

    left_outer, right_outer = OUTER_SIDES[operation]
    if not isinstance(right, KStream) or right.builder is not left.builder:
        raise TopologyError(f"{operation}() needs a KStream of the same StreamsBuilder")
    ensure_callable(joiner, f"{operation} joiner")
    if not isinstance(windows, JoinWindows):
        raise TypeError(
            f"{operation}() of two streams needs JoinWindows (e.g. "
            f"JoinWindows.of_time_difference_with_no_grace(...)), got {windows!r}"
        )
    joined = stream_joined if stream_joined is not None else StreamJoined()
    if not isinstance(joined, StreamJoined):
        raise TypeError(f"{operation}() stream_joined must be a StreamJoined, got {joined!r}")
    builder = left.builder
    key_serde = joined.key_serde or left.key_serde or right.key_serde
    this_values = joined.value_serde or left.value_serde
    other_values = joined.other_value_serde or right.value_serde

    base = joined.name or builder.new_name("KSTREAM-JOIN-")
    left = left.repartitioned_if_required(f"{base}-left", key_serde, this_values)
    right = right.repartitioned_if_required(f"{base}-right", key_serde, other_values)

    if joined.name is not None:
        this_name, other_name = f"{joined.name}-this-join", f"{joined.name}-other-join"
        merge_name = f"{joined.name}-merge"
    else:
        this_name = builder.new_name("KSTREAM-OUTERTHIS-" if left_outer else "KSTREAM-JOINTHIS-")
        other_name = builder.new_name(
            "KSTREAM-OUTEROTHER-" if right_outer else "KSTREAM-JOINOTHER-"
        )
        merge_name = builder.new_name("KSTREAM-MERGE-")
    if joined.store_name is not None:
        this_store = f"{joined.store_name}-this-join-store"
        other_store = f"{joined.store_name}-other-join-store"
        outer_store = f"{joined.store_name}-outer-shared-join-store"
    else:
        this_store, other_store = f"{this_name}-store", f"{other_name}-store"
        outer_store = builder.new_name("KSTREAM-OUTERSHARED-") + "-store"
    has_outer = left_outer or right_outer

    def side(is_left: bool) -> Callable[[], ColumnOperator]:
        return lambda: StreamStreamJoinOperator(
            is_left=is_left,
            own_store=this_store if is_left else other_store,
            other_store=other_store if is_left else this_store,
            outer_store=outer_store if has_outer else None,
            windows=windows,
            joiner=joiner,
            outer=left_outer if is_left else right_outer,
        )

    topology = builder.topology
    topology.add_processor(this_name, side(True), left.node)
    topology.add_processor(other_name, side(False), right.node)
    # a record is kept while some later record of the other side may still join it
    size = max(windows.size_ms, 1)
    for store_name, values in ((this_store, this_values), (other_store, other_values)):
        supplier = KeyValueBytesStoreSupplier(store_name, DEFAULT_STORE_TYPE)
        store = JoinWindowStoreBuilder(
            supplier, size, windows.retention_ms, key_serde, values, joined.logging_enabled
        )
        topology.add_state_store(store, this_name, other_name)
    if has_outer:
        supplier = KeyValueBytesStoreSupplier(outer_store, DEFAULT_STORE_TYPE)
        waiting = OuterJoinStoreBuilder(
            supplier, key_serde, this_values, other_values, joined.logging_enabled
        )
        topology.add_state_store(waiting, this_name, other_name)
    topology.add_processor(merge_name, PassThroughOperator, this_name, other_name)
    topology.add_copartition_group(
        topology.upstream_source_topics(left.node) | topology.upstream_source_topics(right.node),
        f"{operation} {this_name}",
    )
    return KStream(builder, merge_name, key_serde, None)
