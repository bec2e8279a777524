"""The ``streamtide`` command.

Sub-commands live in their own modules and are imported only when invoked (so ``streamtide
topics list`` never pays for importing Spark). To add one, add a line to ``COMMANDS``:
``"name": "module.path:click_object"``.
"""

from __future__ import annotations

import importlib

import click

from streamtide import __version__

COMMANDS: dict[str, str] = {
    "topics": "streamtide.cli.topics:topics",
    "produce": "streamtide.cli.produce:produce",
    "consume": "streamtide.cli.consume:consume",
    "run": "streamtide.cli.run:run",
    "status": "streamtide.cli.status:status",
    "describe": "streamtide.cli.describe:describe",
    "demo": "streamtide.cli.demo:demo",
}


class LazyGroup(click.Group):
    """A click group whose sub-commands are named by import path and loaded on first use."""

    def __init__(self, *args: object, lazy_commands: dict[str, str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_commands = lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands and cmd_name not in self.commands:
            module_name, _, attr = self.lazy_commands[cmd_name].partition(":")
            command = getattr(importlib.import_module(module_name), attr)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy_commands[cmd_name]} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(name="streamtide", cls=LazyGroup, lazy_commands=COMMANDS)
@click.version_option(__version__, prog_name="streamtide")
def main() -> None:
    """Streamtide: Kafka Streams for Python, run on Apache Spark."""


__all__ = ["COMMANDS", "LazyGroup", "main"]
