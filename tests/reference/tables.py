"""Tables: source tables, ``filter``/``map_values`` on tables, ``to_stream``, and the
re-grouping of a table (``group_by`` + ``count``/``reduce``/``aggregate``).

Every table node here keeps its view (key -> (value, timestamp)) so that joins can look
keys up. Updates flow as ``Change(new, old)``; a node sends the old value only when a
downstream operator needs it (``send_old``: a ``group_by`` or a table-table join below),
and that changes what a filter forwards (Kafka's ``KTableFilter``): without old values a
failing update is forwarded as a tombstone; with them, a tombstone goes out only for a key
that passed before, and nothing when neither the new nor the old value passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.reference.node import Node
from tests.reference.records import Change, Rec
from tests.reference.serdes import key_bytes, round_trip

if TYPE_CHECKING:
    from tests.reference.task import Task


class TableNode(Node):
    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.view: dict[Any, tuple[Any, int]] = {}

    def lookup(self, key: Any) -> tuple[Any, int] | None:
        return self.view.get(key)

    def send(self, rec: Rec, task: Task, new: Any, old: Any) -> None:
        if new is None:
            self.view.pop(rec.key, None)
        else:
            self.view[rec.key] = (new, rec.ts)
        self.forward(rec.but(value=Change(new, old if self.args["send_old"] else None)), task)

    def state(self, task: Task) -> dict[Any, Any] | None:
        if self.args.get("store") is None:
            return None
        return {key: value for key, (value, _) in self.view.items()}


class TableSource(TableNode):
    """``builder.table(topic)``: records with a None key are dropped; a None value deletes."""

    def process(self, rec: Rec, task: Task, port: int) -> None:
        if rec.key is None:
            task.count("dropped-records")
            return
        old = self.lookup(rec.key)
        self.send(rec, task, rec.value, old and old[0])


class TableFilter(TableNode):
    def passes(self, key: Any, value: Any) -> bool:
        return value is not None and bool(self.args["predicate"](key, value)) != self.args["negate"]

    def process(self, rec: Rec, task: Task, port: int) -> None:
        new = rec.value.new if self.passes(rec.key, rec.value.new) else None
        old = self.lookup(rec.key)
        old_value = old and old[0]
        if self.args["send_old"] and new is None and old_value is None:
            return
        self.send(rec, task, new, old_value)


class TableMapValues(TableNode):
    def process(self, rec: Rec, task: Task, port: int) -> None:
        new = None if rec.value.new is None else self.args["mapper"](rec.value.new)
        old = self.lookup(rec.key)
        self.send(rec, task, new, old and old[0])


class ToStream(Node):
    def process(self, rec: Rec, task: Task, port: int) -> None:
        self.forward(rec.but(value=rec.value.new), task)


class TableRegroup(Node):
    """``group_by(selector)``: the old value leaves its group, the new one joins its group,
    as one update when the group does not change (then through a repartition topic)."""

    def select(self, key: Any, value: Any) -> tuple[Any, Any] | None:
        if value is None:
            return None
        pair = self.args["selector"](key, value)
        if pair is None or pair[0] is None or pair[1] is None:
            return None
        return pair[0], pair[1]

    def process(self, rec: Rec, task: Task, port: int) -> None:
        new, old = self.select(rec.key, rec.value.new), self.select(rec.key, rec.value.old)
        if new and old and key_bytes(new[0]) == key_bytes(old[0]):
            self.forward(rec.but(key=new[0], value=Change(new[1], old[1])), task)
            return
        if old:
            self.forward(rec.but(key=old[0], value=Change(None, old[1])), task)
        if new:
            self.forward(rec.but(key=new[0], value=Change(new[1], None)), task)


class TableAggregate(Node):
    """``count``/``reduce``/``aggregate`` of a re-grouped table (Kafka's ``KTableAggregate``
    and ``KTableReduce``): subtract the old value, then add the new one."""

    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.store: dict[Any, tuple[Any, int]] = {}
        self.kind = args["kind"]

    def process(self, rec: Rec, task: Task, port: int) -> None:
        if rec.key is None:
            task.count("dropped-records")
            return
        change, found = rec.value, self.store.get(rec.key)
        agg = found and found[0]
        ts = rec.ts if found is None else max(rec.ts, found[1])
        if change.old is not None and agg is not None:
            agg = self.subtract(rec.key, change.old, agg)
        if change.new is not None:
            agg = self.add(rec.key, change.new, agg)
        if agg is None:
            self.store.pop(rec.key, None)
        else:
            agg = round_trip(agg, self.args.get("value", "json"))
            self.store[rec.key] = (agg, ts)
        self.forward(rec.but(value=Change(agg), ts=ts), task)

    def add(self, key: Any, value: Any, agg: Any) -> Any:
        if self.kind == "count":
            return (0 if agg is None else agg) + 1
        if self.kind == "reduce":
            return value if agg is None else self.args["adder"](agg, value)
        return self.args["adder"](key, value, self.args["initializer"]() if agg is None else agg)

    def subtract(self, key: Any, value: Any, agg: Any) -> Any:
        if self.kind == "count":
            return agg - 1
        if self.kind == "reduce":
            return self.args["subtractor"](agg, value)
        return self.args["subtractor"](key, value, agg)

    def state(self, task: Task) -> dict[Any, Any]:
        return {key: agg for key, (agg, _) in self.store.items()}
