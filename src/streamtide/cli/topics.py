"""``streamtide topics create|list|describe|delete``."""

from __future__ import annotations

import json

import click

from streamtide.cli.common import log_option, opened_log, reports_errors, require_existing_log


@click.group()
def topics() -> None:
    """Create, list, describe and delete topics."""


@topics.command()
@click.argument("name")
@click.option("--partitions", "-p", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--if-not-exists", is_flag=True, help="Succeed if it exists with this many partitions."
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A topic config, e.g. cleanup.policy=compact (Kafka logs; repeatable).",
)
@log_option
@reports_errors
def create(
    name: str, partitions: int, if_not_exists: bool, configs: tuple[str, ...], log_url: str
) -> None:
    """Create topic NAME."""
    settings = {}
    for item in configs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--config")
        settings[key] = value
    with opened_log(log_url) as log:
        log.create_topic(name, partitions, exist_ok=if_not_exists, configs=settings)
    click.echo(f"created topic {name} with {partitions} partition(s)")


@topics.command(name="list")
@log_option
@reports_errors
def list_(log_url: str) -> None:
    """Print the topic names, one per line."""
    require_existing_log(log_url)
    with opened_log(log_url) as log:
        for name in log.list_topics():
            click.echo(name)


@topics.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@log_option
@reports_errors
def describe(name: str, as_json: bool, log_url: str) -> None:
    """Show topic NAME: partitions with their begin and end offsets."""
    with opened_log(log_url) as log:
        desc = log.describe_topic(name)
        rows = [
            {
                "partition": p,
                "begin_offset": log.begin_offset(name, p),
                "end_offset": log.end_offset(name, p),
            }
            for p in range(desc.partitions)
        ]
    if as_json:
        click.echo(json.dumps({"topic": name, "partitions": desc.partitions, "offsets": rows}))
        return
    total = sum(r["end_offset"] - r["begin_offset"] for r in rows)
    click.echo(f"topic: {name}  partitions: {desc.partitions}  records: {total}")
    click.echo(f"{'partition':>9}  {'begin':>12}  {'end':>12}  {'records':>12}")
    for r in rows:
        count = r["end_offset"] - r["begin_offset"]
        click.echo(
            f"{r['partition']:>9}  {r['begin_offset']:>12}  {r['end_offset']:>12}  {count:>12}"
        )


@topics.command()
@click.argument("name")
@log_option
@reports_errors
def delete(name: str, log_url: str) -> None:
    """Delete topic NAME and all its records."""
    with opened_log(log_url) as log:
        log.delete_topic(name)
    click.echo(f"deleted topic {name}")
