"""From a ``Plan`` to the interpreter's graph: nodes, the repartition topics between them,
and the sub-topologies (groups) that tasks run.

Tables send old values where Kafka's ``enableSendingOldValues`` rules say (see
``enable_old_values``): a filter asks its parent when it is built, a ``group_by`` and the
outer sides of table-table joins force it.

Repartitions are where the semantics put them: ``repartition()``; ``group_by``; a grouping,
a deduplication by key or a join after a key-changing operation (``map``, ``flat_map``,
``select_key``, ``process``); ``deduplicate`` (by the id); a table's ``group_by``. Grouping
and join repartitions drop records with a None key; the others carry them. A group is a set
of nodes connected other than through a repartition topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.reference import stateless
from tests.reference.aggregate import KeyValueAggregate
from tests.reference.dedup import Dedup, id_bytes
from tests.reference.plan import (
    Plan,
    SessionWindowSpec,
    SlidingWindowSpec,
    Step,
    TimeWindowSpec,
)
from tests.reference.processor_api import ProcessorNode
from tests.reference.sessions import SessionWindows, grace_of
from tests.reference.sliding import SlidingWindowAggregate
from tests.reference.stream_join import StreamStreamJoin
from tests.reference.suppress import Suppress
from tests.reference.table_joins import GlobalTableJoin, StreamTableJoin, TableTableJoin
from tests.reference.tables import (
    TableAggregate,
    TableFilter,
    TableMapValues,
    TableRegroup,
    TableSource,
    ToStream,
)
from tests.reference.time_windows import TimeWindowAggregate, TimeWindowDistinct

KEY_CHANGING = {"map", "flat_map", "select_key", "process"}
STATELESS = {
    "filter", "filter_not", "map", "map_values", "flat_map", "flat_map_values",
    "select_key", "peek", "foreach", "merge", "branch",
}  # fmt: skip


@dataclass
class GNode:
    id: int
    cls: Any
    args: dict[str, Any]
    parents: list[int] = field(default_factory=list)  # port = index
    topic: str | None = None  # a source: the topic it reads
    links: list[int] = field(default_factory=list)  # nodes looked up in the same task


@dataclass
class Graph:
    nodes: list[GNode] = field(default_factory=list)
    internal: set[str] = field(default_factory=set)
    global_tables: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # topic ->
    #   (store, key serde, value serde)
    group_of: dict[int, int] = field(default_factory=dict)
    groups: list[list[int]] = field(default_factory=list)  # in run order

    def sources(self, group: int) -> list[GNode]:
        return [self.nodes[i] for i in self.groups[group] if self.nodes[i].topic is not None]


class _Compiler:
    def __init__(self, plan: Plan, caching: bool) -> None:
        self.plan, self.caching = plan, caching
        self.graph = Graph()
        self.out: dict[int, int] = {}  # step -> node carrying its records
        self.key_changed: dict[int, bool] = {}
        self.key_serde: dict[int, str] = {}
        self.value_serde: dict[int, str] = {}
        self.marks: dict[int, dict[str, Any]] = {}  # grouped/windowed steps

    def add(self, cls: Any, parents: list[int] = (), topic: str | None = None, **args: Any) -> int:  # type: ignore[assignment]
        node = GNode(len(self.graph.nodes), cls, args, list(parents), topic)
        self.graph.nodes.append(node)
        return node.id

    def repartition(self, upstream: int, topic: str, drop_null: bool, key: str, value: str,
                    by_id: Any = None) -> int:  # fmt: skip
        """A sink into the internal ``topic`` and the source that reads it back."""
        self.graph.internal.add(topic)
        self.add(
            stateless.Sink,
            [upstream],
            sink_topic=topic,
            key=key,
            value=value,
            drop_null_keys=drop_null,
            partition_by=by_id,
        )
        return self.add(stateless.PassThrough, topic=topic)

    def input_of(self, step: Step, index: int = 0) -> int:
        return self.out[step.inputs[index]]

    def step(self, step: Step) -> None:
        op, a = step.op, step.args
        first = step.inputs[0] if step.inputs else None
        inherit = self.key_changed.get(first, False) if first is not None else False
        self.key_changed[step.id] = inherit
        if first is not None:
            self.key_serde[step.id] = self.key_serde.get(first, "string")
            self.value_serde[step.id] = self.value_serde.get(first, "json")
        if op == "stream":
            self.out[step.id] = self.add(stateless.PassThrough, topic=a["topic"])
            self.key_serde[step.id], self.value_serde[step.id] = a["key"], a["value"]
        elif op == "table":
            source = self.add(stateless.PassThrough, topic=a["topic"])
            self.out[step.id] = self.add(TableSource, [source], store=a["store"], send_old=False)
            self.key_serde[step.id], self.value_serde[step.id] = a["key"], a["value"]
        elif op == "global_table":
            self.graph.global_tables[a["topic"]] = (a["store"], a["key"], a["value"])
            self.marks[step.id] = {"global": a["store"]}
        elif op in STATELESS:
            parents = [self.out[i] for i in step.inputs]
            node = stateless.make_stateless(op, a)
            self.out[step.id] = self.add(type(node), parents, **node.args)
            if op in KEY_CHANGING:
                self.key_changed[step.id] = True
            if op == "merge":
                self.key_changed[step.id] = any(self.key_changed[i] for i in step.inputs)
        elif op == "split":
            predicates = [s.args["predicate"] for s in self.plan.steps if s.op == "branch" and s.inputs == (step.id,) and s.args["index"] is not None]
            self.out[step.id] = self.add(stateless.Split, [self.input_of(step)], predicates=predicates)
        elif op == "repartition":
            self.out[step.id] = self.repartition(
                self.input_of(step), f"{a['name']}-repartition", False, a["key"], a["value"]
            )
            self.key_changed[step.id] = False
        elif op == "to":
            self.add(stateless.Sink, [self.input_of(step)], sink_topic=a["topic"], key=a["key"], value=a["value"])
        elif op == "process":
            self.out[step.id] = self.add(
                ProcessorNode, [self.input_of(step)], supplier=a["supplier"], stores=a["stores"]
            )
            self.key_changed[step.id] = True
        elif op == "group_by_key":
            self.marks[step.id] = {"stream": self.input_of(step), "repartition": inherit, "value": a["value"]}
        elif op == "group_by":
            keyed = self.add(stateless.SelectKey, [self.input_of(step)], mapper=a["selector"])
            self.marks[step.id] = {"stream": keyed, "repartition": True, "value": a["value"]}
        elif op in ("count", "reduce", "aggregate"):
            source = self.grouped_source(step)
            self.out[step.id] = self.add(
                KeyValueAggregate, [source], kind=op, caching=self.caching, **a
            )
            self.key_changed[step.id] = False
        elif op == "windowed_by":
            self.marks[step.id] = {**self.marks[first], "windows": a["windows"], "final": False}
        elif op == "emit_final":
            self.marks[step.id] = {**self.marks[first], "final": True}
        elif op.startswith("window_"):
            self.windowed(step)
        elif op in ("dedup_key", "dedup_key_value"):
            source = self.input_of(step)
            if inherit:
                source = self.repartition(source, f"{a['name']}-repartition", False,
                                          self.key_serde[step.id], self.value_serde[step.id])  # fmt: skip
            mode = "key" if op == "dedup_key" else "key_value"
            self.out[step.id] = self.add(
                Dedup, [source], mode=mode, key_serde=self.key_serde[step.id], **a
            )
            self.key_changed[step.id] = False
        elif op == "dedup_id":
            selector = a["id_selector"]

            def by_id(rec: Any, selector: Any = selector) -> bytes | None:
                ident = selector(rec.key, rec.value)
                return None if ident is None else id_bytes(ident)

            source = self.repartition(self.input_of(step), f"{a['name']}-repartition", False,
                                      self.key_serde[step.id], self.value_serde[step.id], by_id)  # fmt: skip
            self.out[step.id] = self.add(Dedup, [source], mode="id", key_serde=self.key_serde[step.id], **a)
            self.key_changed[step.id] = True
        elif op == "stream_table_join":
            stream = self.maybe_repartition(step, 0, "join")
            table = self.input_of(step, 1)
            node = self.add(StreamTableJoin, [stream], joiner=a["joiner"], left=a["left"], table=table)
            self.graph.nodes[node].links.append(table)
            self.out[step.id] = node
            self.key_changed[step.id] = False
        elif op == "global_join":
            store = self.marks[step.inputs[1]]["global"]
            self.out[step.id] = self.add(
                GlobalTableJoin,
                [self.input_of(step)],
                joiner=a["joiner"],
                left=a["left"],
                key_selector=a["key_selector"],
                store=store,
            )
        elif op == "stream_join":
            left = self.maybe_repartition(step, 0, f"{a['name']}-left")
            right = self.maybe_repartition(step, 1, f"{a['name']}-right")
            self.out[step.id] = self.add(
                StreamStreamJoin, [left, right], joiner=a["joiner"], windows=a["windows"], kind=a["kind"]
            )
            self.key_changed[step.id] = False
        elif op == "table_filter":
            parent = self.input_of(step)
            self.out[step.id] = self.add(
                TableFilter, [parent], predicate=a["predicate"], negate=a["negate"],
                store=a["store"], send_old=self.enable_old_values(parent, force=False),
            )  # fmt: skip
        elif op == "table_map_values":
            self.out[step.id] = self.add(
                TableMapValues, [self.input_of(step)], mapper=a["mapper"], store=a["store"], send_old=False
            )
        elif op == "to_stream":
            self.out[step.id] = self.add(ToStream, [self.input_of(step)])
            self.key_changed[step.id] = False
            self.key_serde[step.id] = self.key_serde.get(first, "string")
        elif op == "suppress":
            self.out[step.id] = self.add(
                Suppress, [self.input_of(step)], spec=a["spec"], close_after=self.close_after(first)
            )
        elif op == "table_group_by":
            self.enable_old_values(self.input_of(step), force=True)
            regroup = self.add(TableRegroup, [self.input_of(step)], selector=a["selector"])
            self.marks[step.id] = {"stream": regroup, "repartition": True, "value": a["value"], "name": a["name"]}
        elif op in ("table_count", "table_reduce", "table_aggregate"):
            mark = self.marks[first]
            source = self.repartition(mark["stream"], f"{mark['name']}-repartition", True, "string", mark["value"])
            kind = op.removeprefix("table_")
            self.out[step.id] = self.add(TableAggregate, [source], kind=kind, **a)
        elif op == "table_join":
            left, right = self.input_of(step, 0), self.input_of(step, 1)
            if a["kind"] in ("left_join", "outer_join"):
                self.enable_old_values(left, force=True)
            if a["kind"] == "outer_join":
                self.enable_old_values(right, force=True)
            node = self.add(
                TableTableJoin, [left, right], joiner=a["joiner"], kind=a["kind"], sides=[left, right],
                store=a["store"],
            )  # fmt: skip
            self.graph.nodes[node].links += [left, right]
            self.out[step.id] = node
        else:
            raise ValueError(f"the interpreter has no operator {op!r}")
        self.windowed_spec_of(step)

    def enable_old_values(self, node_id: int, force: bool) -> bool:
        """Ask a table node to send old values (Kafka's ``enableSendingOldValues``): a
        materialized node can, and so can any node when ``force`` (it gets materialized);
        an unmaterialized filter or map_values can when its parent can; aggregations and
        joins always can. True when it now sends them."""
        node = self.graph.nodes[node_id]
        if "send_old" not in node.args:  # aggregations, joins: their stores give old values
            node.args["send_old"] = True
            for parent in node.parents if node.cls is Suppress else ():
                self.enable_old_values(parent, force)
            return True
        if node.args["send_old"]:
            return True
        if node.args.get("store") is not None or (force and node.cls is TableSource):
            node.args["send_old"] = True
        elif node.cls in (TableFilter, TableMapValues):
            node.args["send_old"] = self.enable_old_values(node.parents[0], force)
        return node.args["send_old"]

    def windowed_spec_of(self, step: Step) -> None:
        """Tables made by windowed aggregations remember their windows (for suppress)."""
        if step.op.startswith("window_"):
            self.marks.setdefault(step.id, {})["windows"] = self.marks[step.inputs[0]]["windows"]
        elif step.op in ("suppress", "table_filter", "table_map_values") and step.inputs[0] in self.marks:
            windows = self.marks[step.inputs[0]].get("windows")
            if windows is not None:
                self.marks.setdefault(step.id, {})["windows"] = windows

    def close_after(self, table_step: int) -> int | None:
        windows = self.marks.get(table_step, {}).get("windows")
        if isinstance(windows, TimeWindowSpec):
            return windows.grace
        if isinstance(windows, SlidingWindowSpec):
            return windows.grace
        if isinstance(windows, SessionWindowSpec):
            return windows.gap + grace_of(windows)
        return None

    def grouped_source(self, step: Step) -> int:
        mark = self.marks[step.inputs[0]]
        if not mark["repartition"]:
            return mark["stream"]
        name = f"{step.args['store']}-repartition"
        return self.repartition(mark["stream"], name, True, "string", mark["value"])

    def maybe_repartition(self, step: Step, index: int, name: str) -> int:
        upstream = self.input_of(step, index)
        if not self.key_changed.get(step.inputs[index], False):
            return upstream
        return self.repartition(upstream, f"{name}-repartition", True, "string",
                                self.value_serde.get(step.inputs[index], "json"))  # fmt: skip

    def windowed(self, step: Step) -> None:
        mark = self.marks[step.inputs[0]]
        windows, final = mark["windows"], mark["final"]
        source = self.grouped_source(step)
        kind = step.op.removeprefix("window_")
        args = dict(step.args, windows=windows, final=final, caching=self.caching)
        if kind == "distinct":
            cls = TimeWindowDistinct if isinstance(windows, TimeWindowSpec) else SessionWindows
            args.update(kind="count", distinct=True)
        else:
            args["kind"] = kind
            cls = {
                TimeWindowSpec: TimeWindowAggregate,
                SessionWindowSpec: SessionWindows,
                SlidingWindowSpec: SlidingWindowAggregate,
            }[type(windows)]
        self.out[step.id] = self.add(cls, [source], **args)
        self.key_changed[step.id] = False


def _groups(graph: Graph) -> None:
    """Connected components, not counting repartition topics; in dependency order."""
    parent = list(range(len(graph.nodes)))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for node in graph.nodes:
        for other in node.parents + node.links:
            parent[find(node.id)] = find(other)
    members: dict[int, list[int]] = {}
    for node in graph.nodes:
        members.setdefault(find(node.id), []).append(node.id)
    groups = sorted(members.values(), key=min)
    writes = [
        {graph.nodes[i].args.get("sink_topic") for i in g} & graph.internal for g in groups
    ]
    reads = [{graph.nodes[i].topic for i in g} & graph.internal for g in groups]
    ordered: list[int] = []
    while len(ordered) < len(groups):
        for index in range(len(groups)):
            if index in ordered:
                continue
            waits = any(reads[index] & writes[o] for o in range(len(groups)) if o not in ordered and o != index)
            if not waits:
                ordered.append(index)
                break
        else:
            raise ValueError("the plan's repartitions form a cycle")
    graph.groups = [groups[i] for i in ordered]
    for number, group in enumerate(graph.groups):
        for i in group:
            graph.group_of[i] = number


def compile_plan(plan: Plan, caching: bool = False) -> Graph:
    compiler = _Compiler(plan, caching)
    for step in plan.steps:
        compiler.step(step)
    _groups(compiler.graph)
    return compiler.graph
