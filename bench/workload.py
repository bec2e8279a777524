"""The benchmark's workload: a seeded stream of keyed events, written once to the embedded log
(for Streamtide and the log read) and once as Parquet files (for Spark's file source), and a
users table of one profile per key (a log topic, and one Parquet file for Spark's static side).

Each key is active in bursts (events a few seconds apart) separated by idle time well above
the session gap. Events arrive with a small random delay, so they are slightly out of order;
a few percent arrive minutes late; and a share of them is resent (same key, event id and
timestamp) a few seconds after the original.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from streamtide import Serdes
from streamtide.log import LogRecord, open_log
from streamtide.log.partitioner import partition_for_key

TOPIC = "events"
#: The table the stream-table join enriches events with: one profile per key.
USERS_TOPIC = "users"
#: The same events with the pipeline's fields (``pipeline_value``), for the pipeline only, so
#: the other operations keep their input.
PIPELINE_TOPIC = "pipeline-events"
PIPELINE_PAGES = tuple(f"/page/{i:02d}" for i in range(50))
KINDS = ("view", "click", "buy")
BOT_SHARE = 0.1
MAX_AMOUNT = 80.0
SEGMENTS = ("free", "pro", "team", "enterprise")
COUNTRIES = ("NZ", "DE", "BR", "JP", "US", "IN", "FR")
PAGES = ("/", "/search", "/product", "/cart", "/checkout")
SECOND = 1_000
#: 2024-01-01T00:00:00Z: event times start here (Spark shows them as readable timestamps).
EPOCH = 1_704_067_200_000


@dataclass(frozen=True)
class Workload:
    """Parameters of the generated workload and of the operators run over it."""

    events: int = 1_000_000
    keys: int = 5_000
    dup_rate: float = 0.05
    late_rate: float = 0.02
    jitter_ms: int = 3 * SECOND
    late_ms: tuple[int, int] = (120 * SECOND, 600 * SECOND)
    burst_events: tuple[int, int] = (3, 15)
    burst_spacing_ms: tuple[int, int] = (500, 8 * SECOND)
    idle_ms: tuple[int, int] = (90 * SECOND, 600 * SECOND)
    partitions: int = 4
    batch_size: int = 5_000
    dedup_interval_ms: int = 10 * SECOND
    session_gap_ms: int = 30 * SECOND
    punctuate_every_ms: int = 60 * SECOND
    dedup_on: str = "key"
    seed: int = 42
    #: When event time starts (epoch ms); a Kafka run starts it a day ago, within the
    #: retention time of topics created with the broker's defaults.
    epoch: int = EPOCH

    def describe(self) -> dict[str, Any]:
        """The parameters as JSON-friendly values."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


class Event(NamedTuple):
    """One event as it arrives: key, event id, page, event time (ms), partition."""

    key: str
    event_id: int
    page: str
    ts: int
    partition: int


def generate(w: Workload) -> list[Event]:
    """``w.events`` events (resends included) in arrival order; the same for the same seed."""
    rnd = random.Random(w.seed)
    originals = max(1, round(w.events / (1 + w.dup_rate)))
    key_names = [f"k{i:05d}" for i in range(w.keys)]
    string = Serdes.string()
    partition_of = {k: partition_for_key(string.serialize(k), w.partitions) for k in key_names}
    arriving: list[tuple[float, int, Event]] = []  # (arrival time, sequence, event)
    per_key, extra = divmod(originals, w.keys)
    next_id = 0
    for index, key in enumerate(key_names):
        remaining = per_key + (1 if index < extra else 0)
        t = w.epoch + rnd.randrange(0, 300 * SECOND)
        while remaining > 0:
            for _ in range(min(remaining, rnd.randint(*w.burst_events))):
                t += rnd.randrange(*w.burst_spacing_ms)
                event = Event(key, next_id, rnd.choice(PAGES), t, partition_of[key])
                if rnd.random() < w.late_rate:
                    arrival = t + rnd.randrange(*w.late_ms)
                else:
                    arrival = t + rnd.random() * w.jitter_ms
                arriving.append((arrival, next_id, event))
                next_id += 1
                remaining -= 1
            t += rnd.randrange(*w.idle_ms)
    arriving.sort()
    resends = []
    for _ in range(w.events - len(arriving)):
        arrival, seq, event = rnd.choice(arriving)
        resends.append((arrival + rnd.randrange(0, 5 * SECOND), seq, event))
    arriving.extend(resends)
    arriving.sort(key=lambda a: (a[0], a[1]))
    return [event for _, _, event in arriving]


