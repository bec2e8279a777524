"""The operators of a foreign-key table-table join (KIP-213), one per Kafka processor:

- ``SubscriptionSendOperator`` (left table updates -> subscriptions keyed by foreign key;
  Kafka's SubscriptionSendProcessorSupplier),
- ``SubscriptionOperator`` (subscriptions -> the subscription store, then the answer from
  the foreign table; Kafka's SubscriptionReceiveProcessorSupplier and
  SubscriptionJoinProcessorSupplier in one node),
- ``ForeignTableJoinOperator`` (foreign table updates -> an answer to every subscriber of
  the key; Kafka's ForeignTableJoinProcessorSupplier),
- ``ResponseJoinOperator`` (answers -> joined values, stale ones dropped; Kafka's
  ResponseJoinProcessorSupplier).

Each takes its batch as columns; the subscription store is read once per distinct key a
batch touches and written back once (``dsl.fk_join`` builds the topology).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from streamtide.dsl.change import Change, as_change
from streamtide.dsl.fk_wire import (
    DELETE_KEY_AND_PROPAGATE,
    DELETE_KEY_NO_PROPAGATE,
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE,
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE,
    Response,
    Subscription,
    SubscriptionSerde,
    combined_key,
    combined_prefix,
    primary_key_bytes,
    value_hash,
)
from streamtide.dsl.join_lookup import view_lookup
from streamtide.dsl.table_view import TableView
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch, EmittedRows
from streamtide.processor.operator import ColumnOperator
from streamtide.serde import Serde
from streamtide.state.timestamped import decode, encode

_SUBSCRIPTIONS = SubscriptionSerde()
#: A subscription is never None: written, it is bytes; read back, a Subscription.
_write_subscription = cast(Callable[[Subscription], bytes], _SUBSCRIPTIONS.serialize)
_read_subscription = cast(Callable[[bytes], Subscription], _SUBSCRIPTIONS.deserialize)


def _serde(context: ProcessorContext, serde: Serde | None, key: bool) -> Serde:
    """``serde``, or the task's default key or value serde."""
    if serde is not None:
        return serde
    default: Serde = getattr(context, "default_key_serde" if key else "default_value_serde")
    return default


#: A serializer of values that are never None here (keys, foreign keys): it gives bytes.
KeyWriter = Callable[[Any], bytes]


def _key_writer(context: ProcessorContext, serde: Serde | None) -> KeyWriter:
    return cast(KeyWriter, _serde(context, serde, True).serialize)


class SubscriptionSendOperator(ColumnOperator):
    """Turns each update of the left table into subscriptions, so that every update of a
    row that existed before is answered for its new value (and so ends the row's result):

    - a row moving from one foreign key to another unsubscribes from the old one silently
      and subscribes to the new one, answered with None when it has no row;
    - a row whose foreign key is None subscribes to None: answered with None on this
      partition (it touches no store), making ``joiner(value, None)`` in a left join and a
      tombstone in an inner join;
    - a deleted row unsubscribes from its foreign key, answered with None (a tombstone);
    - a new row subscribes to its foreign key; an inner join's is answered only if the
      foreign row exists, and a new row without foreign key is dropped (counted).

    These are Kafka's rules (``leftJoinInstructions``, ``defaultJoinInstructions``) except
    where Kafka leaves a result that is no longer true, or one that depends on the order in
    which partitions answer: Kafka's inner join drops every update whose old or new foreign
    key is None (so a row whose foreign key becomes None keeps its last result, and never
    joins again), and its left join has the old key answer a move between two foreign keys
    too, with ``joiner(value, None)``, from another partition than the new key's answer,
    which it can overwrite for good when it arrives last."""

    def __init__(
        self,
        extractor: Callable[[Any], Any],
        left_join: bool,
        key_serde: Serde | None,
        value_serde: Serde | None,
        foreign_key_serde: Serde | None,
    ) -> None:
        self.extractor = extractor
        self.left_join = left_join
        self.key_serde, self.value_serde = key_serde, value_serde
        self.foreign_key_serde = foreign_key_serde

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.serialize_key = _key_writer(context, self.key_serde)
        self.serialize_value = _serde(context, self.value_serde, False).serialize
        self.serialize_foreign_key = _key_writer(context, self.foreign_key_serde)

    def process_batch(self, batch: ColumnBatch) -> None:
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        extract, left_join = self.extractor, self.left_join
        serialize_fk = self.serialize_foreign_key
        partition = batch.partition
        out = EmittedRows()
        dropped = 0
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key = keys[p]
                    change = values[p]
                    if change.__class__ is not Change:
                        change = as_change(change)
                    new, old = change
                    if key is None or (new is None and old is None):
                        continue
                    sends: list[tuple[Any, int]] = []
                    if old is not None:
                        old_fk = extract(old)
                        new_fk = None if new is None else extract(new)
                        if left_join:
                            if old_fk is not None and serialize_fk(new_fk) != serialize_fk(old_fk):
                                # answered only without a new foreign key (see the docstring)
                                moved = DELETE_KEY_AND_PROPAGATE
                                if new_fk is not None:
                                    moved = DELETE_KEY_NO_PROPAGATE
                                sends.append((old_fk, moved))
                            sends.append((new_fk, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE))
                        elif new is None:
                            if old_fk is None:  # answered on this partition: a tombstone
                                sends.append((None, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE))
                            else:
                                sends.append((old_fk, DELETE_KEY_AND_PROPAGATE))
                        else:
                            if old_fk is not None and serialize_fk(new_fk) != serialize_fk(old_fk):
                                sends.append((old_fk, DELETE_KEY_NO_PROPAGATE))
                            sends.append((new_fk, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE))
                    else:
                        new_fk = extract(new)
                        if left_join:
                            sends.append((new_fk, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE))
                        elif new_fk is None:
                            dropped += 1
                            continue
                        else:
                            sends.append((new_fk, PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE))
                    hashed = None if new is None else value_hash(self.serialize_value(new))
                    primary = self.serialize_key(key)
                    for foreign_key, instruction in sends:
                        subscription = Subscription(hashed, instruction, primary, partition)
                        out.add(p, foreign_key, subscription, timestamps[p])
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if dropped:
            drops.record_drops(self.context.metrics, drops.NULL_KEY_OR_VALUE, dropped)
        self.emit(out.batch(batch))


