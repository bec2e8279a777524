"""From a ``Plan`` to the interpreter's ``Graph``, step by step in plan order.

Repartitions are where the semantics put them: ``repartition()``; ``group_by``; a grouping,
a deduplication by key, ``to_table`` or a join after a key-changing operation (``map``,
``flat_map``, ``select_key``, ``process``); ``deduplicate`` (by the id); a table's
``group_by``. Grouping, ``to_table`` and join repartitions drop records with a None key; the
others carry them.

Tables send old values where Kafka's ``enableSendingOldValues`` rules say (see
``enable_old_values``): a filter and a suppress ask their parent when they are built; a
``group_by`` and the outer sides of table-table joins force it.
"""

from __future__ import annotations

from typing import Any

from tests.reference import stateless
from tests.reference.aggregate import CogroupAggregate, KeyValueAggregate, PortAggregators
from tests.reference.dedup import Dedup, id_bytes
from tests.reference.fk_join import FkForeignUpdate, FkResolve, FkSubscribe, FkSubscriptions
from tests.reference.graph import Graph
from tests.reference.plan import Plan, SessionWindowSpec, SlidingWindowSpec, Step, TimeWindowSpec
from tests.reference.processor_api import FixedKeyProcessorNode, ProcessorNode
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
from tests.reference.versioned import VersionedTableSource

KEY_CHANGING = {"map", "flat_map", "select_key", "process", "dedup_id"}
STATELESS = {
    "filter", "filter_not", "map", "map_values", "flat_map", "flat_map_values",
    "select_key", "peek", "foreach", "merge", "branch",
}  # fmt: skip
WINDOWED = {
    TimeWindowSpec: TimeWindowAggregate,
    SessionWindowSpec: SessionWindows,
    SlidingWindowSpec: SlidingWindowAggregate,
}


class CogroupTimeWindows(PortAggregators, TimeWindowAggregate):
    """A time-windowed ``cogroup``."""


class CogroupSessionWindows(PortAggregators, SessionWindows):
    """A session-windowed ``cogroup`` (sessions merged with its merger)."""


class CogroupSlidingWindows(PortAggregators, SlidingWindowAggregate):
    """A sliding-windowed ``cogroup``."""


COGROUPED_WINDOWED = {
    TimeWindowSpec: CogroupTimeWindows,
    SessionWindowSpec: CogroupSessionWindows,
    SlidingWindowSpec: CogroupSlidingWindows,
}


