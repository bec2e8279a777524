"""What the engine runs: one stage per sub-topology, its tasks, and the topics it needs."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from streamtide.config import StreamsConfig
from streamtide.errors import TopologyError, UnknownTopicError
from streamtide.log.api import Log
from streamtide.log.kafka_client import CHANGELOG_CONFIGS, REPARTITION_CONFIGS, split_options
from streamtide.processor.topology import Topology
from streamtide.task_id import TaskId

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage:
    """One sub-topology: its tasks are ``<id>_<partition>`` for every partition."""

    subtopology: int
    partitions: int
    source_topics: tuple[str, ...]
    stores: tuple[str, ...]
    changelog_topics: dict[str, str] = field(default_factory=dict)

    @property
    def task_ids(self) -> list[str]:
        return [str(TaskId(self.subtopology, p)) for p in range(self.partitions)]

    @property
    def stateful(self) -> bool:
        return bool(self.stores)


def make_plan(topology: Topology, config: StreamsConfig, log_: Log) -> list[Stage]:
    """Check source topics exist and create internal, changelog and missing sink topics."""
    app = config.application_id
    topology.match_topics(log_.list_topics(), app)
    for source, pattern in topology.pattern_sources.items():
        if not topology.nodes[source].topics:  # type: ignore[attr-defined]
            raise UnknownTopicError(
                f"no topic in {log_.url} matches the pattern {pattern.pattern!r} of source "
                f"{source!r}; create one first (streamtide topics create NAME --partitions N "
                f"--log {log_.url})"
            )
    for topic in sorted(topology.global_topics()):
        physical = topology.resolve_topic(topic, app)
        if not log_.has_topic(physical):
            raise UnknownTopicError(
                f"global table topic {physical!r} does not exist in {log_.url}; create it first "
                f"(streamtide topics create {physical} --partitions N --log {log_.url})"
            )
    internal_partitions: dict[str, int] = {}
    copartitioned = copartitioned_counts(topology, app, log_)
    # as in Kafka Streams, the user's ``topic.*`` settings override internal topics' defaults
    overrides = split_options(config.log_options)[1]
    stages = []
    for sub in topology.subtopologies():
        counts = []
        for topic in sub.source_topics:
            physical = topology.resolve_topic(topic, app)
            if topic in topology.internal_topics:
                if physical not in internal_partitions:
                    # read before its writer runs (a foreign-key join's cycle): it has the
                    # count of the topics it is co-partitioned with
                    count = topology.internal_topic_partitions.get(topic) or copartitioned.get(
                        physical
                    )
                    if count is None:
                        raise UnknownTopicError(
                            f"internal topic {physical!r} is read before any stage writes it"
                        )
                    internal_partitions[physical] = count
                    log_.create_topic(
                        physical,
                        count,
                        exist_ok=True,
                        configs={**REPARTITION_CONFIGS, **overrides},
                    )
                counts.append(internal_partitions[physical])
            elif not log_.has_topic(physical):
                raise UnknownTopicError(
                    f"source topic {physical!r} does not exist in {log_.url}; create it first "
                    f"(streamtide topics create {physical} --partitions N --log {log_.url})"
                )
            else:
                counts.append(log_.partitions(physical))
        partitions = max(counts)
        for sink in sub.sink_topics:
            physical = topology.resolve_topic(sink, app)
            if sink in topology.internal_topics:
                count = topology.internal_topic_partitions.get(sink) or copartitioned.get(
                    physical, partitions
                )
                internal_partitions[physical] = count
                log_.create_topic(
                    physical, count, exist_ok=True, configs={**REPARTITION_CONFIGS, **overrides}
                )
            elif not log_.has_topic(physical):
                log.info("creating output topic %s with %d partitions", physical, partitions)
                log_.create_topic(physical, partitions, exist_ok=True)
        changelogs = {}
        for store in sub.stores:
            if getattr(topology.store_builder(store), "logging_enabled", True):
                changelogs[store] = topology.changelog_topic(store, app)
                if topology.source_changelog_topic(store) is None:
                    configs = {**changelog_configs(topology.store_builder(store)), **overrides}
                    log_.create_topic(changelogs[store], partitions, exist_ok=True, configs=configs)
        stages.append(
            Stage(
                sub.id,
                partitions,
                tuple(topology.resolve_topic(t, app) for t in sub.source_topics),
                tuple(sub.stores),
                changelogs,
            )
        )
    for topics, operation in topology.copartition_groups:
        grouped = {topology.resolve_topic(t, app) for t in topics}
        found = {t: internal_partitions.get(t) or log_.partitions(t) for t in sorted(grouped)}
        if len(set(found.values())) > 1:
            raise TopologyError(
                f"the inputs of {operation} are not co-partitioned "
                f"({', '.join(f'{t!r} has {n}' for t, n in found.items())} partitions); "
                "call repartition() on one side before the join"
            )
    if config.deserialization_exception_handler != "fail":
        log_.create_topic(config.dlq_topic, 1, exist_ok=True)
    if config.errors_dead_letter_topic and config.processing_exception_handler != "fail":
        log_.create_topic(config.errors_dead_letter_topic, 1, exist_ok=True)
    return stages


def copartitioned_counts(topology: Topology, app: str, log_: Log) -> dict[str, int]:
    """The partition count each internal topic of a co-partition group (a join's inputs)
    must have: that of the group's external topics, so that a ``repartition()`` before a
    join matches the other side (``make_plan`` then checks every group)."""
    counts: dict[str, int] = {}
    for topics, _ in topology.copartition_groups:
        external = [
            log_.partitions(t) for t in topics - topology.internal_topics if log_.has_topic(t)
        ]
        if external:
            for topic in (topics & topology.internal_topics) - set(
                topology.internal_topic_partitions
            ):
                counts[topology.resolve_topic(topic, app)] = max(external)
    return counts


#: Kafka Streams keeps a windowed store's changelog records this much longer than the store.
WINDOWED_CHANGELOG_EXTRA_RETENTION_MS = 24 * 3600 * 1000


def changelog_configs(builder: object) -> dict[str, str]:
    """Topic configs of a store's changelog (logs without topic configs ignore them):
    compacted; a window or session store's also deletes records older than the store's
    retention plus a day, as Kafka Streams does."""
    retention = getattr(builder, "retention_ms", None)
    if not isinstance(retention, int) or retention <= 0:
        return dict(CHANGELOG_CONFIGS)
    extra = WINDOWED_CHANGELOG_EXTRA_RETENTION_MS
    return {"cleanup.policy": "compact,delete", "retention.ms": str(retention + extra)}
