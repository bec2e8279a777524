"""Human-readable description of a topology, in the layout Kafka Streams users know."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamtide.processor.nodes import ProcessorNodeDef, SinkNodeDef, SourceNodeDef

if TYPE_CHECKING:
    from streamtide.processor.topology import Topology


class TopologyDescription:
    """``str()`` prints sub-topologies, their nodes, topics, stores and edges."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.subtopologies = topology.subtopologies()

    def __str__(self) -> str:
        lines = ["Topologies:"]
        for sub in self.subtopologies:
            lines.append(f"   Sub-topology: {sub.id}")
            for node in sub.nodes:
                if isinstance(node, SourceNodeDef):
                    lines.append(f"    Source: {node.name} (topics: [{', '.join(node.topics)}])")
                elif isinstance(node, ProcessorNodeDef):
                    lines.append(f"    Processor: {node.name} (stores: [{', '.join(node.stores)}])")
                elif isinstance(node, SinkNodeDef):
                    lines.append(f"    Sink: {node.name} (topic: {node.topic})")
                if not isinstance(node, SinkNodeDef):
                    children = ", ".join(sorted(node.children)) or "none"
                    lines.append(f"      --> {children}")
                if node.parents:
                    lines.append(f"      <-- {', '.join(sorted(node.parents))}")
        return "\n".join(lines) + "\n"

    __repr__ = __str__
