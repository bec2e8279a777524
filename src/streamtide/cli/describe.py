"""``streamtide describe``: print a topology as text or as a Mermaid flowchart."""

from __future__ import annotations

import click

from streamtide.cli.common import reports_errors


@click.command()
@click.argument("target")
@click.option(
    "--mermaid",
    is_flag=True,
    help="Print a Mermaid flowchart (paste it into a Markdown file or mermaid.live).",
)
@reports_errors
def describe(target: str, mermaid: bool) -> None:
    """Describe the topology TARGET (module:attribute): sub-topologies, nodes, topics, stores."""
    from streamtide.cli.run import load_topology

    description = load_topology(target).describe()
    click.echo(description.to_mermaid() if mermaid else str(description), nl=False)
