"""``streamtide run``: run an application's topology on Spark."""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import click

from streamtide.cli.common import reports_errors, want_progress
from streamtide.cli.interrupt import (
    StopRequest,
    batches_until_caught_up,
    configure_logging,
    spark_started,
)
from streamtide.cli.live import live_progress
from streamtide.cli.settings import build_config, config_options
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
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="TOML file with StreamsConfig settings (flags override it).",
)
@click.option("--master", default=None, help="Spark master URL (default local[2]).")
@click.option("--until-caught-up", is_flag=True, help="Exit once no input is waiting.")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a live line while a batch runs (default: only when stderr is a terminal).",
)
@config_options
@reports_errors
def run(
    target: str,
    config_file: str | None,
    master: str | None,
    until_caught_up: bool,
    progress: bool | None,
    **settings: Any,
) -> None:
    """Run the topology TARGET (module:attribute) on Spark until interrupted.

    Settings come from --config FILE (TOML, keys named like StreamsConfig's fields, plus
    master) and from the flags below, which override the file. Ctrl-C stops after the running
    batch (Ctrl-C again: at once) and exits with status 130.
    """
    from streamtide.engine.app import StreamsApp

    configure_logging(logging.INFO)
    config, run_settings = build_config(config_file, {"master": master, **settings})
    topology = load_topology(target)
    app = StreamsApp(topology, config, master=run_settings["master"])
    app.log.list_topics()  # reach the log before Spark starts: a wrong --log fails fast
    with spark_started(app) as stop:
        if not stop.requested:
            _run(app, stop, until_caught_up, want_progress(progress))


def _run(app: Any, stop: StopRequest, until_caught_up: bool, progress: bool) -> None:
    """Run ``app`` until it is caught up (or, without ``until_caught_up``, until it fails)
    or a stop is requested."""
    announced = False

    def announce_metrics() -> None:
        nonlocal announced
        if app.metrics_url is not None and not announced:
            click.echo(f"metrics: {app.metrics_url}", err=True)
            announced = True

    with live_progress(app, progress):
        if until_caught_up:
            for done in batches_until_caught_up(app, stop):
                announce_metrics()
                click.echo(done.summary())
            return
        app.start()
        announce_metrics()
        while not stop.requested and app.await_termination(timeout=0.5) is False:
            pass
