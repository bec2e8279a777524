"""``Topology``: the graph of sources, processors, sinks and stores, split into sub-topologies.

Nodes connected by an edge or by a shared state store belong to one sub-topology. Sub-topologies
talk only through topics (internal repartition topics among them). Internal topic names are
kept without the application id; ``resolve_topic`` adds it (``<application_id>-<name>``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from streamtide.errors import TopologyError
from streamtide.processor.api import NodeSupplier, StoreBuilder
from streamtide.processor.description import TopologyDescription
from streamtide.processor.nodes import (
    NodeDef,
    Partitioner,
    ProcessorNodeDef,
    SinkNodeDef,
    SourceNodeDef,
)
from streamtide.processor.topic_name import TopicChooser, extractor_function
from streamtide.processor.topic_patterns import (
    check_pattern,
    marked_source,
    match_patterns,
    pattern_mark,
)
from streamtide.serde import Serde
from streamtide.timestamp_extractor import TimestampExtractor


@dataclass
class SubTopology:
    """One independently runnable piece of a topology; one task per partition."""

    id: int
    nodes: list[NodeDef]
    source_topics: list[str]
    sink_topics: list[str]
    stores: list[str]

    def node(self, name: str) -> NodeDef:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    @property
    def sources(self) -> list[SourceNodeDef]:
        return [n for n in self.nodes if isinstance(n, SourceNodeDef)]


@dataclass(frozen=True)
class GlobalStoreSpec:
    """A store holding a whole topic (every partition) in every task: a global table.

    The topic is the store's changelog; tasks only read the store (``runtime.global_stores``).
    """

    name: str
    topic: str
    key_serde: Serde | None = None
    value_serde: Serde | None = None


@dataclass
class Topology:
    """A processing graph built with the low-level API (or by ``StreamsBuilder``)."""

    _nodes: dict[str, NodeDef] = field(default_factory=dict)
    _stores: dict[str, StoreBuilder] = field(default_factory=dict)
    _store_users: dict[str, list[str]] = field(default_factory=dict)
    _topic_sources: dict[str, str] = field(default_factory=dict)
    internal_topics: set[str] = field(default_factory=set)
    #: internal topics created with a partition count of their own (``Repartitioned``)
    internal_topic_partitions: dict[str, int] = field(default_factory=dict)
    #: topics that must have equal partition counts (a join's inputs), with what needs it;
    #: a pattern source's topics appear as its mark (``copartition_groups`` resolves them)
    _copartition_declared: list[tuple[frozenset[str], str]] = field(default_factory=list)
    global_stores: dict[str, GlobalStoreSpec] = field(default_factory=dict)
    #: stores whose changelog is the source topic they are built from (source tables)
    _source_changelogs: dict[str, str] = field(default_factory=dict)
    _subtopologies: list[SubTopology] | None = None

    # ---- building -------------------------------------------------------------------------

    def _check_new(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise TopologyError(f"a node needs a non-empty name, got {name!r}")
        if name in self._nodes:
            raise TopologyError(f"a node named {name!r} already exists in this topology")
        self._subtopologies = None

    def _connect(self, node: NodeDef, parents: tuple[str, ...]) -> None:
        if not parents:
            raise TopologyError(f"node {node.name!r} needs at least one parent")
        for parent_name in parents:
            parent = self._nodes.get(parent_name)
            if parent is None:
                raise TopologyError(f"node {node.name!r}: parent {parent_name!r} does not exist")
            if isinstance(parent, SinkNodeDef):
                raise TopologyError(
                    f"node {node.name!r}: parent {parent_name!r} is a sink and cannot have children"
                )
            if parent_name in node.parents:
                raise TopologyError(f"node {node.name!r}: parent {parent_name!r} given twice")
            parent.children.append(node.name)
            node.parents.append(parent_name)

    def add_source(
        self,
        name: str,
        *topics: str,
        pattern: re.Pattern[str] | str | None = None,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        timestamp_extractor: TimestampExtractor | None = None,
    ) -> Topology:
        """Read ``topics``, or every topic whose whole name matches ``pattern``
        (``processor.topic_patterns``); each topic can be read by one source node only.
        ``timestamp_extractor``: see ``streamtide.timestamp_extractor``."""
        self._check_new(name)
        if pattern is not None:
            if topics:
                raise TopologyError(f"source {name!r}: give topics or a pattern, not both")
            self._nodes[name] = SourceNodeDef(
                name,
                pattern=check_pattern(name, pattern),
                key_serde=key_serde,
                value_serde=value_serde,
                timestamp_extractor=timestamp_extractor,
            )
            return self
        if not topics:
            raise TopologyError(f"source {name!r} needs at least one topic")
        for topic in topics:
            if not isinstance(topic, str) or not topic:
                raise TopologyError(f"source {name!r}: topic names must be non-empty strings")
            if topic in self.global_topics():
                raise TopologyError(f"source {name!r}: topic {topic!r} is a global table's topic")
            if topic in self._topic_sources:
                raise TopologyError(
                    f"source {name!r}: topic {topic!r} is already read by source "
                    f"{self._topic_sources[topic]!r}"
                )
        for topic in topics:
            self._topic_sources[topic] = name
        self._nodes[name] = SourceNodeDef(
            name,
            topics=list(topics),
            key_serde=key_serde,
            value_serde=value_serde,
            timestamp_extractor=timestamp_extractor,
        )
        return self

    def add_processor(self, name: str, supplier: NodeSupplier, *parents: str) -> Topology:
        """Add a processor made by ``supplier`` (a Processor class or factory) under ``parents``."""
        self._check_new(name)
        if not callable(supplier):
            raise TopologyError(f"processor {name!r}: supplier must be callable, got {supplier!r}")
        node = ProcessorNodeDef(name, supplier=supplier)
        self._connect(node, parents)
        self._nodes[name] = node
        return self

    def add_sink(
        self,
        name: str,
        topic: str | TopicChooser,
        *parents: str,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        partitioner: Partitioner | None = None,
    ) -> Topology:
        """Write records from ``parents`` to ``topic``: a topic name, or a
        ``TopicNameExtractor`` (or function) choosing the topic per record
        (``processor.topic_name``)."""
        self._check_new(name)
        extractor = None
        if not isinstance(topic, str):
            extractor = extractor_function(topic, name)
            topic = ""
        elif not topic:
            raise TopologyError(f"sink {name!r} needs a topic name, got {topic!r}")
        node = SinkNodeDef(
            name,
            topic=topic,
            key_serde=key_serde,
            value_serde=value_serde,
            partitioner=partitioner,
            topic_extractor=extractor,
        )
        self._connect(node, parents)
        self._nodes[name] = node
        return self

    def add_state_store(self, builder: StoreBuilder, *processor_names: str) -> Topology:
        """Register a store (one instance per task) and connect it to processors."""
        name = builder.name
        if name in self._stores:
            raise TopologyError(f"a state store named {name!r} is already registered")
        self._stores[name] = builder
        self._store_users[name] = []
        self.connect_processor_and_state_stores_many(processor_names, name)
        return self

    def connect_processor_and_state_stores(
        self, processor_name: str, *store_names: str
    ) -> Topology:
        """Let ``processor_name`` use ``store_names`` through ``context.get_state_store``."""
        node = self._nodes.get(processor_name)
        if not isinstance(node, ProcessorNodeDef):
            raise TopologyError(
                f"cannot connect stores to {processor_name!r}: no processor of that name"
            )
        for store in store_names:
            if store not in self._stores:
                raise TopologyError(
                    f"processor {processor_name!r} uses unknown state store {store!r}; "
                    f"registered: {sorted(self._stores) or 'none'}"
                )
            if store not in node.stores:
                node.stores.append(store)
                self._store_users[store].append(processor_name)
        self._subtopologies = None
        return self

    def connect_processor_and_state_stores_many(
        self, processor_names: tuple[str, ...], store_name: str
    ) -> None:
        for processor_name in processor_names:
            self.connect_processor_and_state_stores(processor_name, store_name)

    def use_source_topic_as_changelog(self, store_name: str, topic: str) -> Topology:
        """Let ``topic`` (read by a source of this topology) be the changelog of store
        ``store_name``: no changelog topic is created and a restore reads ``topic`` up to the
        task's committed input offset (source tables)."""
        if topic not in self._topic_sources:
            raise TopologyError(f"store {store_name!r}: topic {topic!r} is not read by a source")
        self._source_changelogs[store_name] = topic
        return self

    def source_changelog_topic(self, store_name: str) -> str | None:
        """The (logical) source topic that is ``store_name``'s changelog, if it has one."""
        return self._source_changelogs.get(store_name)

    def add_internal_topic(self, name: str, partitions: int | None = None) -> Topology:
        """Mark a topic as internal: its real name is prefixed with the application id.
        ``partitions``: create it with that many partitions (else as the engine plans)."""
        self.internal_topics.add(name)
        if partitions is not None:
            self.internal_topic_partitions[name] = partitions
        return self

    def upstream_source_topics(self, node: str) -> set[str]:
        """The topics read by the source nodes that feed ``node`` (directly or not)."""
        topics: set[str] = set()
        pending, seen = [node], set()
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            definition = self.nodes[name]
            if isinstance(definition, SourceNodeDef):
                if definition.pattern is not None:
                    topics.add(pattern_mark(name))
                else:
                    topics.update(definition.topics)
            pending.extend(definition.parents)
        return topics

    def add_copartition_group(self, topics: set[str], operation: str) -> Topology:
        """Require ``topics`` to have the same number of partitions (checked when the
        engine plans the topology; internal topics among them are created with that count)."""
        group = frozenset(topics)
        if len(group) > 1 and all(group != known for known, _ in self._copartition_declared):
            self._copartition_declared.append((group, operation))
        return self

    @property
    def copartition_groups(self) -> list[tuple[frozenset[str], str]]:
        """The co-partition groups with each pattern source's topics matched so far."""
        groups = []
        for group, operation in self._copartition_declared:
            topics: set[str] = set()
            for topic in group:
                source = marked_source(topic)
                if source is None:
                    topics.add(topic)
                else:
                    definition = self._nodes[source]
                    assert isinstance(definition, SourceNodeDef)
                    topics.update(definition.topics)
            if len(topics) > 1:
                groups.append((frozenset(topics), operation))
        return groups

    # ---- topic patterns -------------------------------------------------------------------

    @property
    def pattern_sources(self) -> dict[str, re.Pattern[str]]:
        """The sources that read the topics matching a pattern, with their patterns."""
        return {
            name: node.pattern
            for name, node in self._nodes.items()
            if isinstance(node, SourceNodeDef) and node.pattern is not None
        }

    def matching_topics(
        self, available: Iterable[str], application_id: str
    ) -> dict[str, list[str]]:
        """The topics of ``available`` each pattern source would read: those its pattern
        matches, not the application's internal topics."""
        patterns = self.pattern_sources
        if not patterns:
            return {}
        available = list(available)
        prefix = f"{application_id}-"
        excluded = {
            t
            for t in available
            if t.startswith(prefix) and t.endswith(("-changelog", "-repartition"))
        } | self.global_topics()
        named = {t: s for t, s in self._topic_sources.items() if s not in patterns}
        return match_patterns(patterns, available, named, excluded)

    def match_topics(self, available: Iterable[str], application_id: str) -> bool:
        """Let each pattern source read the topics ``matching_topics`` finds; True when that
        changed any source's topics."""
        changed = False
        for name, topics in self.matching_topics(available, application_id).items():
            node = self._nodes[name]
            assert isinstance(node, SourceNodeDef)
            if node.topics != topics:
                for topic in node.topics:
                    del self._topic_sources[topic]
                for topic in topics:
                    self._topic_sources[topic] = name
                node.topics = topics
                changed = True
        if changed:
            self._subtopologies = None
        return changed

    def add_global_store(self, spec: GlobalStoreSpec) -> Topology:
        """Keep all of ``spec.topic`` in a store every processor can read by name."""
        if spec.name in self._stores or spec.name in self.global_stores:
            raise TopologyError(f"a state store named {spec.name!r} is already registered")
        if spec.topic in self._topic_sources or spec.topic in self.global_topics():
            raise TopologyError(
                f"global store {spec.name!r}: topic {spec.topic!r} is already read by this topology"
            )
        self.global_stores[spec.name] = spec
        return self

    def global_topics(self) -> set[str]:
        return {spec.topic for spec in self.global_stores.values()}

    # ---- reading --------------------------------------------------------------------------

    @property
    def nodes(self) -> dict[str, NodeDef]:
        return dict(self._nodes)

    @property
    def store_builders(self) -> dict[str, StoreBuilder]:
        return dict(self._stores)

    def store_builder(self, name: str) -> StoreBuilder:
        try:
            return self._stores[name]
        except KeyError:
            raise TopologyError(
                f"unknown state store {name!r}; registered: {sorted(self._stores) or 'none'}"
            ) from None

    def resolve_topic(self, topic: str, application_id: str) -> str:
        """The physical name of ``topic`` (internal topics get the application id prefix)."""
        return f"{application_id}-{topic}" if topic in self.internal_topics else topic

    def changelog_topic(self, store_name: str, application_id: str) -> str:
        """The physical changelog topic of a store: ``<application_id>-<store>-changelog``,
        or the source topic a source table's store is restored from."""
        source = self._source_changelogs.get(store_name)
        if source is not None:
            return self.resolve_topic(source, application_id)
        return f"{application_id}-{store_name}-changelog"

    def source_topics(self) -> list[str]:
        """Topics read from outside (not produced by this topology)."""
        return [t for t in self._topic_sources if t not in self.internal_topics]

    def sink_topics(self) -> list[str]:
        out = []
        for node in self._nodes.values():
            if (
                isinstance(node, SinkNodeDef)
                and node.topic
                and node.topic not in self.internal_topics
            ):
                out.append(node.topic)
        return out

    def subtopologies(self) -> list[SubTopology]:
        """The sub-topologies, validated, numbered in the order their first node was added."""
        if self._subtopologies is None:
            self._subtopologies = self._group()
        return self._subtopologies

    def subtopology(self, subtopology_id: int) -> SubTopology:
        groups = self.subtopologies()
        if not 0 <= subtopology_id < len(groups):
            raise TopologyError(f"no sub-topology {subtopology_id}; there are {len(groups)}")
        return groups[subtopology_id]

    def _group(self) -> list[SubTopology]:
        if not any(isinstance(n, SourceNodeDef) for n in self._nodes.values()):
            raise TopologyError("the topology has no source node: add one with add_source")
        parent: dict[str, str] = {name: name for name in self._nodes}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(a: str, b: str) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[rb] = ra

        for node in self._nodes.values():
            for child in node.children:
                union(node.name, child)
        for store, users in self._store_users.items():
            if not users:
                raise TopologyError(f"state store {store!r} is not connected to any processor")
            for user in users[1:]:
                union(users[0], user)
        order: list[str] = []
        members: dict[str, list[NodeDef]] = {}
        for name, node in self._nodes.items():
            root = find(name)
            if root not in members:
                members[root] = []
                order.append(root)
            members[root].append(node)
        groups = []
        for index, root in enumerate(order):
            nodes = members[root]
            if not any(isinstance(n, SourceNodeDef) for n in nodes):
                raise TopologyError(
                    f"nodes {[n.name for n in nodes]} are not reachable from any source"
                )
            sources = [t for n in nodes if isinstance(n, SourceNodeDef) for t in n.topics]
            sinks = [n.topic for n in nodes if isinstance(n, SinkNodeDef) and n.topic]
            stores: list[str] = []
            for n in nodes:
                if isinstance(n, ProcessorNodeDef):
                    stores.extend(s for s in n.stores if s not in stores)
            groups.append(SubTopology(index, nodes, sources, sinks, stores))
        return self._writers_first(groups)

    def _writers_first(self, groups: list[SubTopology]) -> list[SubTopology]:
        """The groups renumbered so that a sub-topology comes after those writing the internal
        topics it reads (the engine runs them in this order); otherwise in creation order.
        Sub-topologies that read each other's topics in a cycle (a foreign-key join's
        subscriptions and answers) keep their creation order: the first of them reads what
        the others wrote in earlier batches."""
        writers = {t: g.id for g in groups for t in g.sink_topics if t in self.internal_topics}
        placed: list[SubTopology] = []
        done: set[int] = set()
        pending = list(groups)
        while pending:
            for group in pending:
                needs = {writers[t] for t in group.source_topics if t in writers} - {group.id}
                if needs <= done:
                    break
            else:
                group = pending[0]
            pending.remove(group)
            done.add(group.id)
            placed.append(group)
        for index, group in enumerate(placed):
            group.id = index
        return placed

    def describe(self) -> TopologyDescription:
        """A printable description of sub-topologies, nodes, topics, stores and edges."""
        return TopologyDescription(self)