def value_of(event: Event) -> dict[str, Any]:
    """The JSON value a record carries."""
    return {"id": event.event_id, "page": event.page, "ts": event.ts}


def pipeline_fields(events: list[Event], w: Workload) -> dict[int, tuple[str, str, float]]:
    """Each event id's page (one of 50), kind (``bot`` for 10%) and amount (uniform 0-80);
    a resend carries its original's fields. The same for the same seed."""
    rnd = random.Random(w.seed + 2)
    fields: dict[int, tuple[str, str, float]] = {}
    for event_id in sorted({e.event_id for e in events}):
        kind = "bot" if rnd.random() < BOT_SHARE else rnd.choice(KINDS)
        amount = round(rnd.uniform(0.0, MAX_AMOUNT), 2)
        fields[event_id] = (rnd.choice(PIPELINE_PAGES), kind, amount)
    return fields


def pipeline_value(event: Event, fields: dict[int, tuple[str, str, float]]) -> dict[str, Any]:
    """The JSON value a pipeline record carries."""
    page, kind, amount = fields[event.event_id]
    return {"id": event.event_id, "page": page, "kind": kind, "amount": amount, "ts": event.ts}


def user_profiles(w: Workload) -> list[tuple[str, dict[str, Any]]]:
    """The users table: one profile per key, the same for the same seed."""
    rnd = random.Random(w.seed + 1)
    return [
        (f"k{i:05d}", {"segment": rnd.choice(SEGMENTS), "country": rnd.choice(COUNTRIES)})
        for i in range(w.keys)
    ]


def by_partition(events: list[Event], partitions: int) -> list[list[Event]]:
    """The events of each partition, in arrival order."""
    parts: list[list[Event]] = [[] for _ in range(partitions)]
    for event in events:
        parts[event.partition].append(event)
    return parts


def write_log(
    log_url: str, events: list[Event], w: Workload, options: dict[str, str] | None = None
) -> None:
    """Create ``events`` with ``w.partitions`` partitions and append the events, by key
    (``options``: the log's, e.g. Kafka topic settings)."""
    key_serde, value_serde = Serdes.string(), Serdes.json()
    log = open_log(log_url, **(options or {}))
    try:
        append_events(log, TOPIC, events, value_of, w.partitions)
        log.create_topic(USERS_TOPIC, w.partitions)
        users: list[list[LogRecord]] = [[] for _ in range(w.partitions)]
        for key, profile in user_profiles(w):
            raw = key_serde.serialize(key)
            # timestamp 1 (Kafka's lowest): before every event, so a task reads the table
            # before the stream
            users[partition_for_key(raw, w.partitions)].append(
                LogRecord(raw, value_serde.serialize(profile), 1)
            )
        for partition, records in enumerate(users):
            log.append(USERS_TOPIC, partition, records)
    finally:
        log.close()


def write_pipeline_log(
    log_url: str, events: list[Event], w: Workload, options: dict[str, str] | None = None
) -> None:
    """Create ``PIPELINE_TOPIC`` and append the events with their pipeline fields (the users
    table comes with ``write_log``)."""
    fields = pipeline_fields(events, w)
    log = open_log(log_url, **(options or {}))
    try:
        append_events(
            log, PIPELINE_TOPIC, events, lambda e: pipeline_value(e, fields), w.partitions
        )
    finally:
        log.close()


