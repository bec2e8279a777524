"""``streamtide consume``: print a topic's sealed records as JSON lines."""

from __future__ import annotations

import os
import sys
import time

import click

from streamtide.cli.common import (
    FormatName,
    log_option,
    opened_log,
    progress_bar,
    progress_option,
    reports_errors,
    resolve_formats,
    want_progress,
    window_size_option,
)
from streamtide.cli.formats import Format, FormatError
from streamtide.cli.jsonlines import format_record
from streamtide.log import Log, OffsetOutOfRangeError

_CHUNK = 10_000


@click.command()
@click.argument("topic")
@click.option(
    "--partition",
    "-p",
    type=click.IntRange(min=0),
    default=None,
    help="Only this partition (default: all, one after the other).",
)
@click.option(
    "--offset",
    type=click.IntRange(min=0),
    default=None,
    help="Start at this offset in every partition read.",
)
@click.option(
    "--from-beginning",
    is_flag=True,
    help="Start at the first readable offset (default: the end, i.e. only new "
    "records, as with Kafka).",
)
@click.option(
    "--max",
    "max_records",
    type=click.IntRange(min=0),
    default=None,
    help="Stop after this many records.",
)
@click.option("--follow", is_flag=True, help="Keep waiting for new records (Ctrl-C stops).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=None,
    help="With --follow: stop after this many seconds.",
)
@click.option(
    "--key-format",
    type=FormatName(),
    default="text",
    show_default=True,
    help="How keys are printed: string/text (UTF-8), long (8 bytes), int (4 bytes), double, "
    "json (parsed), bytes/hex, base64; windowed keys as key@[start,end): "
    "session-windowed-string/-long (Serdes.session_windowed), time-windowed-string/-long "
    "with --window-size (Serdes.time_windowed), legacy-windowed-string/-long "
    "(the deprecated Serdes.windowed).",
)
@click.option(
    "--value-format",
    type=FormatName(),
    default="text",
    show_default=True,
    help="How values are printed (the same formats as --key-format).",
)
@click.option(
    "--timestamps",
    type=click.Choice(["ms", "iso"]),
    default="ms",
    show_default=True,
    help="Record timestamps as epoch milliseconds or ISO-8601 UTC times.",
)
@window_size_option
@log_option
@progress_option
@reports_errors
def consume(
    topic: str,
    partition: int | None,
    offset: int | None,
    from_beginning: bool,
    max_records: int | None,
    follow: bool,
    timeout: float | None,
    key_format: str,
    value_format: str,
    timestamps: str,
    window_size: int | None,
    log_url: str,
    progress: bool | None,
) -> None:
    """Print records of TOPIC as JSON lines with partition, offset, timestamp, key, value.

    Keys and values are decoded with --key-format/--value-format, e.g. a session count:
    --key-format session-windowed-string --value-format long."""
    if offset is not None and from_beginning:
        raise click.UsageError("--offset and --from-beginning exclude each other")
    key_layout, value_layout = resolve_formats(key_format, value_format, window_size)
    with opened_log(log_url) as log:
        count = log.partitions(topic)
        if partition is not None and partition >= count:
            raise click.ClickException(
                f"topic {topic!r} has partitions 0..{count - 1}; there is no partition {partition}"
            )
        chosen = [partition] if partition is not None else list(range(count))
        positions = {p: _start(log, topic, p, offset, from_beginning) for p in chosen}
        budget = max_records
        pending = sum(log.end_offset(topic, p) - positions[p] for p in chosen)
        total = pending if budget is None else min(pending, budget)
        enabled = want_progress(progress, stdout_too=True) and not follow
        deadline = None if timeout is None else time.monotonic() + timeout
        printed = 0
        try:
            with progress_bar(enabled, f"consuming {topic}", total) as advance:
                while True:
                    for p in chosen:
                        n = _drain(
                            log, topic, p, positions, budget, (key_layout, value_layout, timestamps)
                        )
                        advance(n)
                        printed += n
                        budget = None if budget is None else budget - n
                    done = budget == 0 or not follow
                    if done or (deadline is not None and time.monotonic() >= deadline):
                        break
                    time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        except BrokenPipeError:  # e.g. piped into `head`
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return
    if printed == 0 and offset is None and not from_beginning and not follow:
        click.echo(
            "no records: reading starts at the end of the topic; pass --from-beginning or "
            "--offset N (or --follow to wait for new records)",
            err=True,
        )


def _start(log: Log, topic: str, partition: int, offset: int | None, from_beginning: bool) -> int:
    begin = log.begin_offset(topic, partition)
    end = log.end_offset(topic, partition)
    if from_beginning:
        return begin
    if offset is None:
        return end
    if offset < begin:
        raise OffsetOutOfRangeError(
            f"offset {offset} of {topic}/{partition} was truncated; the first readable offset "
            f"is {begin}"
        )
    return min(offset, end)


def _drain(
    log: Log,
    topic: str,
    partition: int,
    positions: dict[int, int],
    budget: int | None,
    layout: tuple[Format, Format, str],
) -> int:
    """Print the records from the partition's position to its end (within the budget)."""
    printed = 0
    while budget is None or printed < budget:
        limit = _CHUNK if budget is None else min(_CHUNK, budget - printed)
        records = list(log.read(topic, partition, positions[partition], max_records=limit))
        if not records:
            break
        try:
            lines = [format_record(r, partition, *layout) for r in records]
        except FormatError as e:
            raise click.ClickException(
                f"{e}; pick another --key-format/--value-format (bytes prints any record)"
            ) from None
        click.echo("\n".join(lines))
        positions[partition] = records[-1].offset + 1  # type: ignore[operator]
        printed += len(records)
    return printed
