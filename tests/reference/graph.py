"""The interpreter's graph: nodes (one ``Node`` class and its arguments each), the
repartition topics between them, and the groups of nodes (sub-topologies) that tasks run.

A group is a set of nodes connected other than through a repartition topic (parent edges,
and a join's lookups into a table of the same task). Groups run in dependency order: one
that reads a repartition topic after the groups that write it; groups that read each
other's topics in a cycle (a foreign-key join) in creation order, the first reading what
the others wrote in earlier batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
    #: global table topic -> (store, key serde, value serde)
    global_tables: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    groups: list[list[int]] = field(default_factory=list)  # node ids, groups in run order

    def add(self, cls: Any, parents: list[int], topic: str | None = None, **args: Any) -> int:
        node = GNode(len(self.nodes), cls, args, list(parents), topic)
        self.nodes.append(node)
        return node.id

    def sources(self, group: int) -> list[GNode]:
        """The group's source nodes, in the order they were added (the task's source list)."""
        return [self.nodes[i] for i in self.groups[group] if self.nodes[i].topic is not None]

    def form_groups(self) -> None:
        parent = list(range(len(self.nodes)))

        def root(i: int) -> int:
            while parent[i] != i:
                i = parent[i]
            return i

        for node in self.nodes:
            for other in node.parents + node.links:
                parent[root(node.id)] = root(other)
        members: dict[int, list[int]] = {}
        for node in self.nodes:
            members.setdefault(root(node.id), []).append(node.id)
        groups = sorted(members.values(), key=min)
        writes = [{self.nodes[i].args.get("sink_topic") for i in g} & self.internal for g in groups]
        reads = [{self.nodes[i].topic for i in g} & self.internal for g in groups]
        order: list[int] = []
        while len(order) < len(groups):
            ready = [
                i
                for i in range(len(groups))
                if i not in order
                and not any(
                    reads[i] & writes[o] for o in range(len(groups)) if o not in order and o != i
                )
            ]
            if not ready:  # a cycle (a foreign-key join): creation order, as the product
                ready = [i for i in range(len(groups)) if i not in order]
            order.append(ready[0])
        self.groups = [groups[i] for i in order]