def append_events(
    log: Any,
    topic: str,
    events: list[Event],
    value: Callable[[Event], dict[str, Any]],
    partitions: int,
) -> None:
    """Create ``topic`` and append the events by key, each with its JSON ``value(event)``."""
    key_serde, value_serde = Serdes.string(), Serdes.json()
    log.create_topic(topic, partitions)
    for partition, part in enumerate(by_partition(events, partitions)):
        for start in range(0, len(part), 10_000):
            log.append(
                topic,
                partition,
                [
                    LogRecord(key_serde.serialize(e.key), value_serde.serialize(value(e)), e.ts)
                    for e in part[start : start + 10_000]
                ],
            )


PARQUET_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("id", pa.int64()),
        ("page", pa.string()),
        ("ts", pa.timestamp("ms", tz="UTC")),
    ]
)


PIPELINE_PARQUET_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("id", pa.int64()),
        ("page", pa.string()),
        ("kind", pa.string()),
        ("amount", pa.float64()),
        ("ts", pa.timestamp("ms", tz="UTC")),
    ]
)


def _event_table(chunk: list[Event]) -> pa.Table:
    return pa.table(
        {
            "key": [e.key for e in chunk],
            "id": [e.event_id for e in chunk],
            "page": [e.page for e in chunk],
            "ts": pa.array([e.ts for e in chunk], pa.timestamp("ms", tz="UTC")),
        },
        schema=PARQUET_SCHEMA,
    )


def write_parquet(
    directory: Path,
    events: list[Event],
    rows_per_file: int,
    table_of: Callable[[list[Event]], pa.Table] = _event_table,
) -> int:
    """Write the events in arrival order as numbered Parquet files of ``rows_per_file`` rows
    (``table_of(chunk)``), with increasing modification times (Spark's file source reads
    oldest first); return the number of files."""
    directory.mkdir(parents=True, exist_ok=True)
    base = 1_700_000_000
    files = 0
    for files, start in enumerate(range(0, len(events), rows_per_file), 1):
        table = table_of(events[start : start + rows_per_file])
        path = directory / f"part-{files:05d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (base + files, base + files))
    return files


def write_pipeline_parquet(
    directory: Path, events: list[Event], rows_per_file: int, w: Workload
) -> int:
    """The pipeline's events (with page, kind and amount) as Parquet files for Spark."""
    fields = pipeline_fields(events, w)

    def table_of(chunk: list[Event]) -> pa.Table:
        values = [fields[e.event_id] for e in chunk]
        return pa.table(
            {
                "key": [e.key for e in chunk],
                "id": [e.event_id for e in chunk],
                "page": [v[0] for v in values],
                "kind": [v[1] for v in values],
                "amount": [v[2] for v in values],
                "ts": pa.array([e.ts for e in chunk], pa.timestamp("ms", tz="UTC")),
            },
            schema=PIPELINE_PARQUET_SCHEMA,
        )

    return write_parquet(directory, events, rows_per_file, table_of)


def write_users_parquet(path: Path, w: Workload) -> None:
    """The users table as one Parquet file (Spark's static side of the join)."""
    profiles = user_profiles(w)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "key": [key for key, _ in profiles],
            "segment": [p["segment"] for _, p in profiles],
            "country": [p["country"] for _, p in profiles],
        }
    )
    pq.write_table(table, path)


def summary(events: list[Event], w: Workload) -> dict[str, Any]:
    """Counts that describe the generated data (for the JSON and the printed header)."""
    ids = {e.event_id for e in events}
    late = 0
    high = -1
    for e in events:
        if e.ts < high - w.dedup_interval_ms:
            late += 1
        high = max(high, e.ts)
    span = max(e.ts for e in events) - min(e.ts for e in events)
    return {
        "resends": len(events) - len(ids),
        "late_beyond_dedup_interval": late,
        "event_time_span_s": round(span / 1000),
        "records_per_partition": [len(p) for p in by_partition(events, w.partitions)],
    }
