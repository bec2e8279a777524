"""Dropped records are counted by reason (``processor/drops.py``), through the test driver."""

from __future__ import annotations

from datetime import timedelta

from streamtide import Consumed, Serdes, StreamsBuilder, StreamsConfig, TimeWindows
from streamtide.processor.drops import REASONS
from streamtide.testing import TopologyTestDriver

STRING = Serdes.string()
SECOND = 1_000


def windowed_counts(windows: TimeWindows) -> TopologyTestDriver:
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .windowed_by(windows)
        .count()
    )
    config = StreamsConfig(
        application_id="drops",
        deserialization_exception_handler="log_and_continue",
        invalid_timestamp_handler="log_and_skip",  # counted as a drop, not a stop
    )
    return TopologyTestDriver(builder.build(), config)


def reasons(driver: TopologyTestDriver) -> dict[str, int]:
    metrics = driver.metrics()
    return {
        r: metrics.get(f"dropped-records.{r}", 0)
        for r in REASONS
        if metrics.get(f"dropped-records.{r}")
    }


def test_tumbling_windows_count_late_records_once_each() -> None:
    with windowed_counts(TimeWindows.of_size(timedelta(seconds=10))) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        inp.pipe_input("a", "x", timestamp=30 * SECOND)
        inp.pipe_input("a", "late", timestamp=5 * SECOND)  # window [0, 10 s) closed at 30 s
        inp.pipe_input(None, "no key", timestamp=31 * SECOND)
        driver.pipe_raw("in", b"a", b"x", -1)  # a negative timestamp
        driver.pipe_raw("in", b"\xff", b"x", 32 * SECOND)  # not UTF-8: cannot deserialize
        assert reasons(driver) == {
            "late": 1,
            "null_key_or_value": 1,
            "invalid_timestamp": 1,
            "deserialization_error": 1,
        }
        assert driver.metrics()["dropped-records"] == 3  # deserialization: skipped-records
        assert driver.metrics()["skipped-records"] == 1


def test_hopping_windows_split_late_from_expired_windows() -> None:
    windows = TimeWindows.of_size(timedelta(seconds=10)).advance_by(timedelta(seconds=5))
    with windowed_counts(windows) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        inp.pipe_input("a", "x", timestamp=20 * SECOND)  # windows ending at <= 20 s are closed
        inp.pipe_input("a", "y", timestamp=16 * SECOND)  # [10, 20) closed, [15, 25) open
        inp.pipe_input("a", "z", timestamp=14 * SECOND)  # [5, 15) and [10, 20) closed: late
        inp.pipe_input("a", "w", timestamp=3 * SECOND)  # [0, 10) closed: late
        assert reasons(driver) == {"expired_window": 1, "late": 2}
        # dropped-records keeps counting once per closed window, as before
        assert driver.metrics()["dropped-records"] == 4
