"""Processor API users register session and window stores through ``Stores`` (both kinds)."""

from __future__ import annotations

import pytest

from streamtide import Consumed, Processor, Record, Serdes, Stores, StreamsBuilder, Window, Windowed
from streamtide.testing import TopologyTestDriver


class LastSeenPerMinute(Processor):
    """Keeps, per key, the latest value in each one-minute window and a session of activity."""

    def init(self, context) -> None:
        super().init(context)
        self.windows = context.get_state_store("per-minute")
        self.sessions = context.get_state_store("activity")

    def process(self, record: Record) -> None:
        start = record.timestamp // 60_000 * 60_000
        self.windows.put(record.key, start, record.value)
        found = self.sessions.find_sessions(
            record.key, record.timestamp - 5_000, record.timestamp + 5_000
        )
        begin = min([record.timestamp, *(s.window.start for s, _ in found)])
        end = max([record.timestamp, *(s.window.end for s, _ in found)])
        for session, _ in found:
            self.sessions.remove(session)
        count = 1 + sum(n for _, n in found)
        self.sessions.put(Windowed(record.key, Window(begin, end)), count)


@pytest.mark.parametrize("kind", ["rocksdb", "in_memory"])
def test_custom_processor_uses_session_and_window_stores(kind: str) -> None:
    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.window_store_builder(
            "per-minute", 3_600_000, 60_000, Serdes.string(), Serdes.string(), kind=kind
        )
    )
    builder.add_state_store(
        Stores.session_store_builder(
            "activity", 3_600_000, Serdes.string(), Serdes.int(), kind=kind
        )
    )
    builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string())).process(
        LastSeenPerMinute, "per-minute", "activity"
    )
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        for ts, value in ((1_000, "a"), (4_000, "b"), (61_000, "c"), (70_000, "d")):
            inp.pipe_input("k", value, timestamp=ts)
        windows = driver.get_window_store("per-minute")
        assert windows.get("k", 0) == "b" and windows.get("k", 60_000) == "d"
        sessions = driver.get_session_store("activity")
        assert sessions.fetch("k") == [
            (Windowed("k", Window(1_000, 4_000)), 2),
            (Windowed("k", Window(61_000, 61_000)), 1),
            (Windowed("k", Window(70_000, 70_000)), 1),
        ]


def test_store_builders_reject_bad_arguments() -> None:
    with pytest.raises(ValueError, match="window_size must be positive"):
        Stores.window_store_builder("w", 1_000, 0)
    with pytest.raises(ValueError, match="retention must not be negative"):
        Stores.session_store_builder("s", -1)
