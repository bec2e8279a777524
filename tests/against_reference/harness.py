"""Run one plan on the product and on the reference interpreter, and compare what both saw.

Two ways to run the product, through public entry points only:

- ``on_driver``: ``TopologyTestDriver``, one record at a time (cache off, as its default);
  the reference runs in the same mode (``ReferenceRun.pipe``).
- ``on_engine``: the engine's batch loop without Spark (``LocalDriver``: committer,
  application directory, file log, work units), input in several batches, with restarts
  (a new driver instance on the same state) and wiped local state (stores restore from
  their changelogs) between batches, on 1 or 4 partitions; the reference runs the same
  batches.

What is compared: every output topic's records (key, value, timestamp; per partition, in
order), the side effects of ``peek``/``foreach``, and the final contents of every named
store (read with the driver's store getters, or through the engine's store queries).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamtide import StreamsConfig, Windowed
from streamtide.log import LogRecord, open_log
from streamtide.log.partitioner import partition_for_key
from streamtide.testing import TopologyTestDriver
from tests.against_reference.build import build_topology, serde
from tests.against_reference.queries import engine_store
from tests.engine.local_driver import LocalDriver
from tests.reference import Plan, ReferenceRun

#: ``LocalDriver`` reads at most this many records of a partition per stage and batch.
RANGE_CAP = getattr(LocalDriver, "RANGE_CAP", 40)


@dataclass(frozen=True)
class Event:
    """One input record, or (``topic`` None) a wall-clock advance of ``ts`` ms."""

    topic: str | None
    key: Any = None
    value: Any = None
    ts: int = 0
    partition: int | None = None


@dataclass
class Seen:
    """Outputs per topic as (partition, writer, key, value, ts); writer None: unknown."""

    outputs: dict[str, list[tuple]] = field(default_factory=dict)
    stores: dict[str, dict[Any, Any]] = field(default_factory=dict)
    effects: list[tuple[str, Any, Any]] = field(default_factory=list)
    #: counters SEMANTICS defines exactly (test driver runs)
    metrics: dict[str, int] = field(default_factory=dict)


#: Window and session stores are read key by key: the input's keys and these, which the
#: tests' key-changing steps map records to.
REKEYED = ("a", "b", "c", "d")

#: the counters compared: a dropped duplicate is counted once (SEMANTICS 3)
METRICS = ("dropped-duplicates",)


def store_names(plan: Plan, queryable: bool = False) -> list[str]:
    """Named stores of ``plan``; ``queryable``: only those a running application answers
    queries for (not a global table's)."""
    names = [
        s.args["store"]
        for s in plan.steps
        if s.args.get("store") and not (queryable and s.op == "global_table")
    ]
    return sorted({*names, *(s.name for s in plan.stores)})


def _serdes(plan: Plan) -> dict[str, tuple[str, str]]:
    return {
        s.args["topic"]: (s.args["key"], s.args["value"])
        for s in plan.steps
        if s.op in ("stream", "table", "versioned_table", "global_table")
    }


def normalized_store(entries: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """Store entries as the interpreter keeps them: windows by (key, start), sessions by
    (key, start, end)."""
    found: dict[Any, Any] = {}
    for key, value in entries:
        found[key] = value
    return found


def _windowed_entries(kind: str, entries: list[tuple[Windowed, Any]]) -> dict[Any, Any]:
    if kind == "session":
        return {(w.key, w.window.start, w.window.end): v for w, v in entries}
    return {(w.key, w.window.start): v for w, v in entries}


# ---- the test driver --------------------------------------------------------------------------


def config(**overrides: Any) -> StreamsConfig:
    return StreamsConfig(
        application_id="ref",
        default_key_serde=serde("string"),
        default_value_serde=serde("json"),
        **overrides,
    )


def on_driver(
    plan: Plan,
    events: list[Event],
    wall_clock: int = 0,
    state_dir: Path | None = None,
    commits: list[int] | None = None,
) -> Seen:
    """``commits``: run the driver with its record cache on and commit only after these
    record counts (``pipe_record_list`` of each run of records between two of them, all of
    one topic); else the cache is off and every record is committed on its own."""
    seen = Seen()
    topology = build_topology(plan, seen.effects)
    driver = TopologyTestDriver(
        topology,
        config(),
        initial_wall_clock_ms=wall_clock,
        state_dir=state_dir,
        cache_enabled=commits is not None,
    )
    with driver:
        inputs = {
            topic: driver.create_input_topic(topic, serde(k), serde(v))
            for topic, (k, v) in _serdes(plan).items()
        }
        if commits is not None:
            for start, end in zip([0, *commits], [*commits, len(events)]):
                piece = events[start:end]
                if piece:
                    inputs[piece[0].topic].pipe_record_list([(e.key, e.value, e.ts) for e in piece])  # type: ignore[index]
            events = []
        for event in events:
            if event.topic is None:
                driver.advance_wall_clock_time(event.ts)
            else:
                inputs[event.topic].pipe_input(event.key, event.value, timestamp=event.ts)
        for topic, (k, v) in plan.output_topics().items():
            out = driver.create_output_topic(topic, serde(k), serde(v))
            seen.outputs[topic] = [
                (0, None, r.key, r.value, r.timestamp) for r in out.read_records()
            ]
        seen.metrics = {m: driver.metrics().get(m, 0) for m in METRICS}
        for name in store_names(plan):
            store = driver.get_state_store(name)
            kind = getattr(store, "kind", "key_value")
            entries = list(store.all())
            seen.stores[name] = (
                dict(entries) if kind == "key_value" else _windowed_entries(kind, entries)
            )
    return seen


def reference_on_driver(
    plan: Plan, events: list[Event], wall_clock: int = 0, commits: list[int] | None = None
) -> Seen:
    run = ReferenceRun(
        plan, wall_clock=wall_clock, wall_clock_per_record=True, caching=commits is not None
    )
    if commits is not None:
        for start, end in zip([0, *commits], [*commits, len(events)]):
            for event in events[start:end]:
                run.append(event.topic, event.key, event.value, event.ts, 0)  # type: ignore[arg-type]
            while True:  # the driver processes each record as it comes; commits at the end
                run.run_batch()
                if not run.lag():
                    break
        events = []
    for event in events:
        if event.topic is None:
            run.advance_wall_clock(event.ts)
        else:
            run.pipe(event.topic, event.key, event.value, event.ts)
    seen = _reference_seen(plan, run)
    seen.metrics = {m: run.metrics().get(m, 0) for m in METRICS}
    return seen


def _reference_seen(plan: Plan, run: ReferenceRun, per_partition: set[str] | None = None) -> Seen:
    """``per_partition`` (engine runs): queryable stores, these ones as ``{partition:
    contents}``."""
    seen = Seen(effects=list(run.effects))
    for topic in plan.output_topics():
        seen.outputs[topic] = [
            (o.partition, o.writer, o.key, o.value, o.ts) for o in run.output(topic)
        ]
    split = per_partition or set()
    for name in store_names(plan, queryable=per_partition is not None):
        contents = run.store_by_partition(name) if name in split else run.store(name)
        if contents is not None:
            seen.stores[name] = contents
    return seen


# ---- the engine's batch loop -------------------------------------------------------------------


@dataclass
class EngineRun:
    """Input batches for ``on_engine``: after batch ``i``'s input is written, the engine
    runs batches until it has caught up. ``restarts``/``wipes``: batch numbers before which
    a new driver instance starts (``wipes``: with the local state directory deleted)."""

    batches: list[list[Event]]
    partitions: int = 1
    restarts: frozenset[int] = frozenset()
    wipes: frozenset[int] = frozenset()
    caching: bool = False


def on_engine(plan: Plan, spec: EngineRun, root: Path) -> tuple[Seen, list[int]]:
    """The product's view, and how many engine batches each input batch took."""
    seen = Seen()
    log_url = f"file://{root / 'log'}"
    log = open_log(log_url)
    serdes = _serdes(plan)
    for topic in serdes:
        log.create_topic(topic, spec.partitions, exist_ok=True)
    for topic in plan.output_topics():
        log.create_topic(topic, spec.partitions, exist_ok=True)
    cfg = config(log=log_url, state_dir=str(root / "state"), cache_enabled=spec.caching)
    driver = LocalDriver(build_topology(plan, seen.effects), cfg)
    rounds = []
    for number, batch in enumerate(spec.batches):
        if number in spec.wipes:
            shutil.rmtree(root / "state", ignore_errors=True)
        if number in spec.restarts or number in spec.wipes:
            driver = LocalDriver(build_topology(plan, seen.effects), cfg)
        _write(log, serdes, batch, spec.partitions)
        count = 0
        while True:
            driver.run_batch()
            count += 1
            if not driver.lag():
                break
            assert count < 100, "the engine does not catch up"
        rounds.append(count)
    for topic, (k, v) in plan.output_topics().items():
        ks, vs = serde(k), serde(v)
        seen.outputs[topic] = [
            (p, None, ks.deserialize(r.key), vs.deserialize(r.value), r.timestamp)
            for p in range(log.partitions(topic))
            for r in log.read(topic, p)
        ]
    input_keys = {e.key for b in spec.batches for e in b if isinstance(e.key, str)}
    keys = sorted({*input_keys, *REKEYED})
    for name in store_names(plan, queryable=True):
        seen.stores[name] = engine_store(driver, name, keys)
    log.close()
    return seen, rounds


def _write(
    log: Any, serdes: dict[str, tuple[str, str]], batch: list[Event], partitions: int
) -> None:
    by_partition: dict[tuple[str, int], list[LogRecord]] = {}
    for event in batch:
        ks, vs = (serde(n) for n in serdes[event.topic])  # type: ignore[index]
        key = ks.serialize(event.key)
        partition = event.partition
        if partition is None:
            assert key is not None, "a record without key needs its partition"
            partition = partition_for_key(key, partitions)
        by_partition.setdefault((event.topic, partition), []).append(  # type: ignore[arg-type]
            LogRecord(key, vs.serialize(event.value), event.ts)
        )
    for (topic, partition), records in by_partition.items():
        log.append(topic, partition, records)


def reference_on_engine(plan: Plan, spec: EngineRun, rounds: list[int]) -> Seen:
    """The reference's view of ``spec`` run in the engine's ``rounds`` (key-value stores per
    partition, as ``on_engine`` reads them)."""
    run = ReferenceRun(plan, spec.partitions, caching=spec.caching, batch_cap=RANGE_CAP)
    for batch, count in zip(spec.batches, rounds):
        for event in batch:
            run.append(event.topic, event.key, event.value, event.ts, event.partition)  # type: ignore[arg-type]
        for _ in range(count):
            run.run_batch()
        assert run.lag() == 0, "the reference needs more batches than the engine took"
    return _reference_seen(plan, run, {n for n in store_names(plan) if _key_value_store(plan, n)})


def _key_value_store(plan: Plan, name: str) -> bool:
    windowed = {
        s.args.get("store")
        for s in plan.steps
        if s.op.startswith("window_") or (s.op == "cogroup" and s.args["windows"] is not None)
    }
    return name not in windowed


# ---- comparing -----------------------------------------------------------------------------------


def assert_same_as_driver(expected: Seen, actual: Seen) -> None:
    """Record at a time: everything equal, in order."""
    for topic, records in expected.outputs.items():
        want = [(k, v, ts) for _, _, k, v, ts in records]
        got = [(k, v, ts) for _, _, k, v, ts in actual.outputs[topic]]
        assert got == want, f"topic {topic!r}:\n got  {got}\n want {want}"
    assert actual.effects == expected.effects, "peek/foreach side effects differ"
    assert actual.metrics == expected.metrics, "counted drops differ"
    for name, contents in expected.stores.items():
        assert actual.stores[name] == contents, (
            f"store {name!r}:\n got  {actual.stores[name]}\n want {contents}"
        )


def assert_same_as_engine(expected: Seen, actual: Seen) -> None:
    """In batches over partitions: per output partition the same records; in the same order
    for every key that one task alone writes there (what different tasks write into one
    partition may interleave in any order); records without key in any partition. Stores
    equal; side effects equal as multisets."""
    for topic, records in expected.outputs.items():
        got_records = actual.outputs[topic]
        got, want = Counter(map(_placed, got_records)), Counter(map(_placed, records))
        assert got == want, (
            f"topic {topic!r} holds other records:\n missing {sorted((want - got).elements())}\n"
            f" extra   {sorted((got - want).elements())}"
        )
        writers: dict[tuple, set] = {}
        for p, writer, key, _, _ in records:
            writers.setdefault((p, _base(key)), set()).add(writer)
        for (p, key), who in writers.items():
            if key is None or len(who) > 1:
                continue
            want = [(k, v, ts) for q, _, k, v, ts in records if q == p and _base(k) == key]
            got = [(k, v, ts) for q, _, k, v, ts in got_records if q == p and _base(k) == key]
            assert got == want, (
                f"topic {topic!r} partition {p} key {key!r}:\n got  {got}\n want {want}"
            )
    assert Counter(map(_canonical, actual.effects)) == Counter(map(_canonical, expected.effects))
    for name, contents in expected.stores.items():
        assert actual.stores[name] == contents, (
            f"store {name!r}:\n got  {actual.stores[name]}\n want {contents}"
        )


def _base(key: Any) -> Any:
    return key.key if isinstance(key, Windowed) else key


def _placed(record: tuple) -> tuple:
    p, _, key, value, ts = record
    return (None if _base(key) is None else p, _canonical(key), _canonical(value), ts)


def _canonical(value: Any) -> str:
    """A printable form equal for equal values (dicts in key order)."""
    if isinstance(value, Windowed):
        return f"Windowed({_canonical(value.key)}, {value.window.start}, {value.window.end})"
    return json.dumps(value, sort_keys=True, default=repr)
