"""Joins with tables (SEMANTICS 9, Kafka 3.7+): stream-table, stream-global table and
table-table joins.

- stream-table: each stream record sees the table as it stands (a versioned table: as it
  stood at the record's timestamp, KIP-960); the result keeps the
  stream record's key and timestamp. A None value is dropped; a None key is dropped by
  ``join`` and joined with None by ``left_join`` (KIP-962). Table updates emit nothing.
- global table: the lookup key is ``key_selector(key, value)``; a None value or a None
  lookup key is dropped in both kinds.
- table-table: every update of either side looks its key up in the other side. The result
  timestamp is the larger of the update's and the other side's value's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.reference.node import Node
from tests.reference.records import Change, Rec

if TYPE_CHECKING:
    from tests.reference.task import Task


class StreamTableJoin(Node):
    """``args``: joiner, left, table (the id of the table node of the same task)."""

    def process(self, rec: Rec, task: Task, port: int) -> None:
        joiner, left = self.args["joiner"], self.args["left"]
        if rec.value is None or (rec.key is None and not left):
            task.count("dropped-records")
            return
        table = task.nodes[self.args["table"]]
        as_of = getattr(table, "lookup_as_of", None)  # a versioned table: as of the record
        if rec.key is None:
            found = None
        elif as_of is not None:
            found = as_of(rec.key, rec.ts)
        else:
            found = table.lookup(rec.key)
        if found is not None:
            self.forward(rec.but(value=joiner(rec.value, found[0])), task)
        elif left:
            self.forward(rec.but(value=joiner(rec.value, None)), task)


class GlobalTableJoin(Node):
    """``args``: joiner, left, key_selector, store (the global table's name)."""

    def process(self, rec: Rec, task: Task, port: int) -> None:
        if rec.value is None:
            task.count("dropped-records")
            return
        lookup = self.args["key_selector"](rec.key, rec.value)
        if lookup is None:
            task.count("dropped-records")
            return
        found = task.run.global_tables[self.args["store"]].get(lookup)
        if found is not None or self.args["left"]:
            self.forward(rec.but(value=self.args["joiner"](rec.value, found)), task)


class TableTableJoin(Node):
    """``args``: joiner, kind, sides (ids of the left and right table nodes). Port 0 brings
    updates of the left table, port 1 of the right one."""

    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.view: dict[Any, tuple[Any, int]] = {}

    def process(self, rec: Rec, task: Task, port: int) -> None:
        if rec.key is None:
            return
        kind, joiner = self.args["kind"], self.args["joiner"]
        other = task.nodes[self.args["sides"][1 - port]].lookup(rec.key)
        other_value = other and other[0]
        change: Change = rec.value
        ts = rec.ts if other is None else max(rec.ts, other[1])

        def joined(this: Any) -> Any:
            return joiner(this, other_value) if port == 0 else joiner(other_value, this)

        if kind == "join" or (kind == "left_join" and port == 1):
            if other is None:
                return
            new = None if change.new is None and kind == "join" else joined(change.new)
        elif kind == "left_join":  # the left side of a left join
            if other is None and change.new is None and change.old is None:
                return
            new = None if change.new is None else joined(change.new)
        else:  # either side of an outer join
            if other is None and change.new is None and change.old is None:
                return
            new = joined(change.new) if (other is not None or change.new is not None) else None
        if new is None:
            self.view.pop(rec.key, None)
        else:
            self.view[rec.key] = (new, ts)
        self.forward(rec.but(value=Change(new), ts=ts), task)

    def lookup(self, key: Any) -> tuple[Any, int] | None:
        return self.view.get(key)

    def state(self, task: Task) -> dict[Any, Any] | None:
        if self.args.get("store") is None:
            return None
        return {key: value for key, (value, _) in self.view.items()}
