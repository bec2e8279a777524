"""``streamtide run``: run an application's topology on Spark."""

from __future__ import annotations

import importlib
import logging
import sys
import time
from typing import Any

import click

from streamtide.cli.common import reports_errors, want_progress
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
    master) and from the flags below, which override the file.
    """
    from streamtide.engine.app import StreamsApp

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config, run_settings = build_config(config_file, {"master": master, **settings})
    topology = load_topology(target)
    app = StreamsApp(topology, config, master=run_settings["master"])
    if config.metrics_port:
        host = config.metrics_bind_address
        host = f"[{host}]" if ":" in host else host
        click.echo(f"metrics: http://{host}:{config.metrics_port}/metrics", err=True)
    try:
        with live_progress(app, want_progress(progress)):
            if until_caught_up:
                for done in app.run_until_caught_up():
                    click.echo(done.summary())
                return
            app.start()
            while app.await_termination(timeout=1.0) is False:
                time.sleep(0)
    except KeyboardInterrupt:
        click.echo("stopping ...", err=True)
    finally:
        app.stop()
