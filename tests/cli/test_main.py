"""The ``streamtide`` group: version, help and lazily registered commands."""

from __future__ import annotations

import click
from click.testing import CliRunner

from streamtide import __version__
from streamtide.cli import COMMANDS, LazyGroup, main


def test_version(runner: CliRunner) -> None:
    result = runner.invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"streamtide, version {__version__}"


def test_help_lists_the_log_commands(runner: CliRunner) -> None:
    result = runner.invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in ("topics", "produce", "consume"):
        assert name in result.stdout
    assert {"topics", "produce", "consume"} <= set(COMMANDS)


def test_unknown_command_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(main, ["nope"])
    assert result.exit_code == 2


def test_lazy_group_loads_commands_by_import_path(runner: CliRunner) -> None:
    group = LazyGroup(name="g", lazy_commands={"t": "streamtide.cli.topics:topics"})
    assert group.list_commands(click.Context(group)) == ["t"]
    result = runner.invoke(group, ["t", "--help"])
    assert result.exit_code == 0 and "Create, list, describe and delete topics" in result.stdout
    broken = LazyGroup(name="g", lazy_commands={"x": "streamtide.cli.common:log_option"})
    assert isinstance(runner.invoke(broken, ["x"]).exception, TypeError)
