"""``streamtide demo``: the main job, end to end on the embedded log and local Spark."""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from streamtide.cli.common import reports_errors
from streamtide.cli.interrupt import batches_until_caught_up, configure_logging, spark_started


@click.command()
@click.option(
    "--dir",
    "directory",
    default="./streamtide-demo",
    show_default=True,
    help="Where the demo keeps its log and state (wiped at start).",
)
@click.option("--users", default=40, show_default=True, help="Users in the generated clickstream.")
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option(
    "--batch-size",
    default=60,
    show_default=True,
    help="max_records_per_batch: small, so the demo shows several batches.",
)
@click.option(
    "--kafka",
    is_flag=True,
    help="Run on a local Kafka-protocol broker (noida-db, a development dependency) instead "
    "of the embedded log.",
)
@reports_errors
def demo(directory: str, users: int, master: str, batch_size: int, kafka: bool) -> None:
    """Deduplicate a clickstream, count user sessions and summarize pages per minute."""
    from rich.console import Console

    from streamtide.config import check_master

    check_master(master)
    console = Console()
    configure_logging(logging.WARNING)
    root = Path(directory).resolve()
    shutil.rmtree(root, ignore_errors=True)
    if not kafka:
        _run(console, root, f"file://{root / 'log'}", {}, users, master, batch_size)
        return
    from streamtide.testing.kafka_broker import start_broker

    console.print("starting a local Kafka-protocol broker (noida-db) ...")
    broker = start_broker(root / "kafka")
    try:
        console.print(f"broker on {broker.bootstrap}, data in {root / 'kafka'}")
        # the demo's clicks carry past timestamps: keep them (no time retention)
        _run(console, root, broker.url, KAFKA_DEMO_OPTIONS, users, master, batch_size)
    finally:
        broker.stop()


#: Topic settings of the demo's Kafka topics: its clicks are timestamped in January 2026,
#: which Kafka's default time retention (7 days) would delete at once.
KAFKA_DEMO_OPTIONS = {"topic.retention.ms": "-1"}


def _run(
    console: Any,
    root: Path,
    url: str,
    options: dict[str, str],
    users: int,
    master: str,
    batch_size: int,
) -> None:
    from streamtide import StreamsConfig
    from streamtide.cli import demo_app
    from streamtide.engine.app import StreamsApp
    from streamtide.log import open_log

    log = open_log(url, **options)
    events = demo_app.generate_clicks(users)
    demo_app.write_clicks(log, events)
    distinct = len({e["event_id"] for _, e in events})
    console.print(
        f"[bold]Streamtide demo[/]: wrote {len(events)} clicks ({len(events) - distinct} resent) "
        f"of {users} users to topic [cyan]clicks[/] in {url}"
    )
    topology = demo_app.build_topology()
    console.print(str(topology.describe()), style="dim", markup=False, highlight=False)
    config = StreamsConfig(
        application_id="clickstats",
        log=url,
        log_options=options,
        state_dir=str(root / "state"),
        max_records_per_batch=batch_size,
        cache_enabled=True,
    )
    console.print(f"starting Spark ({master}) ...")
    started = time.perf_counter()
    app = StreamsApp(topology, config, master=master)
    with (
        console.status("running batches until the input is consumed ..."),
        spark_started(app) as stop,
    ):
        progress = [] if stop.requested else list(batches_until_caught_up(app, stop))
    elapsed = time.perf_counter() - started
    _show(console, log, progress, elapsed, len(events), distinct)
    if url.startswith("file://"):
        # one line that survives copy and paste: never wrapped, whatever the width
        console.print(
            f"Inspect it yourself: {inspect_command(url)}",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )
        hint = path_hint()
        if hint is not None:
            console.print(hint, soft_wrap=True, markup=False, highlight=False)
    log.close()


def inspect_command(url: str) -> str:
    """The ``consume`` command that prints the demo's session counts as they were written
    (session-windowed string keys, long counts)."""
    from streamtide.cli import demo_app

    return (
        f"streamtide consume {demo_app.SESSIONS} --log {shlex.quote(url)} --from-beginning "
        "--max 5 --key-format session-windowed-string --value-format long --timestamps iso"
    )