class SubscriptionOperator(ColumnOperator):
    """Keeps the subscription store (keyed by foreign key and primary key, each subscription
    with its timestamp) and answers each subscription from the foreign table: its value and
    the larger of both timestamps, or None where the instruction asks for an answer anyway.
    A subscription with a None foreign key (a left join's) touches no store."""

    def __init__(
        self,
        store_name: str,
        foreign: TableView,
        key_serde: Serde | None,
        foreign_key_serde: Serde | None,
    ) -> None:
        self.store_name = store_name
        self.foreign = foreign
        self.key_serde = key_serde
        self.foreign_key_serde = foreign_key_serde

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name).inner
        self.serialize_foreign_key = _key_writer(context, self.foreign_key_serde)
        self.deserialize_key = _serde(context, self.key_serde, True).deserialize
        self.stored, self.lookup = view_lookup(context, self.foreign)

    def _foreign_values(self, batch: ColumnBatch) -> dict[int, tuple[Any, int]]:
        """The foreign value and timestamp of each row whose foreign key has one."""
        found: dict[int, tuple[Any, int]] = {}
        if self.stored is not None:
            kept, entries = self.stored.read_rows(self, batch, batch.keys)
            kept_entries = [(p, e) for p, e in zip(kept, entries) if e is not None]
            positions, values = self.stored.values(
                self, batch, [p for p, _ in kept_entries], [e for _, e in kept_entries]
            )
            stamps = {p: e[1] for p, e in kept_entries}
            return {p: (v, stamps[p]) for p, v in zip(positions, values)}
        lookup = self.lookup
        assert lookup is not None
        for p, key in enumerate(batch.keys):
            if key is not None:
                entry = lookup(key)
                if entry is not None and entry.value is not None:
                    found[p] = (entry.value, entry.timestamp)
        return found

    def process_batch(self, batch: ColumnBatch) -> None:
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        written: dict[bytes, bytes | None] = {}
        store, serialize_fk = self.store, self.serialize_foreign_key
        foreign = self._foreign_values(batch)
        out = EmittedRows()
        dropped = 0
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key, subscription = keys[p], values[p]
                    instruction = subscription.instruction
                    if key is None:
                        if instruction != PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
                            dropped += 1
                            continue
                    else:
                        store_key = combined_key(serialize_fk(key), subscription.primary_key)
                        if instruction in (DELETE_KEY_AND_PROPAGATE, DELETE_KEY_NO_PROPAGATE):
                            written[store_key] = None
                        else:
                            raw = _write_subscription(subscription)
                            written[store_key] = encode(raw, timestamps[p])
                    if instruction == DELETE_KEY_NO_PROPAGATE:
                        continue
                    value_and_time = foreign.get(p)
                    if value_and_time is None:
                        if instruction == PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE:
                            continue
                        foreign_value, timestamp = None, timestamps[p]
                    else:
                        foreign_value = value_and_time[0]
                        timestamp = max(timestamps[p], value_and_time[1])
                    if instruction == DELETE_KEY_AND_PROPAGATE:
                        foreign_value = None
                    response = Response(
                        subscription.value_hash, foreign_value, subscription.primary_partition
                    )
                    out.add(p, self.deserialize_key(subscription.primary_key), response, timestamp)
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if written:
            store.put_all(list(written.items()))
        if dropped:
            drops.record_drops(self.context.metrics, drops.NULL_KEY_OR_VALUE, dropped)
        self.emit(out.batch(batch))


