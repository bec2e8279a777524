"""A ``Plan`` built into a Streamtide topology through the public DSL, step by step in plan
order (so nodes, children and sub-topologies come in the order the interpreter assumes)."""

from __future__ import annotations

from typing import Any

from streamtide import (
    BufferConfig,
    Consumed,
    Deduplicated,
    EmitStrategy,
    Grouped,
    Joined,
    JoinWindows,
    Materialized,
    Produced,
    Repartitioned,
    Serdes,
    SessionWindows,
    SlidingWindows,
    Stores,
    StreamJoined,
    StreamsBuilder,
    Suppressed,
    TableJoined,
    TimeWindows,
    Topology,
)
from tests.reference.plan import (
    JoinWindowSpec,
    Plan,
    SessionWindowSpec,
    SlidingWindowSpec,
    Step,
    SuppressSpec,
    TimeWindowSpec,
)

Effects = list[tuple[str, Any, Any]]


def serde(name: str) -> Any:
    return {
        "string": Serdes.string,
        "json": Serdes.json,
        "long": Serdes.long,
        "windowed": lambda: Serdes.session_windowed(Serdes.string()),
    }[name]()


def windows_of(spec: Any) -> Any:
    if isinstance(spec, TimeWindowSpec):
        windows = TimeWindows.of_size_and_grace(spec.size, spec.grace)
        return windows.advance_by(spec.advance) if spec.advance else windows
    if isinstance(spec, SessionWindowSpec):
        if spec.grace is None:
            windows = SessionWindows.with_inactivity_gap(spec.gap)
        else:
            windows = SessionWindows.of_inactivity_gap_and_grace(spec.gap, spec.grace)
        return windows.until(spec.retention) if spec.retention is not None else windows
    if isinstance(spec, SlidingWindowSpec):
        return SlidingWindows.of_time_difference_and_grace(spec.difference, spec.grace)
    if isinstance(spec, JoinWindowSpec):
        return JoinWindows.of_time_difference_and_grace(spec.before, spec.grace).after(spec.after)
    raise TypeError(spec)


def suppressed_of(spec: SuppressSpec) -> Suppressed:
    if spec.time_limit is None:
        return Suppressed.until_window_closes(BufferConfig.unbounded())
    buffer = BufferConfig.unbounded()
    if spec.max_records is not None:
        buffer = BufferConfig.max_records(spec.max_records).emit_early_when_full()
    return Suppressed.until_time_limit(spec.time_limit, buffer)


def stored(name: str | None, value: str) -> Materialized | None:
    if name is None:
        return None
    return Materialized.as_(name).with_key_serde(Serdes.string()).with_value_serde(serde(value))


