"""``streamtide run`` and ``streamtide status``: run an application, show its state."""

from __future__ import annotations

import importlib
import logging
import sys
import time
from typing import Any

import click

from streamtide.cli.common import log_option, reports_errors
from streamtide.config import StreamsConfig
from streamtide.errors import ConfigError
from streamtide.processor.topology import Topology


def load_topology(target: str) -> Topology:
    """``module:attr`` naming a Topology, a StreamsBuilder or a function returning either."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"expected module:attribute, got {target!r}")
    sys.path.insert(0, ".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import module {module_name!r}: {exc}") from exc
    finally:
        sys.path.pop(0)
    try:
        value: Any = getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"module {module_name!r} has no attribute {attr!r}") from None
    if callable(value) and not isinstance(value, Topology):
        value = value()
    if hasattr(value, "build") and not isinstance(value, Topology):
        value = value.build()
    if not isinstance(value, Topology):
        raise ConfigError(f"{target} is not a Topology (got {type(value).__name__})")
    return value


@click.command()
@click.argument("target")
@click.option("--application-id", required=True, help="Names the application's state.")
@log_option
@click.option("--state-dir", default="./streamtide-state", show_default=True)
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option("--standbys", "num_standby_replicas", default=0, show_default=True, type=int)
@click.option("--until-caught-up", is_flag=True, help="Exit once no input is waiting.")
@reports_errors
def run(
    target: str,
    application_id: str,
    log_url: str,
    state_dir: str,
    master: str,
    num_standby_replicas: int,
    until_caught_up: bool,
) -> None:
    """Run the topology TARGET (module:attribute) on Spark until interrupted."""
    from streamtide.engine.app import StreamsApp

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    topology = load_topology(target)
    config = StreamsConfig(
        application_id=application_id,
        log=log_url,
        state_dir=state_dir,
        num_standby_replicas=num_standby_replicas,
    )
    app = StreamsApp(topology, config, master=master)
    try:
        if until_caught_up:
            for progress in app.run_until_caught_up():
                click.echo(progress.summary())
            return
        app.start()
        while app.await_termination(timeout=1.0) is False:
            time.sleep(0)
    except KeyboardInterrupt:
        click.echo("stopping ...", err=True)
    finally:
        app.stop()


@click.command()
@click.option("--application-id", required=True)
@log_option
@reports_errors
def status(application_id: str, log_url: str) -> None:
    """Show tasks, owners, lags and the latest batches of an application."""
    from rich.console import Console
    from rich.table import Table

    from streamtide.engine.app import read_status

    info = read_status(StreamsConfig(application_id=application_id, log=log_url))
    console = Console()
    if not info.get("batches"):
        console.print(f"application {application_id!r} has not committed a batch yet")
        return
    tasks = Table(title=f"{application_id}: tasks after batch {info['last_batch']}")
    for column in ("task", "owner", "standbys", "lag", "stream time"):
        tasks.add_column(column)
    standbys = info.get("standbys", {})
    for task, row in info["tasks"].items():
        holders = ", ".join(c for c, held in standbys.items() if task in held) or "-"
        tasks.add_row(task, str(row["owner"]), holders, str(row["lag"]), str(row["stream_time"]))
    console.print(tasks)
    batches = Table(title="latest batches")
    for column in ("batch", "in", "out", "ms", "restored"):
        batches.add_column(column, justify="right")
    for b in info["batches"]:
        batches.add_row(
            str(b.get("batch")),
            str(b.get("input_records")),
            str(b.get("output_records")),
            f"{b.get('duration_ms', 0):.0f}",
            str(b.get("restored_records")),
        )
    console.print(batches)
