"""Pieces shared by the log commands: the ``--log`` option, error reporting, progress bars."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from streamtide.errors import StreamtideError
from streamtide.log import DEFAULT_LOG_URL, Log, open_log

F = TypeVar("F", bound=Callable[..., Any])

#: ``--log URL``: where the topics live; defaults to $STREAMTIDE_LOG, then ./streamtide-data.
log_option = click.option(
    "--log",
    "log_url",
    envvar="STREAMTIDE_LOG",
    default=DEFAULT_LOG_URL,
    show_default=True,
    metavar="URL",
    help="Log to use: file:///path or a directory (env: STREAMTIDE_LOG).",
)

#: ``--progress/--no-progress``: default is a bar only when stderr is a terminal.
progress_option = click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr (default: only when stderr is a terminal).",
)


def reports_errors(func: F) -> F:
    """Turn Streamtide errors into a one-line message and exit code 1 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except StreamtideError as e:
            raise click.ClickException(str(e)) from e

    return wrapper  # type: ignore[return-value]


@contextmanager
def opened_log(url: str) -> Iterator[Log]:
    """The log at ``url``, closed on exit."""
    log = open_log(url)
    try:
        yield log
    finally:
        log.close()


def want_progress(flag: bool | None, *, stdout_too: bool = False) -> bool:
    """Resolve ``--progress``: explicit flag, else stderr is a terminal (and, when the command
    prints records, stdout is not the same terminal, so the bar never garbles the output)."""
    if flag is not None:
        return flag
    if not _isatty(sys.stderr):
        return False
    return not (stdout_too and _isatty(sys.stdout))


@contextmanager
def progress_bar(
    enabled: bool, description: str, total: int | None, *, in_bytes: bool = False
) -> Iterator[Callable[[int], None]]:
    """A function advancing a rich progress bar on stderr (a no-op when not ``enabled``).
    ``in_bytes``: the total and the steps are bytes (shown as sizes), not records."""
    if not enabled:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    count = DownloadColumn() if in_bytes else MofNCompleteColumn()
    columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), count]
    with Progress(*columns, TimeElapsedColumn(), console=Console(stderr=True)) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n: progress.advance(task, n)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty()) and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False