def path_hint() -> str | None:
    """How to run ``streamtide`` when this installation's command is not on the PATH (as
    under ``./dev demo``, which does not activate the venv); None when it is."""
    script = Path(sys.executable).with_name("streamtide")
    found = shutil.which("streamtide")
    if found is not None and Path(found).resolve() == script.resolve():
        return None
    venv = Path(os.path.relpath(script.parent.parent)) if script.exists() else None
    if venv is None or venv.parts[:1] == ("..",):
        venv = script.parent.parent
    return (
        f"(streamtide is not on your PATH: run `source {venv}/bin/activate` first, or run "
        "the command as ./dev streamtide consume ... in the repository)"
    )


def _show(console, log, progress, elapsed: float, events: int, distinct: int) -> None:
    from rich.table import Table

    from streamtide import Serdes
    from streamtide.cli import demo_app

    batches = Table(title="batches")
    for column in ("batch", "records processed", "records written", "ms", "changelog replayed"):
        batches.add_column(column, justify="right")
    for p in progress:
        batches.add_row(
            str(p.batch),
            str(p.input_records),
            str(p.output_records),
            f"{p.duration_ms:.0f}",
            str(p.restored_records),
        )
    console.print(batches)
    processed = sum(p.input_records for p in progress)
    console.print(
        f"records processed: {processed} = the {events} clicks read from {demo_app.CLICKS} and "
        f"{processed - events} records read back from the repartition topics between the "
        "sub-topologies (the clicks by event id for deduplication, the unique clicks by user "
        "for the sessions)",
        style="dim",
    )

    key_serde, count_serde = Serdes.session_windowed(Serdes.string()), Serdes.long()
    sessions: dict[tuple, int | None] = {}
    for partition in range(log.partitions(demo_app.SESSIONS)):
        for record in log.read(demo_app.SESSIONS, partition):
            key = key_serde.deserialize(record.key)
            if key is None:  # every session has a key
                continue
            sessions[(key.key, key.window.start, key.window.end)] = count_serde.deserialize(
                record.value
            )
    per_user: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for (user, start, end), count in sessions.items():
        if count is not None:
            per_user[user].append((start, end, count))
    table = Table(title="sessions per user (5 min inactivity gap), first 10 users")
    for column in ("user", "sessions", "clicks", "longest session"):
        table.add_column(column, justify="right" if column != "user" else "left")
    for user in sorted(per_user)[:10]:
        rows = per_user[user]
        longest = max(end - start for start, end, _ in rows)
        table.add_row(
            user, str(len(rows)), str(sum(c for *_, c in rows)), f"{longest / 60000:.1f} min"
        )
    console.print(table)

    minutes: dict[int, Counter] = defaultdict(Counter)
    for partition in range(log.partitions(demo_app.SUMMARY)):
        for record in log.read(demo_app.SUMMARY, partition):
            minute = Serdes.long().deserialize(record.key)
            if minute is None:  # every summary row has a minute
                continue
            minutes[minute].update(Serdes.json().deserialize(record.value))
    summary = Table(title="clicks per page per minute of stream time (first 10 minutes, UTC)")
    summary.add_column("minute", justify="right")
    for page in demo_app.PAGES:
        summary.add_column(page, justify="right")
    for minute in sorted(minutes)[:10]:
        summary.add_row(_clock(minute), *(str(minutes[minute].get(p, 0)) for p in demo_app.PAGES))
    console.print(summary)
    total_sessions = sum(len(v) for v in per_user.values())
    counted = sum(c for rows in per_user.values() for *_, c in rows)
    console.print(
        f"{events} clicks in, {distinct} unique after deduplication, {counted} counted in "
        f"{total_sessions} sessions; {len(progress)} batches in {elapsed:.1f} s."
    )
    if counted == distinct:
        console.print("[green]check:[/] every unique click is counted exactly once")
    else:
        console.print(f"[red]check failed:[/] {counted} counted, {distinct} expected")
        raise SystemExit(1)


def _clock(epoch_ms: int) -> str:
    """``HH:MM`` (UTC) of an event-time minute, as the summary table shows it."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc).strftime("%H:%M")
