"""Runs a plan record at a time over plain in-memory topics: the reference the engine and the
test driver are compared with.

Topics are lists per partition. A batch runs every group (sub-topology) in dependency
order; each of its tasks reads, from each of its source partitions, the records after its
committed position (at most ``batch_cap`` per partition, as the engine's test loop cuts
ranges) and processes them in the order of SEMANTICS section 1, then commits (record caches
emit). What a group's tasks wrote into a repartition partition becomes readable when the
group's batch ends, merged by timestamp keeping each writer's order. Global tables take every
record written to their topic before the batch starts.

``pipe`` is the test driver's way: one record, processed at once with everything it causes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.reference.compiler import compile_plan
from tests.reference.graph import Graph
from tests.reference.plan import Plan
from tests.reference.processor_api import DictKeyValueStore, ProcessorNode
from tests.reference.records import Change, Rec
from tests.reference.serdes import partition_key_bytes, partition_of, round_trip
from tests.reference.task import Task
from tests.reference.task_input import merged


@dataclass(frozen=True)
class Output:
    """One record written to an output topic: its partition (None: any, a record without
    key), the task that wrote it, key, value and timestamp."""

    partition: int | None
    writer: str
    key: Any
    value: Any
    ts: int


class ReferenceRun:
    """One run of a plan: ``partitions`` per topic, the record cache on or off (``caching``),
    ``batch_cap`` records per partition and batch, a wall clock that moves only when told
    (checked after every record with ``wall_clock_per_record``, as the test driver does)."""

    def __init__(
        self,
        plan: Plan,
        partitions: int = 1,
        *,
        caching: bool = False,
        batch_cap: int | None = None,
        wall_clock: int = 0,
        wall_clock_per_record: bool = False,
    ) -> None:
        self.plan = plan
        self.graph: Graph = compile_plan(plan, caching)
        self.partitions = partitions
        self.batch_cap = batch_cap
        self.wall_clock = wall_clock
        self.wall_clock_per_record = wall_clock_per_record
        self.effects: list[tuple[str, Any, Any]] = []
        self.logs: dict[str, list[list[Rec]]] = {}  # topic -> partition -> records
        self.outputs: dict[str, list[Output]] = {}
        self.global_tables: dict[str, dict[Any, Any]] = {
            s: {} for s, _, _ in self.graph.global_tables.values()
        }
        self.global_positions: dict[str, int] = {}
        self.pending: dict[tuple[str, int], dict[str, list[Rec]]] = {}
        self.tasks: dict[tuple[int, int], Task] = {}
        self.positions: dict[tuple[int, int, str], int] = {}
        for topic in [*self.plan.input_topics(), *self.graph.internal]:
            self.logs.setdefault(topic, [[] for _ in range(partitions)])
        for group in range(len(self.graph.groups)):
            for p in range(partitions):
                self.tasks[(group, p)] = self._new_task(group, p)

    def _new_task(self, group: int, partition: int) -> Task:
        task = Task(self, group, partition)
        for spec in self.plan.stores:
            task.stores[spec.name] = DictKeyValueStore(spec.name, spec.key, spec.value)
        for i in self.graph.groups[group]:
            g = self.graph.nodes[i]
            task.nodes[i] = g.cls(**g.args)
        for i in self.graph.groups[group]:
            for port, parent in enumerate(self.graph.nodes[i].parents):
                task.nodes[parent].children.append((task.nodes[i], port))
        for node in task.nodes.values():
            if isinstance(node, ProcessorNode):
                node.init(task)
        return task

    # ---- input -------------------------------------------------------------------------

    def append(
        self,
        topic: str,
        key: Any,
        value: Any,
        ts: int,
        partition: int | None = None,
        headers: tuple = (),
        key_serde: str = "string",
    ) -> int:
        """Write one input record; its partition defaults to its key's. Returns the partition."""
        log = self.logs[topic]
        if partition is None:
            if key is None and len(log) > 1:
                raise ValueError("give the partition of a record without key")
            partition = (
                0 if len(log) == 1 else partition_of(partition_key_bytes(key, key_serde), len(log))
            )
        log[partition].append(
            Rec(key, value, ts, tuple(headers), topic, partition, len(log[partition]))
        )
        return partition

    def pipe(self, topic: str, key: Any, value: Any, ts: int, headers: tuple = ()) -> None:
        """The test driver's ``pipe_input``: process the record and all it causes, commit."""
        self.append(topic, key, value, ts, 0, headers)
        self.run_batch()
        while self.lag():  # a group that reads a repartition topic it writes itself
            self.run_batch()

    def advance_wall_clock(self, ms: int) -> None:
        """The test driver's ``advance_wall_clock_time``: each task's wall-clock punctuators,
        each followed by what they caused downstream; then a commit."""
        self.wall_clock += ms
        for group in range(len(self.graph.groups)):
            for p in range(self.partitions):
                self.tasks[(group, p)].punctuate_wall_clock()
            self._end_stage(group)
            self.run_batch()
        self.run_batch()

    # ---- batches -------------------------------------------------------------------------

    def lag(self) -> int:
        total = 0
        for (group, p), _ in self.tasks.items():
            for source in self.graph.sources(group):
                total += len(self.logs[source.topic][p]) - self.positions.get(
                    (group, p, source.topic), 0
                )
        return total

    def run_batch(self) -> None:
        self._update_global_tables()
        for group in range(len(self.graph.groups)):
            for p in range(self.partitions):
                self._run_task(self.tasks[(group, p)])
            self._end_stage(group)

    def _run_task(self, task: Task) -> None:
        queues = []
        for source in self.graph.sources(task.group):
            records = self.logs[source.topic][task.partition]
            start = self.positions.get((task.group, task.partition, source.topic), 0)
            end = (
                len(records)
                if self.batch_cap is None
                else min(len(records), start + self.batch_cap)
            )
            self.positions[(task.group, task.partition, source.topic)] = end
            queues.append((source, records[start:end]))
        queues.sort(key=lambda q: (self.graph.sources(task.group).index(q[0]), q[0].topic))
        for source, rec in merged(queues, lambda r: r.ts):
            task.process(task.nodes[source.id], rec)
        task.commit()

    def _end_stage(self, group: int) -> None:
        """Repartition records of the stage become readable, merged across writer tasks."""
        for (topic, partition), writers in sorted(self.pending.items()):
            queues = [
                (w, writers[w])
                for w in sorted(writers, key=lambda t: tuple(map(int, t.split("_"))))
            ]
            log = self.logs[topic][partition]
            for _, rec in merged(queues, lambda r: r.ts):
                log.append(rec.but(topic=topic, partition=partition, offset=len(log)))
        self.pending.clear()

    def _update_global_tables(self) -> None:
        for topic, (store, _, value_serde) in self.graph.global_tables.items():
            for p, records in enumerate(self.logs[topic]):
                start = self.global_positions.get(f"{topic}/{p}", 0)
                for rec in records[start:]:
                    if rec.key is None:
                        continue
                    if rec.value is None:
                        self.global_tables[store].pop(rec.key, None)
                    else:
                        self.global_tables[store][rec.key] = round_trip(rec.value, value_serde)
                self.global_positions[f"{topic}/{p}"] = len(records)

    # ---- output --------------------------------------------------------------------------

    def write(self, task: Task, topic: str, rec: Rec, sink: dict[str, Any]) -> None:
        key_serde, value_serde = sink["key"], sink["value"]
        value = rec.value
        if isinstance(value, Change):  # a table's update through a repartition topic
            value = Change(round_trip(value.new, value_serde), round_trip(value.old, value_serde))
        else:
            value = round_trip(value, value_serde)
        key = round_trip(rec.key, key_serde)
        partition = self._partition(topic, rec, sink)
        if topic in self.graph.internal:
            out = rec.but(key=key, value=value, offset=None)
            self.pending.setdefault((topic, partition), {}).setdefault(task.task_id, []).append(out)
        else:
            self.outputs.setdefault(topic, []).append(
                Output(partition, task.task_id, key, value, rec.ts)
            )

    def _partition(self, topic: str, rec: Rec, sink: dict[str, Any]) -> int | None:
        if self.partitions == 1:
            return 0
        to = sink.get("partition_to")
        chosen = None if to is None else to(rec)
        if chosen is not None:
            return chosen % self.partitions
        by = sink.get("partition_by")
        data = by(rec) if by is not None else partition_key_bytes(rec.key, sink["key"])
        if data is None:
            if topic in self.graph.internal:
                raise ValueError(
                    f"a record without key cannot be placed in repartition topic {topic!r}"
                )
            return None  # any partition: Kafka's partitioner picks one
        return partition_of(data, self.partitions)

    def output(self, topic: str) -> list[Output]:
        return self.outputs.get(topic, [])

    def store(self, name: str) -> dict[Any, Any] | None:
        """What store ``name`` holds, over all tasks (None: a store the interpreter does not
        model, such as the sessions behind a session ``distinct``)."""
        parts = self.store_by_partition(name)
        if parts is None:
            return None
        return {k: v for contents in parts.values() for k, v in contents.items()}

    def store_by_partition(self, name: str) -> dict[int, dict[Any, Any]] | None:
        """What store ``name`` holds in each partition's task (partitions with entries)."""
        found: dict[int, dict[Any, Any]] | None = None
        for task in self.tasks.values():
            contents = None
            if name in task.stores:
                contents = task.stores[name].data
            for node in task.nodes.values():
                if node.args.get("store") == name:
                    contents = node.state(task)
            if contents is not None:
                found = found or {}
                if contents:
                    found.setdefault(task.partition, {}).update(contents)
        return found

    def metrics(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for task in self.tasks.values():
            for metric, value in task.metrics.items():
                total[metric] = total.get(metric, 0) + value
        return total
