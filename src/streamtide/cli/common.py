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
from streamtide.log import DEFAULT_LOG_URL, Log, LogError, is_kafka_url, open_log

F = TypeVar("F", bound=Callable[..., Any])

#: ``--log URL``: where the topics live; defaults to $STREAMTIDE_LOG, then ./streamtide-data.
log_option = click.option(
    "--log",
    "log_url",
    envvar="STREAMTIDE_LOG",
    default=DEFAULT_LOG_URL,
    show_default=True,
    metavar="URL",
    help="Log to use: file:///path, a directory, or kafka://host:port[,host:port] "
    "(env: STREAMTIDE_LOG; Kafka client settings: a key=value file named by "
    "STREAMTIDE_LOG_CONFIG).",
)

#: Names a file of Kafka client settings (``key=value`` lines, ``#`` comments, as in Kafka's
#: ``client.properties``) used with ``kafka://`` logs: security, SASL, TLS, ``topic.*``.
LOG_CONFIG_ENV = "STREAMTIDE_LOG_CONFIG"

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


def log_options(url: str) -> dict[str, str]:
    """Client settings for ``url``: for a ``kafka://`` log, those of the file named by
    $STREAMTIDE_LOG_CONFIG (if set); none for the file log."""
    path = os.environ.get(LOG_CONFIG_ENV)
    if not path or not is_kafka_url(url):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise LogError(f"cannot read {LOG_CONFIG_ENV} file {path}: {e}") from None
    options: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith(("#", "!")):
            continue
        key, sep, value = text.partition("=")
        if not sep or not key.strip():  # the line is not quoted: it may hold a secret
            raise LogError(f"{path} line {number}: expected key=value")
        options[key.strip()] = value.strip()
    return options


@contextmanager
def opened_log(url: str) -> Iterator[Log]:
    """The log at ``url`` (with its client settings), closed on exit."""
    log = open_log(url, **log_options(url))
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
