"""Human-readable description of a topology, in the layout Kafka Streams users know."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamtide.processor.nodes import ProcessorNodeDef, SinkNodeDef, SourceNodeDef
from streamtide.processor.topic_name import describe_chooser

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
                    topics = (
                        node.pattern.pattern
                        if node.pattern is not None
                        else f"[{', '.join(node.topics)}]"
                    )
                    lines.append(f"    Source: {node.name} (topics: {topics})")
                elif isinstance(node, ProcessorNodeDef):
                    lines.append(f"    Processor: {node.name} (stores: [{', '.join(node.stores)}])")
                elif isinstance(node, SinkNodeDef) and node.topic_extractor is not None:
                    chooser = describe_chooser(node.topic_extractor)
                    lines.append(f"    Sink: {node.name} (extractor: {chooser})")
                elif isinstance(node, SinkNodeDef):
                    lines.append(f"    Sink: {node.name} (topic: {node.topic})")
                if not isinstance(node, SinkNodeDef):
                    children = ", ".join(sorted(node.children)) or "none"
                    lines.append(f"      --> {children}")
                if node.parents:
                    lines.append(f"      <-- {', '.join(sorted(node.parents))}")
        for spec in self.topology.global_stores.values():
            lines.append(f"   Global store: {spec.name} (topic: {spec.topic}; in every task)")
        return "\n".join(lines) + "\n"

    __repr__ = __str__

    def to_mermaid(self) -> str:
        """The topology as a Mermaid flowchart: one box per sub-topology with its nodes,
        topics as rounded shapes, stores as cylinders (dotted links to their processors)."""
        ids = _Ids()
        lines = ["flowchart TD"]
        edges: list[str] = []
        for sub in self.subtopologies:
            lines.append(f'  subgraph sub{sub.id}["Sub-topology {sub.id}"]')
            for node in sub.nodes:
                node_id = ids.of("n", node.name)
                lines.append(f'    {node_id}["{_label(node.name)}"]')
                if isinstance(node, SourceNodeDef):
                    edges += [f"  {ids.of('t', t)} --> {node_id}" for t in node.topics]
                elif isinstance(node, SinkNodeDef) and node.topic:
                    edges.append(f"  {node_id} --> {ids.of('t', node.topic)}")
                if isinstance(node, ProcessorNodeDef):
                    edges += [f"  {node_id} -.- {ids.of('s', store)}" for store in node.stores]
                for child in sorted(getattr(node, "children", ())):
                    edges.append(f"  {node_id} --> {ids.of('n', child)}")
            lines.append("  end")
        lines += [f'  {i}(["{_label(name)}"])' for name, i in ids.named("t")]
        lines += [f'  {i}[("{_label(name)}")]' for name, i in ids.named("s")]
        return "\n".join(lines + edges) + "\n"


class _Ids:
    """Short Mermaid ids (``n0``, ``t3``, ``s1``) for node, topic and store names."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], str] = {}

    def of(self, kind: str, name: str) -> str:
        key = (kind, name)
        if key not in self._ids:
            self._ids[key] = f"{kind}{sum(1 for k, _ in self._ids if k == kind)}"
        return self._ids[key]

    def named(self, kind: str) -> list[tuple[str, str]]:
        return [(name, i) for (k, name), i in self._ids.items() if k == kind]


def _label(text: str) -> str:
    return text.replace('"', "#quot;")
