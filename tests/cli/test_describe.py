"""``topology.describe().to_mermaid()`` and ``streamtide describe``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from streamtide.cli import main
from streamtide.cli.demo_app import build_topology


def test_mermaid_has_every_node_topic_store_and_edge() -> None:
    description = build_topology().describe()
    chart = description.to_mermaid()
    lines = chart.splitlines()
    assert lines[0] == "flowchart TD"
    nodes = re.findall(r'^    (n\d+)\["([^"]+)"\]$', chart, re.MULTILINE)
    ids = {label: node_id for node_id, label in nodes}
    assert len(ids) == len(nodes) == sum(len(sub.nodes) for sub in description.subtopologies)
    edges = set(re.findall(r"^  (\w+) (-->|-\.-) (\w+)$", chart, re.MULTILINE))
    assert len(re.findall(r"^  subgraph sub\d+", chart, re.MULTILINE)) == 3
    for sub in description.subtopologies:
        for node in sub.nodes:
            for child in node.children:
                assert (ids[node.name], "-->", ids[child]) in edges
            for topic in getattr(node, "topics", []):
                assert (labels_id(chart, topic), "-->", ids[node.name]) in edges
            for store in getattr(node, "stores", []):
                assert (ids[node.name], "-.-", store_id(chart, store)) in edges
    assert (ids["KSTREAM-SINK-0000000003"], "-->", labels_id(chart, "session-counts")) in edges


def labels_id(chart: str, topic: str) -> str:
    return re.search(rf'^  (t\d+)\(\["{re.escape(topic)}"\]\)$', chart, re.MULTILINE).group(1)


def store_id(chart: str, store: str) -> str:
    return re.search(rf'^  (s\d+)\[\("{re.escape(store)}"\)\]$', chart, re.MULTILINE).group(1)


def test_describe_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    text = runner.invoke(main, ["describe", "streamtide.cli.demo_app:build_topology"])
    assert text.exit_code == 0 and text.output == str(build_topology().describe())
    chart = runner.invoke(main, ["describe", "streamtide.cli.demo_app:build_topology", "--mermaid"])
    assert chart.exit_code == 0 and chart.output == build_topology().describe().to_mermaid()
    bad = runner.invoke(main, ["describe", "streamtide.cli.demo_app:nothing"])
    assert bad.exit_code == 1 and "has no attribute 'nothing'" in bad.output
