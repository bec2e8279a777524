"""Stateless stream operators: one record in, zero or more out, in order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamtide import RecordContext
from tests.reference.node import Node
from tests.reference.records import Rec

if TYPE_CHECKING:
    from tests.reference.task import Task


class PassThrough(Node):
    """Sources, branches, merges and to_stream's record form: forward as is."""

    def process(self, rec: Rec, task: Task, port: int) -> None:
        self.forward(rec, task)


class Filter(Node):
    def process(self, rec: Rec, task: Task, port: int) -> None:
        if bool(self.args["predicate"](rec.key, rec.value)) != self.args["negate"]:
            self.forward(rec, task)


class Map(Node):
    def process(self, rec: Rec, task: Task, port: int) -> None:
        key, value = self.args["mapper"](rec.key, rec.value)
        self.forward(rec.but(key=key, value=value), task)


class MapValues(Node):
    def process(self, rec: Rec, task: Task, port: int) -> None:
        self.forward(rec.but(value=self.args["mapper"](rec.value)), task)


class FlatMap(Node):
    def process(self, rec: Rec, task: Task, port: int) -> None:
        for key, value in self.args["mapper"](rec.key, rec.value):
            self.forward(rec.but(key=key, value=value), task)


class FlatMapValues(Node):
    def process(self, rec: Rec, task: Task, port: int) -> None:
        for value in self.args["mapper"](rec.value):
            self.forward(rec.but(value=value), task)


class SelectKey(Node):
    def process(self, rec: Rec, task: Task, port: int) -> None:
        self.forward(rec.but(key=self.args["mapper"](rec.key, rec.value)), task)


class Peek(Node):
    """``peek`` and ``foreach``: note (tag, key, value) in the run's side-effect log."""

    def process(self, rec: Rec, task: Task, port: int) -> None:
        task.effects.append((self.args["tag"], rec.key, rec.value))
        self.forward(rec, task)


class Split(Node):
    """Each record goes to the first branch whose predicate holds, else to the default
    branch (if any). Children are the branch nodes; ``index`` None marks the default."""

    def process(self, rec: Rec, task: Task, port: int) -> None:
        for index, predicate in enumerate(self.args["predicates"]):
            if predicate(rec.key, rec.value):
                self._to_branch(index, rec, task)
                return
        self._to_branch(None, rec, task)

    def _to_branch(self, index: int | None, rec: Rec, task: Task) -> None:
        for child, port in self.children:
            if child.args.get("index", "none") == index:
                child.process(rec, task, port)


class Sink(Node):
    """``to(topic)``, and the sink half of a repartition: the runner places the record."""

    def process(self, rec: Rec, task: Task, port: int) -> None:
        if self.args.get("drop_null_keys") and rec.key is None:
            return
        task.write(self.args["sink_topic"], rec, self.args)


class ChosenTopicSink(Node):
    """``to(extractor)``: the topic the extractor names for the record, given the input
    record's context (Kafka's ``TopicNameExtractor``)."""

    def process(self, rec: Rec, task: Task, port: int) -> None:
        context = RecordContext(rec.topic, rec.partition or 0, rec.offset, rec.ts, rec.headers)
        task.write(self.args["extractor"](rec.key, rec.value, context), rec, self.args)


def make_stateless(op: str, args: dict[str, Any]) -> Node:
    """The node of a stateless plan step."""
    classes: dict[str, Any] = {
        "filter": lambda: Filter(predicate=args["predicate"], negate=False),
        "filter_not": lambda: Filter(predicate=args["predicate"], negate=True),
        "map": lambda: Map(mapper=args["mapper"]),
        "map_values": lambda: MapValues(mapper=args["mapper"]),
        "flat_map": lambda: FlatMap(mapper=args["mapper"]),
        "flat_map_values": lambda: FlatMapValues(mapper=args["mapper"]),
        "select_key": lambda: SelectKey(mapper=args["mapper"]),
        "peek": lambda: Peek(tag=args["tag"]),
        "foreach": lambda: Peek(tag=args["tag"]),
        "merge": lambda: PassThrough(),
        "branch": lambda: PassThrough(index=args["index"]),
    }
    return classes[op]()
