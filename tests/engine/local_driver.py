"""The engine's batch loop without Spark, for protocol tests: the real committer, the real
application directory, the real file log and real work units (RocksDB stores included), run
in this process instead of in pinned Spark tasks."""

from __future__ import annotations

import json
from typing import Any

from streamtide.config import StreamsConfig
from streamtide.engine.app_dir import AppDirectory, app_dir_for
from streamtide.engine.committer import BatchCommitter, StageResult
from streamtide.engine.global_offsets import global_ends
from streamtide.engine.kafka_committer import KafkaBatchCommitter
from streamtide.engine.plan import Stage, make_plan
from streamtide.engine.protocol import CommitRecord, Ranges, resume_batch
from streamtide.engine.unit_ids import UnitKey
from streamtide.log import open_log
from streamtide.processor.topology import Topology
from streamtide.runtime.committed import offset_key
from streamtide.runtime.kafka_task_commit import source_partitions
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.work_unit import ActiveSpec, WorkUnitSpec, run_work_unit

CLIENT = "local"
#: Work units per stage on Kafka (a stage's tasks spread over them, as over an executor's
#: slots): one unit's transaction can commit while the other's does not.
KAFKA_SLOTS = 2


class LocalDriver:
    """One driver instance: takes an epoch when created, then runs batches on request."""

    def __init__(self, topology: Topology, config: StreamsConfig) -> None:
        self.topology, self.config = topology, config
        self.log = open_log(config.log, **config.log_options)
        self.stages = make_plan(topology, config, self.log)
        self.app_dir = AppDirectory(app_dir_for(config), config.application_id)
        committer = KafkaBatchCommitter if self.log.transactional else BatchCommitter
        self.committer = committer(self.app_dir, self.log, config.application_id)
        last = self.committer.start()
        if isinstance(self.committer, KafkaBatchCommitter):
            self.committer.fence_work_units(t for stage in self.stages for t in stage.task_ids)
        self.batch = resume_batch(last)
        # as StreamsApp starts: the last commit's states, or (on Kafka) what Kafka holds
        resumed = self.committer.resume_states(last, self._task_sources)
        self.states: dict[str, dict[str, Any]] = {t: s.to_dict() for t, s in resumed.items()}
        self.global_ends: dict[str, list[int]] = {}

    def _task_sources(self) -> dict[str, list[tuple[str, int]]]:
        app = self.config.application_id
        return {
            t: source_partitions(self.topology, app, self.log, t)
            for stage in self.stages
            for t in stage.task_ids
        }

    def lag(self) -> int:
        total = 0
        for stage in self.stages:
            for task in stage.task_ids:
                partition = int(task.split("_")[1])
                offsets = self.states.get(task, {}).get("offsets", {})
                for topic in stage.source_topics:
                    start = offsets.get(offset_key(topic, partition), 0)
                    total += self.log.end_offset(topic, partition) - start
        return total

    def run_batch(self) -> int:
        """Run and commit one batch; returns the batch number."""
        batch = self.batch
        if isinstance(self.committer, KafkaBatchCommitter):
            self.committer.check_fence(batch)  # as StreamsApp: a newer driver took over?
        app = self.config.application_id
        self.global_ends = global_ends(self.app_dir, self.log, self.topology, app, batch)
        for stage in self.stages:
            sinks = [
                self.topology.resolve_topic(t, self.config.application_id)
                for t in self.topology.subtopology(stage.subtopology).sink_topics
                if t in self.topology.internal_topics
            ]
            result = self.committer.run_stage(
                batch,
                stage.subtopology,
                lambda stage=stage: self._fix_ranges(stage),
                lambda ranges, stage=stage: self._execute(batch, stage, ranges),
                sinks,
            )
            for task, prepared in result.prepare.tasks.items():
                self.states[task] = prepared.state
            self.after_stage(result)
        self.committer.commit(CommitRecord(batch, self.committer.epoch, dict(self.states)))
        if isinstance(self.committer, KafkaBatchCommitter):
            self._purge()
        self.batch = batch + 1
        return batch

    def _purge(self) -> None:
        """As StreamsApp: delete the repartition records every consumer has committed; after
        every batch (StreamsApp purges at most every ``PURGE_INTERVAL_S``), so that what a
        run leaves in its repartition topics does not depend on how long it took."""
        assert isinstance(self.committer, KafkaBatchCommitter)
        internal = self._internal_topics()
        consumed = {}
        for task, partitions in self._task_sources().items():
            offsets = self.states.get(task, {}).get("offsets", {})
            for topic, partition in partitions:
                if topic in internal and offset_key(topic, partition) in offsets:
                    consumed[(topic, partition)] = offsets[offset_key(topic, partition)]
        self.committer.purge(consumed, force=True)

    def _internal_topics(self) -> set[str]:
        app = self.config.application_id
        return {self.topology.resolve_topic(t, app) for t in self.topology.internal_topics}

    def after_stage(self, result: StageResult) -> None:
        """Called once a stage is sealed (long-running executors learn the outcome here)."""

    def run_until_caught_up(self, max_batches: int = 50) -> None:
        for _ in range(max_batches):
            self.run_batch()
            if not self.lag():
                return
        raise AssertionError("did not catch up")

    def _fix_ranges(self, stage: Stage) -> tuple[Ranges, dict[str, str]]:
        if isinstance(self.committer, KafkaBatchCommitter):  # Kafka holds the task states
            app = self.config.application_id
            sources = {
                t: source_partitions(self.topology, app, self.log, t) for t in stage.task_ids
            }
            found = self.committer.committed_states(sources)
            for task in stage.task_ids:
                self.states[task] = found[task].to_dict() if task in found else {}
        # as StreamsApp: on Kafka a repartition partition is read whole, up to what earlier
        # batches committed (its offsets have gaps where aborted transactions were; a cap
        # would cut batches elsewhere)
        whole = self._internal_topics() if self.log.transactional else set()
        ranges: Ranges = {}
        for task in stage.task_ids:
            partition = int(task.split("_")[1])
            offsets = self.states.get(task, {}).get("offsets", {})
            ranges[task] = {}
            for topic in stage.source_topics:
                start = offsets.get(offset_key(topic, partition), 0)
                if topic in whole:
                    assert isinstance(self.committer, KafkaBatchCommitter)
                    ranges[task][topic] = (start, self.committer.settled_end(topic, partition))
                    continue
                end = self.log.end_offset(topic, partition)
                ranges[task][topic] = (start, min(end, start + 40))
        return ranges, {t: i for t in stage.source_topics if (i := self.log.topic_id(t))}

    def _execute(self, batch: int, stage: Stage, ranges: Ranges) -> list[tuple[str, dict]]:
        """The stage's tasks in one work unit; on Kafka in ``KAFKA_SLOTS`` work units, one
        after the other, each in its own transaction under the id the committer hands out."""
        count = KAFKA_SLOTS if self.log.transactional else 1
        slots = [stage.task_ids[slot::count] for slot in range(count)]
        keys = {UnitKey(CLIENT, n, stage.subtopology): tasks for n, tasks in enumerate(slots)}
        ids = {}
        if isinstance(self.committer, KafkaBatchCommitter):
            assert self.committer.unit_ids is not None
            ids = self.committer.unit_ids.ids_for({k: t for k, t in keys.items() if t})
        done = []
        for key, tasks in keys.items():
            if not tasks:
                continue
            spec = WorkUnitSpec(
                batch,
                stage.subtopology,
                CLIENT,
                [
                    ActiveSpec(
                        t, {k: list(r) for k, r in ranges[t].items()}, self.states.get(t, {})
                    )
                    for t in tasks
                ],
                global_ends=self.global_ends,
                transactional_id=ids.get(key),
            )
            spec = WorkUnitSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
            report = run_work_unit(self.topology, self.config, self.log, spec, make_task_stores)
            report["ran_on"] = {"executor": CLIENT}
            done.append((CLIENT, report))
        return done
