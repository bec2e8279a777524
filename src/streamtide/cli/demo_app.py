"""The demo's workload and topology: a clickstream with resent events and user sessions."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from typing import Any

from streamtide import (
    Consumed,
    Deduplicated,
    Materialized,
    Processor,
    Produced,
    PunctuationType,
    Record,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    Topology,
)
from streamtide.log.api import Log, LogRecord
from streamtide.log.partitioner import partition_for_key
from streamtide.state.stores import Stores

CLICKS = "clicks"
SESSIONS = "session-counts"
SUMMARY = "minute-summary"
PAGES = ["/", "/search", "/product", "/cart", "/checkout"]
MINUTE = 60_000
#: When the demo's hour of clicks starts (event time, epoch milliseconds, UTC).
START_MS = int(datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc).timestamp() * 1000)


def generate_clicks(users: int = 40, seed: int = 7) -> list[tuple[str, dict[str, Any]]]:
    """Clicks of ``users`` users over an hour: bursts of activity separated by idle gaps,
    about 8% of events resent (same event id), and some arriving a little out of order."""
    rnd = random.Random(seed)
    events: list[tuple[str, dict[str, Any]]] = []
    for u in range(users):
        user = f"user-{u:02d}"
        t = START_MS + rnd.randrange(0, 10 * MINUTE)
        for burst in range(rnd.randint(1, 4)):
            for click in range(rnd.randint(2, 12)):
                t += rnd.randrange(2_000, 40_000)
                event = {"event_id": f"{user}-{burst}-{click}", "page": rnd.choice(PAGES), "ts": t}
                events.append((user, event))
                if rnd.random() < 0.08:
                    events.append((user, dict(event)))
            t += rnd.randrange(6 * MINUTE, 15 * MINUTE)
    events.sort(key=lambda e: e[1]["ts"] + rnd.randrange(-3_000, 3_000))
    return events


def write_clicks(log: Log, events: list[tuple[str, dict[str, Any]]], partitions: int = 4) -> None:
    """Append the events to the ``clicks`` topic, keyed by user."""
    log.create_topic(CLICKS, partitions, exist_ok=True)
    key_serde, value_serde = Serdes.string(), Serdes.json()
    by_partition: dict[int, list[LogRecord]] = {p: [] for p in range(partitions)}
    for user, event in events:
        key = key_serde.serialize(user)
        assert key is not None  # a user name is a str
        record = LogRecord(key, value_serde.serialize(event), event["ts"])
        by_partition[partition_for_key(key, partitions)].append(record)
    for partition, records in by_partition.items():
        if records:
            log.append(CLICKS, partition, records)


class MinuteSummary(Processor):
    """Counts clicks per page; every minute of stream time emits and resets the counts."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("page-counts")
        context.schedule(timedelta(minutes=1), PunctuationType.STREAM_TIME, self.emit)

    def process(self, record: Record) -> None:
        page = record.value["page"]
        self.store.put(page, (self.store.get(page) or 0) + 1)

    def emit(self, timestamp: int) -> None:
        counts = dict(self.store.all())
        if not counts:
            return
        minute = timestamp // MINUTE * MINUTE
        self.context.forward(Record(minute, counts, timestamp))
        for page in counts:
            self.store.delete(page)


def build_topology() -> Topology:
    """clicks -> dedup by event id -> (session counts per user, per-minute page summary)."""
    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store("page-counts"), Serdes.string(), Serdes.long()
        )
    )
    unique = builder.stream(CLICKS, Consumed.with_(Serdes.string(), Serdes.json())).deduplicate(
        lambda user, click: click["event_id"],
        timedelta(seconds=30),
        Deduplicated.as_("unique-clicks").with_id_serde(Serdes.string()),
    )
    (
        unique.group_by_key()
        .windowed_by(SessionWindows.with_inactivity_gap(timedelta(minutes=5)))
        .count(Materialized.as_("sessions"))
        .to_stream()
        .to(SESSIONS, Produced.with_(Serdes.session_windowed(Serdes.string()), Serdes.long()))
    )
    unique.process(MinuteSummary, "page-counts", named="minute-summary").to(
        SUMMARY, Produced.with_(Serdes.long(), Serdes.json())
    )
    return builder.build()
