"""``DriverState``: what the driver's collaborators share about the application.

``StreamsApp`` composes a few collaborators (``engine.batch_loop``, ``engine.stage_runner``,
``engine.input_ranges``, ``engine.placing``, ``engine.work_unit_routes``,
``engine.app_queries``, ``engine.rescale``); each keeps its own state and reads or updates
the application's here: the plan, the committed task states, the executors' reports and
who owns which task."""

from __future__ import annotations

from dataclasses import dataclass, field

from streamtide.config import StreamsConfig
from streamtide.engine.app_dir import AppDirectory
from streamtide.engine.committer import BatchCommitter
from streamtide.engine.metrics import AppMetrics
from streamtide.engine.placement import ClientReport
from streamtide.engine.plan import Stage
from streamtide.log.api import Log
from streamtide.processor.topology import Topology
from streamtide.runtime.committed import TaskCommittedState
from streamtide.runtime.kafka_task_commit import sources_by_task


@dataclass
class DriverState:
    """The application as the driver knows it between two batches."""

    topology: Topology
    config: StreamsConfig
    log: Log
    app_dir: AppDirectory
    committer: BatchCommitter
    metrics: AppMetrics
    #: the plan's stages (``engine.plan``), planned again when pattern sources match anew
    stages: list[Stage] = field(default_factory=list)
    #: each task's committed state, as of the last batch (or what the log holds)
    task_states: dict[str, TaskCommittedState] = field(default_factory=dict)
    #: each executor's report for the assignor: tasks it runs and the state it holds
    reports: dict[str, ClientReport] = field(default_factory=dict)
    #: the executor each task last committed on (where micro-batch queries read it)
    owners: dict[str, str] = field(default_factory=dict)
    #: each source topic's identity as the batches read it (a re-created topic differs)
    topic_ids: dict[str, str] = field(default_factory=dict)
    #: this batch's end offsets of the global tables' topics (``engine.global_offsets``)
    global_ends: dict[str, list[int]] = field(default_factory=dict)

    @property
    def application_id(self) -> str:
        return self.config.application_id

    def task_ids(self) -> list[str]:
        return [t for stage in self.stages for t in stage.task_ids]

    def stateful_tasks(self) -> set[str]:
        return {t for stage in self.stages if stage.changelog_topics for t in stage.task_ids}

    def committed_offsets(self, task: str) -> dict[str, int]:
        state = self.task_states.get(task)
        return dict(state.offsets) if state is not None else {}

    def task_sources(self, stage: Stage | None = None) -> dict[str, list[tuple[str, int]]]:
        """Each task's source partitions (of one stage, or of all)."""
        stages = [stage] if stage is not None else self.stages
        tasks = (t for each in stages for t in each.task_ids)
        return sources_by_task(self.topology, self.application_id, self.log, tasks)

    @property
    def repartition_topics(self) -> set[str]:
        app = self.application_id
        return {self.topology.resolve_topic(t, app) for t in self.topology.internal_topics}

    def internal_sinks(self, stage: Stage) -> list[str]:
        """Repartition topics this stage writes (their segments get interleaved)."""
        sub = self.topology.subtopology(stage.subtopology)
        app = self.application_id
        return [
            self.topology.resolve_topic(t, app)
            for t in sub.sink_topics
            if t in self.topology.internal_topics
        ]
