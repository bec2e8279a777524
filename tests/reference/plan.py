"""A topology described once, as data: the steps the reference interpreter runs and the
steps ``tests/against_reference/build.py`` turns into DSL calls.

A ``Plan`` is a list of ``Step``s. Each step names one DSL operation (``op``), the steps it
reads from (``inputs``, the receiver first) and its arguments (user functions, serde names,
store names, window specs). Handles (``StreamRef``, ``TableRef``, ...) add steps with methods
named like the DSL's, so a plan reads like the topology it stands for. Nothing here knows
how either side runs a step.

Serdes are named: ``"string"``, ``"json"``, ``"long"`` for keys and values, and
``"windowed"`` for a windowed key (the session-windowed layout of a string key, which keeps
both window bounds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Fn = Callable[..., Any]


@dataclass(frozen=True)
class TimeWindowSpec:
    """``TimeWindows.of_size(size).advance_by(advance).grace(grace)``; advance None: tumbling."""

    size: int
    advance: int | None = None
    grace: int = 0

    @property
    def step(self) -> int:
        return self.advance or self.size


@dataclass(frozen=True)
class SessionWindowSpec:
    """Session windows. ``grace`` None: ``with_inactivity_gap(gap)`` (with ``.until(retention)``
    when given: the seed's rule). ``grace`` set: ``of_inactivity_gap_and_grace(gap, grace)``
    (the grace rule, SEMANTICS section 5)."""

    gap: int
    retention: int | None = None
    grace: int | None = None


@dataclass(frozen=True)
class SlidingWindowSpec:
    """``SlidingWindows.of_time_difference_and_grace(difference, grace)``."""

    difference: int
    grace: int = 0


@dataclass(frozen=True)
class JoinWindowSpec:
    """``JoinWindows.of_time_difference_and_grace(before, grace)`` with ``.after(after)``."""

    before: int
    after: int
    grace: int = 0


@dataclass(frozen=True)
class SuppressSpec:
    """``Suppressed.until_window_closes(unbounded)`` when ``time_limit`` is None, else
    ``Suppressed.until_time_limit(time_limit, max_records(max_records) emitting early)``."""

    time_limit: int | None = None
    max_records: int | None = None


@dataclass(frozen=True)
class StoreSpec:
    """A key-value store added with ``builder.add_state_store`` for Processor API nodes."""

    name: str
    key: str = "string"
    value: str = "json"


@dataclass
class Step:
    id: int
    op: str
    inputs: tuple[int, ...]
    args: dict[str, Any] = field(default_factory=dict)


class Plan:
    """The steps of one topology, in the order they were added."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.stores: list[StoreSpec] = []

    def add(self, op: str, inputs: tuple[int, ...], **args: Any) -> int:
        step = Step(len(self.steps), op, inputs, args)
        self.steps.append(step)
        return step.id

    # ---- sources -----------------------------------------------------------------------------

    def stream(self, topic: str, key: str = "string", value: str = "json") -> StreamRef:
        return StreamRef(self, self.add("stream", (), topic=topic, key=key, value=value))

    def table(
        self, topic: str, store: str | None = None, key: str = "string", value: str = "json"
    ) -> TableRef:
        return TableRef(self, self.add("table", (), topic=topic, store=store, key=key, value=value))

    def versioned_table(
        self, topic: str, store: str, history_retention: int, value: str = "json"
    ) -> TableRef:
        """``table(topic, Materialized.as_(persistent_versioned_key_value_store(store,
        history_retention)))``: its store is compared through the outputs only (a versioned
        store cannot be listed)."""
        step = self.add(
            "versioned_table",
            (),
            topic=topic,
            versioned_store=store,
            retention=history_retention,
            key="string",
            value=value,
        )
        return TableRef(self, step)

    def global_table(
        self, topic: str, store: str, key: str = "string", value: str = "json"
    ) -> GlobalRef:
        step = self.add("global_table", (), topic=topic, store=store, key=key, value=value)
        return GlobalRef(self, step)

    def add_store(self, name: str, key: str = "string", value: str = "json") -> None:
        self.stores.append(StoreSpec(name, key, value))

    # ---- what a plan reads and writes --------------------------------------------------------

    def input_topics(self) -> list[str]:
        sources = ("stream", "table", "versioned_table", "global_table")
        return [s.args["topic"] for s in self.steps if s.op in sources]

    def output_topics(self) -> dict[str, tuple[str, str]]:
        """Every ``to`` topic with its (key serde, value serde) names."""
        found = {
            s.args["topic"]: (s.args["key"], s.args["value"]) for s in self.steps if s.op == "to"
        }
        for step in self.steps:
            if step.op == "to_chosen":
                found.update(
                    (t, (step.args["key"], step.args["value"])) for t in step.args["topics"]
                )
        return found


@dataclass
class _Ref:
    plan: Plan
    id: int

    def _add(self, cls: type, op: str, *others: _Ref, **args: Any) -> Any:
        return cls(self.plan, self.plan.add(op, (self.id, *(o.id for o in others)), **args))


class StreamRef(_Ref):
    def filter(self, predicate: Fn) -> StreamRef:
        return self._add(StreamRef, "filter", predicate=predicate)

    def filter_not(self, predicate: Fn) -> StreamRef:
        return self._add(StreamRef, "filter_not", predicate=predicate)

    def map(self, mapper: Fn) -> StreamRef:
        return self._add(StreamRef, "map", mapper=mapper)

    def map_values(self, mapper: Fn) -> StreamRef:
        return self._add(StreamRef, "map_values", mapper=mapper)

    def flat_map(self, mapper: Fn) -> StreamRef:
        return self._add(StreamRef, "flat_map", mapper=mapper)

    def flat_map_values(self, mapper: Fn) -> StreamRef:
        return self._add(StreamRef, "flat_map_values", mapper=mapper)

    def select_key(self, mapper: Fn) -> StreamRef:
        return self._add(StreamRef, "select_key", mapper=mapper)

    def peek(self, tag: str) -> StreamRef:
        """Records every (key, value) under ``tag`` in the run's side-effect log."""
        return self._add(StreamRef, "peek", tag=tag)

    def foreach(self, tag: str) -> None:
        self._add(StreamRef, "foreach", tag=tag)

    def split(self, branches: list[tuple[str, Fn]], default: bool = True) -> dict[str, StreamRef]:
        """``split().branch(p, name)...default_branch()``; returns the branches by name (the
        default one is ``"default"``)."""
        split = self._add(_Ref, "split", names=[n for n, _ in branches], default=default)
        result = {}
        for index, (name, predicate) in enumerate(branches):
            result[name] = split._add(
                StreamRef, "branch", name=name, index=index, predicate=predicate
            )
        if default:
            result["default"] = split._add(StreamRef, "branch", name="default", index=None)
        return result

    def merge(self, other: StreamRef) -> StreamRef:
        return self._add(StreamRef, "merge", other)

    def repartition(
        self, name: str, key: str = "string", value: str = "json", partitions: int | None = None
    ) -> StreamRef:
        """``partitions``: ``Repartitioned.with_number_of_partitions`` (the interpreter runs
        every topic with the run's partition count: give it only where that is the same)."""
        return self._add(
            StreamRef, "repartition", name=name, key=key, value=value, partitions=partitions
        )

    def to(self, topic: str, key: str = "string", value: str = "json") -> None:
        self._add(_Ref, "to", topic=topic, key=key, value=value)

    def to_chosen(
        self, extractor: Fn, topics: list[str], key: str = "string", value: str = "json"
    ) -> None:
        """``to(extractor)``: ``extractor(key, value, record_context)`` names one of
        ``topics`` per record."""
        self._add(_Ref, "to_chosen", extractor=extractor, topics=topics, key=key, value=value)

    def process(self, supplier: Fn, *stores: str, name: str | None = None) -> StreamRef:
        return self._add(StreamRef, "process", supplier=supplier, stores=stores, name=name)

    def process_values(self, supplier: Fn, *stores: str) -> StreamRef:
        """``process_values``: the processor may not change keys (KIP-820)."""
        return self._add(StreamRef, "process_values", supplier=supplier, stores=stores)

    def to_table(self, name: str, store: str | None = None, value: str = "json") -> TableRef:
        """``to_table(Named.as_(name), materialized)`` (KIP-523)."""
        return self._add(TableRef, "to_table", name=name, store=store, value=value)

    def group_by_key(self, name: str | None = None, value: str = "json") -> GroupedRef:
        return self._add(GroupedRef, "group_by_key", name=name, value=value)

    def group_by(self, selector: Fn, name: str | None = None, value: str = "json") -> GroupedRef:
        return self._add(GroupedRef, "group_by", selector=selector, name=name, value=value)

    def deduplicate_by_key(self, interval: int, name: str) -> StreamRef:
        return self._add(StreamRef, "dedup_key", interval=interval, name=name)

    def deduplicate_by_key_value(self, id_selector: Fn, interval: int, name: str) -> StreamRef:
        return self._add(
            StreamRef, "dedup_key_value", id_selector=id_selector, interval=interval, name=name
        )

    def deduplicate(self, id_selector: Fn, interval: int, name: str) -> StreamRef:
        return self._add(
            StreamRef, "dedup_id", id_selector=id_selector, interval=interval, name=name
        )

    def join_table(self, table: TableRef, joiner: Fn, left: bool = False) -> StreamRef:
        return self._add(StreamRef, "stream_table_join", table, joiner=joiner, left=left)

    def join_global(
        self, table: GlobalRef, key_selector: Fn, joiner: Fn, left: bool = False
    ) -> StreamRef:
        return self._add(
            StreamRef, "global_join", table, key_selector=key_selector, joiner=joiner, left=left
        )

    def join_stream(
        self, other: StreamRef, joiner: Fn, windows: JoinWindowSpec, kind: str, name: str
    ) -> StreamRef:
        """``kind``: ``"join"``, ``"left_join"`` or ``"outer_join"``."""
        return self._add(
            StreamRef, "stream_join", other, joiner=joiner, windows=windows, kind=kind, name=name
        )


class GroupedRef(_Ref):
    def cogroup(
        self,
        others: list[tuple[GroupedRef, Fn]],
        aggregator: Fn,
        initializer: Fn,
        store: str,
        value: str = "json",
        windows: Any = None,
        merger: Fn | None = None,
        final: bool = False,
    ) -> TableRef:
        """``cogroup(aggregator)``, ``.cogroup(other, its aggregator)`` for each of
        ``others``, then ``.aggregate(initializer, Materialized.as_(store))``; with
        ``windows``, ``.windowed_by(windows)`` before it (``final``: emitted on window close;
        session windows need ``merger``)."""
        return self._add(
            TableRef,
            "cogroup",
            *(other for other, _ in others),
            aggregators=[aggregator, *(fn for _, fn in others)],
            initializer=initializer,
            store=store,
            value=value,
            windows=windows,
            merger=merger,
            final=final,
        )

    def count(self, store: str) -> TableRef:
        return self._add(TableRef, "count", store=store, value="long")

    def reduce(self, reducer: Fn, store: str, value: str = "json") -> TableRef:
        return self._add(TableRef, "reduce", reducer=reducer, store=store, value=value)

    def aggregate(
        self, initializer: Fn, aggregator: Fn, store: str, value: str = "json"
    ) -> TableRef:
        return self._add(
            TableRef,
            "aggregate",
            initializer=initializer,
            aggregator=aggregator,
            store=store,
            value=value,
        )

    def windowed_by(self, windows: Any) -> WindowedRef:
        return self._add(WindowedRef, "windowed_by", windows=windows)


class WindowedRef(_Ref):
    def emit_on_window_close(self) -> WindowedRef:
        return self._add(WindowedRef, "emit_final")

    def count(self, store: str) -> TableRef:
        return self._add(TableRef, "window_count", store=store, value="long")

    def reduce(self, reducer: Fn, store: str, value: str = "json") -> TableRef:
        return self._add(TableRef, "window_reduce", reducer=reducer, store=store, value=value)

    def aggregate(
        self,
        initializer: Fn,
        aggregator: Fn,
        store: str,
        merger: Fn | None = None,
        value: str = "json",
    ) -> TableRef:
        return self._add(
            TableRef,
            "window_aggregate",
            initializer=initializer,
            aggregator=aggregator,
            merger=merger,
            store=store,
            value=value,
        )

    def distinct(self, store: str) -> TableRef:
        return self._add(TableRef, "window_distinct", store=store, value="json")


class TableRef(_Ref):
    def filter(self, predicate: Fn, store: str | None = None) -> TableRef:
        return self._add(TableRef, "table_filter", predicate=predicate, store=store, negate=False)

    def filter_not(self, predicate: Fn, store: str | None = None) -> TableRef:
        return self._add(TableRef, "table_filter", predicate=predicate, store=store, negate=True)

    def map_values(self, mapper: Fn, store: str | None = None) -> TableRef:
        return self._add(TableRef, "table_map_values", mapper=mapper, store=store)

    def to_stream(self) -> StreamRef:
        return self._add(StreamRef, "to_stream")

    def suppress(self, spec: SuppressSpec) -> TableRef:
        return self._add(TableRef, "suppress", spec=spec)

    def group_by(self, selector: Fn, name: str, value: str = "json") -> GroupedTableRef:
        return self._add(
            GroupedTableRef, "table_group_by", selector=selector, name=name, value=value
        )

    def join(
        self, other: TableRef, joiner: Fn, kind: str = "join", store: str | None = None
    ) -> TableRef:
        """``kind``: ``"join"``, ``"left_join"`` or ``"outer_join"``."""
        return self._add(TableRef, "table_join", other, joiner=joiner, kind=kind, store=store)

    def fk_join(
        self,
        other: TableRef,
        extractor: Fn,
        joiner: Fn,
        name: str,
        left: bool = False,
        store: str | None = None,
    ) -> TableRef:
        """``join``/``left_join(other, extractor, joiner, TableJoined.as_(name))`` on the
        foreign key ``extractor(value)`` (KIP-213)."""
        return self._add(
            TableRef, "fk_join", other, extractor=extractor, joiner=joiner, name=name,
            left=left, store=store,
        )  # fmt: skip


class GroupedTableRef(_Ref):
    def count(self, store: str) -> TableRef:
        return self._add(TableRef, "table_count", store=store, value="long")

    def reduce(self, adder: Fn, subtractor: Fn, store: str, value: str = "json") -> TableRef:
        return self._add(
            TableRef, "table_reduce", adder=adder, subtractor=subtractor, store=store, value=value
        )

    def aggregate(
        self, initializer: Fn, adder: Fn, subtractor: Fn, store: str, value: str = "json"
    ) -> TableRef:
        return self._add(
            TableRef,
            "table_aggregate",
            initializer=initializer,
            adder=adder,
            subtractor=subtractor,
            store=store,
            value=value,
        )


class GlobalRef(_Ref):
    pass
