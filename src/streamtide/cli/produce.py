"""``streamtide produce``: append JSON lines (file or stdin) to a topic."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

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
from streamtide.cli.jsonlines import LineError, parse_line
from streamtide.log import Log, LogRecord, partition_for_key


class _Batcher:
    """Buffers records per partition and appends them (one segment per partition) on flush."""

    def __init__(self, log: Log, topic: str, batch_size: int) -> None:
        self.log, self.topic, self.batch_size = log, topic, batch_size
        self.partitions = log.partitions(topic)
        self.buffers: dict[int, list[LogRecord]] = {}
        self.buffered = 0
        self.written = 0
        # Keyless records go round-robin, continuing from the topic's total record count so
        # that many small runs still spread over the partitions.
        ends = (log.end_offset(topic, p) for p in range(self.partitions))
        self._next_rr = sum(ends) % self.partitions

    def choose(self, key: bytes | None, explicit: int | None) -> int:
        if explicit is not None:
            if not 0 <= explicit < self.partitions:
                raise LineError(
                    f"partition {explicit} does not exist; {self.topic!r} has partitions "
                    f"0..{self.partitions - 1}"
                )
            return explicit
        if key is not None:
            return partition_for_key(key, self.partitions)
        p = self._next_rr
        self._next_rr = (p + 1) % self.partitions
        return p

    def add(self, record: LogRecord, partition: int) -> None:
        self.buffers.setdefault(partition, []).append(record)
        self.buffered += 1
        if self.buffered >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        for partition, records in sorted(self.buffers.items()):
            self.log.append(self.topic, partition, records)
            self.written += len(records)
        self.buffers.clear()
        self.buffered = 0


@click.command()
@click.argument("topic")
@click.option(
    "--file",
    "-f",
    "source",
    type=click.File("rb"),
    default="-",
    help="JSON lines to read (default: stdin).",
)
@click.option(
    "--partition",
    "-p",
    type=click.IntRange(min=0),
    default=None,
    help="Partition for records whose line names none (default: hash of the key, "
    "round-robin for keyless records).",
)
@click.option(
    "--key-format",
    type=FormatName(),
    default="text",
    show_default=True,
    help="How keys are written: text (strings as UTF-8, other JSON as JSON text), string, "
    "long, int, double, json, bytes/hex, base64; windowed keys (key@[start,end) or an object "
    "with key, start, end): session-windowed-string/-long, time-windowed-string/-long with "
    "--window-size, legacy-windowed-string/-long.",
)
@click.option(
    "--value-format",
    type=FormatName(),
    default="text",
    show_default=True,
    help="How values are written (the same formats as --key-format).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Records buffered before they are appended (one segment per partition).",
)
@window_size_option
@log_option
@progress_option
@reports_errors
def produce(
    topic: str,
    source: BinaryIO,
    partition: int | None,
    key_format: str,
    value_format: str,
    batch_size: int,
    window_size: int | None,
    log_url: str,
    progress: bool | None,
) -> None:
    """Append records to TOPIC from JSON lines such as
    {"key": "alice", "value": {"page": "/"}, "timestamp": 1000}.

    By default strings are stored as UTF-8, other JSON values as JSON text, null as no bytes;
    --key-format/--value-format pick another layout (e.g. --value-format long writes 8-byte
    longs). "timestamp" is epoch ms or ISO-8601. A line may also carry "partition" and
    "headers". On a bad line every earlier line has been written
    and nothing from the bad line on; the error names the line.
    """
    key_layout, value_layout = resolve_formats(key_format, value_format, window_size)
    total = _size_of(source)
    with opened_log(log_url) as log:
        batcher = _Batcher(log, topic, batch_size)
        if partition is not None and partition >= batcher.partitions:
            raise click.ClickException(
                f"topic {topic!r} has partitions 0..{batcher.partitions - 1}; there is no "
                f"partition {partition}"
            )
        enabled = want_progress(progress)
        bar = progress_bar(enabled, f"producing to {topic}", total, in_bytes=total is not None)
        with bar as advance:
            for number, raw in enumerate(source, start=1):
                advance(len(raw) if total is not None else 1)
                try:
                    line = raw.decode("utf-8").strip()
                    if not line:
                        continue
                    parsed = parse_line(line, key_layout, value_layout)
                    target = parsed.partition if parsed.partition is not None else partition
                    batcher.add(parsed.record, batcher.choose(parsed.record.key, target))
                except (LineError, UnicodeDecodeError) as e:
                    batcher.flush()
                    raise click.ClickException(
                        f"line {number}: {e}. The {batcher.written} record(s) before it were "
                        f"written to {topic}; nothing from line {number} on was."
                    ) from None
            batcher.flush()
    click.echo(f"produced {batcher.written} record(s) to {topic}", err=True)


def _size_of(source: BinaryIO) -> int | None:
    """Byte size of a regular file (for a progress total); None for pipes and terminals."""
    try:
        st = os.fstat(source.fileno())
    except (OSError, AttributeError, ValueError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None