class Compiler:
    def __init__(self, plan: Plan, caching: bool) -> None:
        self.plan, self.caching = plan, caching
        self.graph = Graph()
        self.out: dict[int, int] = {}  # step -> the node carrying its records
        self.key_changed: dict[int, bool] = {}  # step -> a key-changing operation came before
        self.marks: dict[int, dict[str, Any]] = {}  # grouping/windowing steps: what they set

    def compile(self) -> Graph:
        for step in self.plan.steps:
            inherited = bool(step.inputs) and self.key_changed.get(step.inputs[0], False)
            self.key_changed[step.id] = inherited or step.op in KEY_CHANGING
            handler = getattr(self, f"_{step.op}", None)
            if handler is None and step.op in STATELESS:
                handler = self._stateless
            if handler is None:
                raise ValueError(f"the interpreter has no operator {step.op!r}")
            handler(step, step.args)
        self.graph.form_groups()
        return self.graph

    # ---- helpers ---------------------------------------------------------------------------

    def add(self, step: Step, cls: Any, parents: list[int], **args: Any) -> int:
        self.out[step.id] = self.graph.add(cls, parents, **args)
        return self.out[step.id]

    def input_of(self, step: Step, index: int = 0) -> int:
        return self.out[step.inputs[index]]

    def repartition(self, upstream: int, topic: str, drop_null: bool, by_id: Any = None) -> int:
        """A sink into the internal ``topic`` and the source that reads it back."""
        self.graph.internal.add(topic)
        self.graph.add(
            stateless.Sink,
            [upstream],
            sink_topic=topic,
            key="string",
            value="json",
            drop_null_keys=drop_null,
            partition_by=by_id,
        )
        return self.graph.add(stateless.PassThrough, [], topic=topic)

    def by_key(self, step: Step, index: int, name: str, drop_null: bool = True) -> int:
        """Input ``index`` of ``step``, repartitioned by key if its key was changed."""
        upstream = self.input_of(step, index)
        if not self.key_changed[step.inputs[index]]:
            return upstream
        return self.repartition(upstream, f"{name}-repartition", drop_null)

    def grouped_source(self, step: Step) -> int:
        mark = self.marks[step.inputs[0]]
        if not mark["repartition"]:
            return mark["stream"]
        return self.repartition(mark["stream"], f"{step.args['store']}-repartition", True)

    def enable_old_values(self, node_id: int, force: bool) -> bool:
        """Ask a table node to send old values (Kafka's ``enableSendingOldValues``): a
        materialized node can, and so can a source when ``force`` (it gets materialized);
        an unmaterialized filter or map_values can when its parent can; aggregations and
        joins always can. True when it now sends them."""
        node = self.graph.nodes[node_id]
        if node.cls is Suppress:  # passes old values on when its parent sends them
            node.args["send_old"] = self.enable_old_values(node.parents[0], force)
            return node.args["send_old"]
        if "send_old" not in node.args:  # aggregations, joins: their stores give old values
            node.args["send_old"] = True
            return True
        if node.args["send_old"]:
            return True
        if node.args.get("store") is not None or (force and node.cls is TableSource):
            node.args["send_old"] = True
        elif node.cls in (TableFilter, TableMapValues):
            node.args["send_old"] = self.enable_old_values(node.parents[0], force)
        return node.args["send_old"]

    # ---- sources and stateless operators --------------------------------------------------

    def _stream(self, step: Step, a: dict[str, Any]) -> None:
        self.out[step.id] = self.graph.add(stateless.PassThrough, [], topic=a["topic"])

    def _table(self, step: Step, a: dict[str, Any]) -> None:
        source = self.graph.add(stateless.PassThrough, [], topic=a["topic"])
        self.add(step, TableSource, [source], store=a["store"], send_old=False)

    def _versioned_table(self, step: Step, a: dict[str, Any]) -> None:
        source = self.graph.add(stateless.PassThrough, [], topic=a["topic"])
        self.add(step, VersionedTableSource, [source], retention=a["retention"], send_old=False)

    def _global_table(self, step: Step, a: dict[str, Any]) -> None:
        self.graph.global_tables[a["topic"]] = (a["store"], a["key"], a["value"])
        self.marks[step.id] = {"global": a["store"]}

    def _stateless(self, step: Step, a: dict[str, Any]) -> None:
        node = stateless.make_stateless(step.op, a)
        self.add(step, type(node), [self.out[i] for i in step.inputs], **node.args)
        if step.op == "merge":
            self.key_changed[step.id] = any(self.key_changed[i] for i in step.inputs)

    def _split(self, step: Step, a: dict[str, Any]) -> None:
        branches = [s for s in self.plan.steps if s.op == "branch" and s.inputs == (step.id,)]
        predicates = [s.args["predicate"] for s in branches if s.args["index"] is not None]
        self.add(step, stateless.Split, [self.input_of(step)], predicates=predicates)

    def _repartition(self, step: Step, a: dict[str, Any]) -> None:
        self.out[step.id] = self.repartition(self.input_of(step), f"{a['name']}-repartition", False)
        self.key_changed[step.id] = False

    def _to(self, step: Step, a: dict[str, Any]) -> None:
        self.add(
            step,
            stateless.Sink,
            [self.input_of(step)],
            sink_topic=a["topic"],
            key=a["key"],
            value=a["value"],
        )

    def _to_chosen(self, step: Step, a: dict[str, Any]) -> None:
        self.add(
            step,
            stateless.ChosenTopicSink,
            [self.input_of(step)],
            extractor=a["extractor"],
            key=a["key"],
            value=a["value"],
        )

    def _process(self, step: Step, a: dict[str, Any]) -> None:
        self.add(
            step, ProcessorNode, [self.input_of(step)], supplier=a["supplier"], stores=a["stores"]
        )

    def _process_values(self, step: Step, a: dict[str, Any]) -> None:
        self.add(
            step,
            FixedKeyProcessorNode,
            [self.input_of(step)],
            supplier=a["supplier"],
            stores=a["stores"],
        )

    def _to_table(self, step: Step, a: dict[str, Any]) -> None:
        """Kafka's ``toTable``: a table source over the stream, repartitioned (dropping None
        keys) through ``<name>-repartition`` after a key change."""
        source = self.by_key(step, 0, a["name"])
        self.add(step, TableSource, [source], store=a["store"], send_old=False)
        self.key_changed[step.id] = False

    # ---- grouping, aggregation, windows ---------------------------------------------------

    def _group_by_key(self, step: Step, a: dict[str, Any]) -> None:
        self.marks[step.id] = {
            "stream": self.input_of(step),
            "repartition": self.key_changed[step.id],
        }

    def _group_by(self, step: Step, a: dict[str, Any]) -> None:
        keyed = self.graph.add(stateless.SelectKey, [self.input_of(step)], mapper=a["selector"])
        self.marks[step.id] = {"stream": keyed, "repartition": True}

    def _count(self, step: Step, a: dict[str, Any]) -> None:
        self.add(
            step,
            KeyValueAggregate,
            [self.grouped_source(step)],
            kind=step.op,
            caching=self.caching,
            **a,
        )
        self.key_changed[step.id] = False

    _reduce = _aggregate = _count

    def _cogroup(self, step: Step, a: dict[str, Any]) -> None:
        """Each grouped input, repartitioned through ``<store>-repartition`` after a key
        change, on its own port of one aggregation."""
        sources = []
        for grouped in step.inputs:
            mark = self.marks[grouped]
            if mark["repartition"]:
                topic = f"{a['store']}-repartition"
                sources.append(self.repartition(mark["stream"], topic, True))
            else:
                sources.append(mark["stream"])
        windows = a["windows"]
        if windows is None:
            self.add(step, CogroupAggregate, sources, kind="aggregate", caching=self.caching, **a)
        else:
            cls = COGROUPED_WINDOWED[type(windows)]
            self.add(step, cls, sources, kind="aggregate", caching=self.caching, **a)
            self.marks[step.id] = {"windows": windows}
        self.key_changed[step.id] = False

    def _windowed_by(self, step: Step, a: dict[str, Any]) -> None:
        self.marks[step.id] = {
            **self.marks[step.inputs[0]],
            "windows": a["windows"],
            "final": False,
        }

    def _emit_final(self, step: Step, a: dict[str, Any]) -> None:
        self.marks[step.id] = {**self.marks[step.inputs[0]], "final": True}

    def _window_count(self, step: Step, a: dict[str, Any]) -> None:
        mark = self.marks[step.inputs[0]]
        windows = mark["windows"]
        args = dict(a, windows=windows, final=mark["final"], caching=self.caching)
        kind = step.op.removeprefix("window_")
        if kind == "distinct":
            cls = TimeWindowDistinct if isinstance(windows, TimeWindowSpec) else SessionWindows
            args.update(kind="count", distinct=True)
        else:
            cls, args["kind"] = WINDOWED[type(windows)], kind
        self.add(step, cls, [self.grouped_source(step)], **args)
        self.marks[step.id] = {"windows": windows}
        self.key_changed[step.id] = False

    _window_reduce = _window_aggregate = _window_distinct = _window_count

    # ---- deduplication --------------------------------------------------------------------

    def _dedup_key(self, step: Step, a: dict[str, Any]) -> None:
        source = self.by_key(step, 0, a["name"], drop_null=False)
        mode = "key" if step.op == "dedup_key" else "key_value"
        self.add(step, Dedup, [source], mode=mode, key_serde="string", **a)
        self.key_changed[step.id] = False

    _dedup_key_value = _dedup_key

    def _dedup_id(self, step: Step, a: dict[str, Any]) -> None:
        def by_id(rec: Any, selector: Any = a["id_selector"]) -> bytes | None:
            found = selector(rec.key, rec.value)
            return None if found is None else id_bytes(found)

        source = self.repartition(self.input_of(step), f"{a['name']}-repartition", False, by_id)
        self.add(step, Dedup, [source], mode="id", key_serde="string", **a)

    # ---- joins ------------------------------------------------------------------------------

    def _stream_table_join(self, step: Step, a: dict[str, Any]) -> None:
        stream, table = self.by_key(step, 0, "join"), self.input_of(step, 1)
        node = self.add(
            step, StreamTableJoin, [stream], joiner=a["joiner"], left=a["left"], table=table
        )
        self.graph.nodes[node].links.append(table)
        self.key_changed[step.id] = False

    def _global_join(self, step: Step, a: dict[str, Any]) -> None:
        store = self.marks[step.inputs[1]]["global"]
        self.add(step, GlobalTableJoin, [self.input_of(step)], store=store, **a)

    def _stream_join(self, step: Step, a: dict[str, Any]) -> None:
        left = self.by_key(step, 0, f"{a['name']}-left")
        right = self.by_key(step, 1, f"{a['name']}-right")
        self.add(
            step,
            StreamStreamJoin,
            [left, right],
            joiner=a["joiner"],
            windows=a["windows"],
            kind=a["kind"],
        )
        self.key_changed[step.id] = False

    def _table_join(self, step: Step, a: dict[str, Any]) -> None:
        left, right = self.input_of(step, 0), self.input_of(step, 1)
        if a["kind"] in ("left_join", "outer_join"):
            self.enable_old_values(left, force=True)
        if a["kind"] == "outer_join":
            self.enable_old_values(right, force=True)
        node = self.add(step, TableTableJoin, [left, right], sides=[left, right], **a)
        self.graph.nodes[node].links += [left, right]

    def _fk_join(self, step: Step, a: dict[str, Any]) -> None:
        """Kafka's foreign-key join topology: subscriptions to the foreign table's task,
        answers back to the left table's (``fk_join.py``); the result is a table."""
        left, foreign = self.input_of(step, 0), self.input_of(step, 1)
        self.enable_old_values(left, force=True)
        self.enable_old_values(foreign, force=True)
        subscriptions = f"{a['name']}-subscription-registration-topic"
        responses = f"{a['name']}-subscription-response-topic"
        self.graph.internal |= {subscriptions, responses}
        g = self.graph
        g.add(FkSubscribe, [left], extractor=a["extractor"], left=a["left"], to_topic=subscriptions)
        received = g.add(stateless.PassThrough, [], topic=subscriptions)
        receiver = g.add(FkSubscriptions, [received], foreign=foreign, to_topic=responses)
        g.nodes[receiver].links.append(foreign)
        update = g.add(FkForeignUpdate, [foreign], subscriptions=receiver, to_topic=responses)
        g.nodes[update].links.append(receiver)
        answers = g.add(stateless.PassThrough, [], topic=responses)
        resolve = g.add(FkResolve, [answers], joiner=a["joiner"], left=a["left"], table=left)
        g.nodes[resolve].links.append(left)
        self.add(step, TableSource, [resolve], store=a["store"], send_old=False)

    # ---- tables -----------------------------------------------------------------------------

    def _table_filter(self, step: Step, a: dict[str, Any]) -> None:
        parent = self.input_of(step)
        send_old = self.enable_old_values(parent, force=False)  # Kafka's KTableFilter, when built
        self.add(step, TableFilter, [parent], send_old=send_old, **a)

    def _table_map_values(self, step: Step, a: dict[str, Any]) -> None:
        self.add(step, TableMapValues, [self.input_of(step)], send_old=False, **a)

    def _to_stream(self, step: Step, a: dict[str, Any]) -> None:
        self.add(step, ToStream, [self.input_of(step)])
        self.key_changed[step.id] = False

    def _suppress(self, step: Step, a: dict[str, Any]) -> None:
        windows = self.marks.get(step.inputs[0], {}).get("windows")
        close_after = None
        if isinstance(windows, (TimeWindowSpec, SlidingWindowSpec)):
            close_after = windows.grace
        elif isinstance(windows, SessionWindowSpec):
            close_after = windows.gap + grace_of(windows)
        self.enable_old_values(self.input_of(step), force=False)  # its buffer keeps them
        self.add(step, Suppress, [self.input_of(step)], spec=a["spec"], close_after=close_after)

    def _table_group_by(self, step: Step, a: dict[str, Any]) -> None:
        self.enable_old_values(self.input_of(step), force=True)
        regroup = self.graph.add(TableRegroup, [self.input_of(step)], selector=a["selector"])
        self.marks[step.id] = {"stream": regroup, "name": a["name"]}

    def _table_count(self, step: Step, a: dict[str, Any]) -> None:
        mark = self.marks[step.inputs[0]]
        source = self.repartition(mark["stream"], f"{mark['name']}-repartition", True)
        self.add(step, TableAggregate, [source], kind=step.op.removeprefix("table_"), **a)

    _table_reduce = _table_aggregate = _table_count


def compile_plan(plan: Plan, caching: bool = False) -> Graph:
    return Compiler(plan, caching).compile()
