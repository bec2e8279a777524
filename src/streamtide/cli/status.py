"""``streamtide status``: an application's tasks, partitions, lag and latest batches."""

from __future__ import annotations

import json
from typing import Any

import click

from streamtide.cli.common import log_option, log_options, reports_errors
from streamtide.cli.formats import iso
from streamtide.config import StreamsConfig


def _time(ms: int | None) -> str:
    return "-" if ms is None or ms < 0 else iso(ms)


@click.command()
@click.option("--application-id", required=True)
@log_option
@click.option(
    "--history",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help=(
        "How many of the latest batches and assignment-history events (task moves, warm-ups, "
        "standbys, executors joining and leaving) to show. An application keeps its latest "
        "100 batches and about 1,000 events."
    ),
)
@click.option(
    "--state-dir",
    default="./streamtide-state",
    show_default=True,
    help="The application's state_dir: on a Kafka log its records are in "
    "<state-dir>/_apps/<application-id> on the driver's machine.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for scripts).")
@reports_errors
def status(application_id: str, log_url: str, history: int, state_dir: str, as_json: bool) -> None:
    """Show tasks, owners, per-partition lag, the latest batches and the assignment history
    (which tasks moved between executors, when and why) of an application.

    Lags are current: end offsets now minus the committed offsets, so they also show input
    that arrived after the application stopped.
    """
    from streamtide.engine.status import read_status

    config = StreamsConfig(
        application_id=application_id,
        log=log_url,
        log_options=log_options(log_url),
        state_dir=state_dir,
    )
    info = read_status(config, history)
    if as_json:
        click.echo(json.dumps(_with_iso_times(info), indent=2, sort_keys=True))
        return
    from rich.console import Console

    console = Console()
    if not info.get("batches"):
        console.print(f"application {application_id!r} has not committed a batch yet")
        return
    _print_tables(console, info)
    _print_history(console, info.get("history", []))


def _with_iso_times(info: dict[str, Any]) -> dict[str, Any]:
    """The status with an ISO-8601 twin (``*_iso``) next to every epoch-ms time."""
    out = dict(info)
    if info.get("committed_at") is not None:
        out["committed_at_iso"] = _time(info["committed_at"])
    out["tasks"] = {
        t: {**row, "stream_time_iso": _time(row["stream_time"])}
        for t, row in info.get("tasks", {}).items()
    }
    out["batches"] = [
        {**b, "committed_at_iso": _time(b.get("committed_at") or None)}
        for b in info.get("batches", [])
    ]
    out["history"] = [{**e, "at_iso": _time(e.get("at"))} for e in info.get("history", [])]
    return out


def _print_tables(console: Any, info: dict[str, Any]) -> None:
    from rich.table import Table

    last = info["batches"][-1]
    console.print(
        f"[bold]{info['application_id']}[/]: last batch {info['last_batch']}, committed "
        f"{_time(info.get('committed_at'))}: {last.get('input_records', 0)} in, "
        f"{last.get('output_records', 0)} out, {last.get('duration_ms', 0):.0f} ms "
        f"(commit {last.get('commit_ms', 0):.0f} ms), restored {last.get('restored_records', 0)}"
    )
    tasks = Table(title="tasks")
    for column in ("task", "state", "owner", "standbys", "lag", "stream time", "restored"):
        tasks.add_column(column, justify="right" if column in ("lag", "restored") else "left")
    standbys = info.get("standbys", {})
    for task, row in info["tasks"].items():
        holders = ", ".join(c for c, held in standbys.items() if task in held) or "-"
        tasks.add_row(
            task,
            row["state"],
            str(row["owner"]),
            holders,
            str(row["lag"]),
            _time(row["stream_time"]),
            str(row["restored_records"]),
        )
    console.print(tasks)
    if info.get("standby_note"):
        console.print(f"standbys: {info['standby_note']}")
    partitions = Table(title="source partitions")
    for column in ("topic", "partition", "task", "committed", "end", "lag"):
        partitions.add_column(column, justify="left" if column in ("topic", "task") else "right")
    for p in info.get("partitions", []):
        partitions.add_row(
            p["topic"],
            str(p["partition"]),
            p["task"],
            str(p["committed"]),
            str(p["end"]),
            str(p["lag"]),
        )
    console.print(partitions)
    batches = Table(title=f"latest {len(info['batches'])} batches")
    for column in ("batch", "committed", "in", "out", "ms", "commit ms", "restored", "lag"):
        batches.add_column(column, justify="left" if column == "committed" else "right")
    for b in info["batches"]:
        batches.add_row(
            str(b.get("batch")),
            _time(b.get("committed_at") or None),
            str(b.get("input_records")),
            str(b.get("output_records")),
            f"{b.get('duration_ms', 0):.0f}",
            f"{b.get('commit_ms', 0):.0f}",
            str(b.get("restored_records")),
            str(sum(b.get("lag", {}).values())),
        )
    console.print(batches)


def _print_history(console: Any, events: list[dict[str, Any]]) -> None:
    """The assignment history: one row per event, oldest first."""
    from rich.table import Table

    if not events:
        console.print("assignment history: no task has moved yet")
        return
    table = Table(title=f"assignment history (latest {len(events)} events)")
    for column in (
        "time",
        "batch",
        "event",
        "task",
        "from",
        "to",
        "reason",
        "lag",
        "restored",
        "restore ms",
    ):
        numeric = column in ("batch", "lag", "restored", "restore ms")
        table.add_column(column, justify="right" if numeric else "left")

    def text(value: Any) -> str:
        return "-" if value is None else str(value)

    for e in events:
        table.add_row(
            _time(e.get("at")),
            text(e.get("batch")),
            text(e.get("kind")),
            text(e.get("task")),
            text(e.get("source")),
            text(e.get("target")),
            text(e.get("reason")),
            text(e.get("lag")),
            text(e.get("restored_records")),
            text(e.get("restore_ms")),
        )
    console.print(table)