class _Builder:
    def __init__(self, plan: Plan, effects: Effects) -> None:
        self.plan, self.effects = plan, effects
        self.builder = StreamsBuilder()
        self.made: dict[int, Any] = {}
        self.windowed_final: dict[int, bool] = {}

    def recorder(self, tag: str) -> Any:
        def note(key: Any, value: Any) -> None:
            self.effects.append((tag, key, value))

        return note

    def build(self) -> Topology:
        for store in self.plan.stores:
            self.builder.add_state_store(
                Stores.key_value_store_builder(
                    Stores.persistent_key_value_store(store.name),
                    serde(store.key),
                    serde(store.value),
                )
            )
        for step in self.plan.steps:
            self.made[step.id] = self.step(step)
        return self.builder.build()

    def step(self, step: Step) -> Any:
        op, a = step.op, step.args
        this = self.made[step.inputs[0]] if step.inputs else None
        other = self.made[step.inputs[1]] if len(step.inputs) > 1 else None
        b = self.builder
        if op == "stream":
            return b.stream(a["topic"], Consumed.with_(serde(a["key"]), serde(a["value"])))
        if op == "table":
            consumed = Consumed.with_(serde(a["key"]), serde(a["value"]))
            return b.table(a["topic"], consumed, stored(a["store"], a["value"]))
        if op == "versioned_table":
            consumed = Consumed.with_(serde(a["key"]), serde(a["value"]))
            supplier = Stores.persistent_versioned_key_value_store(
                a["versioned_store"], a["retention"]
            )
            return b.table(a["topic"], consumed, Materialized.as_(supplier))
        if op == "global_table":
            consumed = Consumed.with_(serde(a["key"]), serde(a["value"]))
            return b.global_table(a["topic"], consumed, stored(a["store"], a["value"]))
        simple = {
            "filter": "predicate",
            "filter_not": "predicate",
            "map": "mapper",
            "map_values": "mapper",
            "flat_map": "mapper",
            "flat_map_values": "mapper",
            "select_key": "mapper",
        }
        if op in simple:
            return getattr(this, op)(a[simple[op]])
        if op in ("peek", "foreach"):
            return getattr(this, op)(self.recorder(a["tag"]))
        if op == "split":
            split = this.split()
            for s in self.plan.steps:
                if s.op == "branch" and s.inputs == (step.id,) and s.args["index"] is not None:
                    split = split.branch(s.args["predicate"], s.args["name"])
            return split.default_branch("default") if a["default"] else split.no_default_branch()
        if op == "branch":
            return this[a["name"]]
        if op == "merge":
            return this.merge(other)
        if op == "repartition":
            options = Repartitioned.with_(serde(a["key"]), serde(a["value"])).with_name(a["name"])
            if a["partitions"] is not None:
                options = options.with_number_of_partitions(a["partitions"])
            return this.repartition(options)
        if op == "to":
            return this.to(a["topic"], Produced.with_(serde(a["key"]), serde(a["value"])))
        if op == "to_chosen":
            return this.to(a["extractor"], Produced.with_(serde(a["key"]), serde(a["value"])))
        if op == "process":
            return this.process(a["supplier"], *a["stores"])
        if op == "process_values":
            return this.process_values(a["supplier"], *a["stores"])
        if op == "to_table":
            return this.to_table(a["name"], stored(a["store"], a["value"]))
        if op == "group_by_key":
            return this.group_by_key(Grouped.with_(Serdes.string(), serde(a["value"])))
        if op == "group_by":
            return this.group_by(a["selector"], Grouped.with_(Serdes.string(), serde(a["value"])))
        if op == "count":
            return this.count(stored(a["store"], "long"))
        if op == "reduce":
            return this.reduce(a["reducer"], stored(a["store"], a["value"]))
        if op == "aggregate":
            return this.aggregate(a["initializer"], a["aggregator"], stored(a["store"], a["value"]))
        if op == "cogroup":
            first, *rest = a["aggregators"]
            cogrouped = this.cogroup(first)
            for index, aggregator in enumerate(rest, start=1):
                cogrouped = cogrouped.cogroup(self.made[step.inputs[index]], aggregator)
            if a["windows"] is None:
                return cogrouped.aggregate(a["initializer"], stored(a["store"], a["value"]))
            windowed = cogrouped.windowed_by(windows_of(a["windows"]))
            if a["final"]:
                windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
            extra = (a["merger"],) if a["merger"] is not None else ()
            return windowed.aggregate(a["initializer"], *extra, stored(a["store"], a["value"]))
        if op == "windowed_by":
            return this.windowed_by(windows_of(a["windows"]))
        if op == "emit_final":
            return this.emit_strategy(EmitStrategy.on_window_close())
        if op == "window_count":
            return this.count(stored(a["store"], "long"))
        if op == "window_reduce":
            return this.reduce(a["reducer"], stored(a["store"], a["value"]))
        if op == "window_aggregate":
            extra = (a["merger"],) if a["merger"] is not None else ()
            return this.aggregate(
                a["initializer"], a["aggregator"], *extra, stored(a["store"], a["value"])
            )
        if op == "window_distinct":
            return this.distinct(stored(a["store"], "json"))
        if op == "dedup_key":
            return this.deduplicate_by_key(a["interval"], Deduplicated.as_(a["name"]))
        if op == "dedup_key_value":
            return this.deduplicate_by_key_value(
                a["id_selector"], a["interval"], Deduplicated.as_(a["name"])
            )
        if op == "dedup_id":
            return this.deduplicate(a["id_selector"], a["interval"], Deduplicated.as_(a["name"]))
        if op == "stream_table_join":
            joined = Joined.with_(Serdes.string(), Serdes.json(), Serdes.json())
            method = this.left_join if a["left"] else this.join
            return method(other, a["joiner"], joined)
        if op == "global_join":
            method = this.left_join if a["left"] else this.join
            return method(other, a["key_selector"], a["joiner"])
        if op == "stream_join":
            joined = StreamJoined.with_(Serdes.string(), Serdes.json(), Serdes.json()).with_name(
                a["name"]
            )
            return getattr(this, a["kind"])(other, a["joiner"], windows_of(a["windows"]), joined)
        if op == "table_filter":
            method = this.filter_not if a["negate"] else this.filter
            return method(a["predicate"], materialized=stored(a["store"], "json"))
        if op == "table_map_values":
            return this.map_values(a["mapper"], materialized=stored(a["store"], "json"))
        if op == "to_stream":
            return this.to_stream()
        if op == "suppress":
            return this.suppress(suppressed_of(a["spec"]))
        if op == "table_group_by":
            return this.group_by(
                a["selector"],
                Grouped.with_(Serdes.string(), serde(a["value"])).with_name(a["name"]),
            )
        if op == "table_count":
            return this.count(stored(a["store"], "long"))
        if op == "table_reduce":
            return this.reduce(a["adder"], a["subtractor"], stored(a["store"], a["value"]))
        if op == "table_aggregate":
            return this.aggregate(
                a["initializer"], a["adder"], a["subtractor"], stored(a["store"], a["value"])
            )
        if op == "table_join":
            kind = {"join": "join", "left_join": "left_join", "outer_join": "outer_join"}[a["kind"]]
            return getattr(this, kind)(other, a["joiner"], materialized=stored(a["store"], "json"))
        if op == "fk_join":
            method = this.left_join if a["left"] else this.join
            return method(
                other,
                a["extractor"],
                a["joiner"],
                TableJoined.as_(a["name"]),
                stored(a["store"], "json"),
            )
        raise ValueError(f"no DSL call for plan step {op!r}")


def build_topology(plan: Plan, effects: Effects | None = None) -> Topology:
    """The plan as a Streamtide topology; ``peek``/``foreach`` note into ``effects``."""
    return _Builder(plan, effects if effects is not None else []).build()