class ForeignTableJoinOperator(ColumnOperator):
    """Answers every subscriber of an updated foreign key with the new foreign value (None
    for a deletion), at the update's timestamp, in the order of the subscribers' keys."""

    def __init__(
        self, store_name: str, key_serde: Serde | None, foreign_key_serde: Serde | None
    ) -> None:
        self.store_name = store_name
        self.key_serde = key_serde
        self.foreign_key_serde = foreign_key_serde

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name).inner
        self.serialize_foreign_key = _key_writer(context, self.foreign_key_serde)
        self.deserialize_key = _serde(context, self.key_serde, True).deserialize

    def process_batch(self, batch: ColumnBatch) -> None:
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        subscribers: dict[bytes, list[tuple[Any, Subscription]]] = {}
        out = EmittedRows()
        dropped = 0
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key = keys[p]
                    if key is None:
                        dropped += 1
                        continue
                    change = values[p]
                    new = change.new if change.__class__ is Change else as_change(change).new
                    prefix = combined_prefix(self.serialize_foreign_key(key))
                    found = subscribers.get(prefix)
                    if found is None:
                        found = subscribers[prefix] = self._subscribers(prefix)
                    for primary_key, subscription in found:
                        response = Response(
                            subscription.value_hash, new, subscription.primary_partition
                        )
                        out.add(p, primary_key, response, timestamps[p])
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if dropped:
            drops.record_drops(self.context.metrics, drops.NULL_KEY_OR_VALUE, dropped)
        self.emit(out.batch(batch))

    def _subscribers(self, prefix: bytes) -> list[tuple[Any, Subscription]]:
        """The subscriptions of one foreign key, by their primary keys' bytes."""
        deserialize_key = self.deserialize_key
        return [
            (
                deserialize_key(primary_key_bytes(store_key)),
                _read_subscription(decode(raw)[0]),
            )
            for store_key, raw in self.store.prefix_scan(prefix)
        ]


class ResponseJoinOperator(ColumnOperator):
    """Joins each answer with the left row's current value, or drops it as stale when the
    left value's hash is not the one subscribed (the row changed since). A None foreign
    value makes a tombstone, except in a left join while the row exists:
    ``joiner(value, None)``."""

    def __init__(
        self,
        left: TableView,
        value_serde: Serde | None,
        joiner: Callable[[Any, Any], Any],
        left_join: bool,
    ) -> None:
        self.left = left
        self.value_serde = value_serde
        self.joiner = joiner
        self.left_join = left_join

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.serialize_value = _serde(context, self.value_serde, False).serialize
        self.get = self.left.make(context)

    def process_batch(self, batch: ColumnBatch) -> None:
        keys, values = batch.keys, batch.values
        get, joiner, left_join = self.get, self.joiner, self.left_join
        serialize_value = self.serialize_value
        positions: list[int] = []
        results: list[Any] = []
        stale = 0
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    response = values[p]
                    entry = get(keys[p])
                    current = None if entry is None else entry.value
                    current_hash = None if current is None else value_hash(serialize_value(current))
                    if current_hash != response.value_hash:
                        stale += 1
                        continue
                    foreign = response.foreign_value
                    if foreign is None and (not left_join or current is None):
                        result = None
                    else:
                        result = joiner(current, foreign)
                    positions.append(p)
                    results.append(result)
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if stale:
            self.context.metrics.increment(drops.DROPPED, stale)
        self.emit(batch.derive(positions, [keys[p] for p in positions], results))
