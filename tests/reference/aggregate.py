"""Non-windowed ``count``/``reduce``/``aggregate`` of a grouped stream.

A record with a None key or value is dropped (``dropped-records``). A result's timestamp is
the larger of the record's and the key's previous result's (SEMANTICS 4b).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.reference.cache import RecordCache
from tests.reference.node import Node
from tests.reference.records import Rec
from tests.reference.serdes import round_trip

if TYPE_CHECKING:
    from tests.reference.task import Task


class Aggregator:
    """``kind``: count, reduce or aggregate; folds one value into an aggregate (None: none
    yet). Aggregates read back as their store's value serde writes them."""

    def __init__(self, kind: str, args: dict[str, Any]) -> None:
        self.kind, self.args = kind, args

    def initial(self) -> Any:
        return 0 if self.kind == "count" else self.args["initializer"]()

    def add(self, key: Any, value: Any, agg: Any) -> Any:
        if self.kind == "count":
            return (agg or 0) + 1
        if self.kind == "reduce":
            return value if agg is None else self.args["reducer"](agg, value)
        return self.args["aggregator"](key, value, self.initial() if agg is None else agg)

    def merge(self, key: Any, left: Any, right: Any) -> Any:
        """Two sessions' aggregates combined (count: sum, reduce: the reducer)."""
        if self.kind == "count":
            return left + right
        if self.kind == "reduce":
            return self.args["reducer"](left, right)
        return self.args["merger"](key, left, right)

    def stored(self, agg: Any) -> Any:
        return round_trip(agg, self.args.get("value", "json"))


class KeyValueAggregate(Node):
    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.fold = Aggregator(args["kind"], args)
        self.store: dict[Any, tuple[Any, int]] = {}
        self.cache = RecordCache(args["caching"])

    def process(self, rec: Rec, task: Task, port: int) -> None:
        if rec.key is None or rec.value is None:
            task.count("dropped-records")
            return
        old = self.store.get(rec.key)
        agg = self.fold.stored(self.fold.add(rec.key, rec.value, old and old[0]))
        ts = rec.ts if old is None else max(rec.ts, old[1])
        self.store[rec.key] = (agg, ts)
        self.cache.update(self, task, rec.but(value=agg, ts=ts))

    def flush(self, task: Task) -> None:
        self.cache.flush(self, task)

    def state(self, task: Task) -> dict[Any, Any]:
        return {key: agg for key, (agg, _) in self.store.items()}


class PortAggregators(Node):
    """``cogroup`` (KIP-150): each input port folds with its own aggregator
    (``args["aggregators"]``) into the one store of the aggregation it is mixed into
    (before it in the bases: by key, or per time, session or sliding window)."""

    fold: Aggregator

    def process(self, rec: Rec, task: Task, port: int) -> None:
        self.fold.args = {**self.args, "aggregator": self.args["aggregators"][port]}
        super().process(rec, task, port)


class CogroupAggregate(PortAggregators, KeyValueAggregate):
    """A plain ``cogroup``: one aggregate per key, one store and one cache."""
