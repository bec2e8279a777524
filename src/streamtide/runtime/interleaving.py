"""Where a task must hand rows on one at a time: the static cut analysis of a sub-topology.

Record-at-a-time processing (the reference semantics) runs each record depth-first through
the graph before the next record. A task instead hands a batch breadth-first: a node's first
child takes the whole batch and its subtree runs, then the next child. Within one source's
rows the two orders give the same outputs per topic partition, the same stores and metrics,
unless two things under one node interact through something both reach:

- **converging paths**: a node reached from two children (a merge after a split, a
  self-join): it would see the rows in another order;
- **a store used by both**: one side would read the other's writes of later rows;
- **one sink topic written by both**: the topic's records would come in another order (a
  sink that chooses its topic per record may write any topic).

Such a node (``depth_first``) hands each of its output rows to all its children before the
next row. And a node that shares a store with a node below it (a node reading what an
ancestor wrote) must get its input one row at a time, so all of its parents hand rows on one
at a time, and so does the node itself (a Processor API node then hands each forwarded record
on at once, before its ``process`` goes on: ``runtime.adapter``).

Rows of different source topics are never in one batch: the task cuts its input into runs of
one topic (``runtime.stream_task``), so sources that share stores (a table and the stream
joined with it) or meet at a node (a stream-stream join) interleave exactly by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

from streamtide.processor.nodes import NodeDef, ProcessorNodeDef, SinkNodeDef
from streamtide.processor.topology import SubTopology


def depth_first_nodes(subtopology: SubTopology, resolve: Callable[[str], str]) -> set[str]:
    """The nodes of ``subtopology`` that must hand rows on one at a time (see the module
    docstring); ``resolve`` gives a sink's physical topic."""
    nodes = {node.name: node for node in subtopology.nodes}
    reach: dict[str, frozenset[str]] = {}

    def reachable(name: str) -> frozenset[str]:
        found = reach.get(name)
        if found is None:
            below: set[str] = {name}
            for child in nodes[name].children:
                below |= reachable(child)
            found = reach[name] = frozenset(below)
        return found

    def footprint(names: frozenset[str]) -> tuple[frozenset[str], set[str], set[str]]:
        stores: set[str] = set()
        sinks: set[str] = set()
        for name in names:
            node = nodes[name]
            stores.update(_stores(node))
            if isinstance(node, SinkNodeDef):
                sinks.add(resolve(node.topic) if node.topic else ANY_TOPIC)
        return names, stores, sinks

    marked: set[str] = set()
    for node in nodes.values():
        if len(node.children) > 1:
            prints = [footprint(reachable(child)) for child in node.children]
            if any(
                a_nodes & b_nodes or a_stores & b_stores or _may_share(a_sinks, b_sinks)
                for (a_nodes, a_stores, a_sinks), (b_nodes, b_stores, b_sinks) in combinations(
                    prints, 2
                )
            ):
                marked.add(node.name)
        own = set(_stores(node))
        if own:
            below = reachable(node.name) - {node.name}
            if own & footprint(below)[1]:
                marked.update(node.parents)
                marked.add(node.name)
    return marked


#: What a sink choosing its topic per record may write: any topic.
ANY_TOPIC = "\x00any topic"


def _may_share(a_sinks: set[str], b_sinks: set[str]) -> bool:
    """Whether two sets of sinks may write one topic (a per-record topic may be any)."""
    if a_sinks & b_sinks:
        return True
    return bool(a_sinks and b_sinks) and (ANY_TOPIC in a_sinks or ANY_TOPIC in b_sinks)


def _stores(node: NodeDef) -> list[str]:
    return node.stores if isinstance(node, ProcessorNodeDef) else []
