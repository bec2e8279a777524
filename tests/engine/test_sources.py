"""Committed offsets are checked against the source topic's identity and extent."""

from __future__ import annotations

import pytest

from streamtide import StreamsApp
from streamtide.engine.sources import SourcePosition, input_start
from streamtide.errors import InputTopicChangedError
from streamtide.log import open_log
from tests.engine.scenarios import (
    engine_config,
    engine_outputs,
    expected_outputs,
    make_events,
    session_topology,
    write_events,
)


def position(committed, begin=0, end=100, was="a", now="a") -> SourcePosition:
    return SourcePosition("events", 1, committed, begin, end, was, now)


def test_a_usable_committed_offset_is_where_reading_continues() -> None:
    assert input_start(position(40), None) == 40
    assert input_start(position(100), None) == 100
    assert input_start(position(40, was=None), None) == 40  # committed before topic ids


def test_without_a_committed_offset_reading_starts_at_the_policy_end() -> None:
    assert input_start(position(None, begin=5), None) == 5
    assert input_start(position(None, begin=5), "earliest") == 5
    assert input_start(position(None, begin=5), "latest") == 100


@pytest.mark.parametrize(
    ("pos", "why"),
    [
        (position(40, now="b"), "deleted and re-created"),
        (position(140), "ends at offset 100, before the committed offset 140"),
        (position(40, begin=60), "begins at offset 60"),
    ],
)
def test_an_unusable_committed_offset_stops_or_follows_auto_offset_reset(pos, why) -> None:
    with pytest.raises(InputTopicChangedError, match=why):
        input_start(pos, None)
    assert input_start(pos, "earliest") == pos.begin
    assert input_start(pos, "latest") == pos.end


@pytest.mark.spark
def test_a_recreated_shorter_input_topic_stops_the_application(spark, log_url, tmp_path) -> None:
    events = make_events(120, seed=31)
    write_events(log_url, events)
    config = engine_config(log_url, str(tmp_path / "state"))
    StreamsApp(session_topology(), config, spark=spark).run_until_caught_up(timeout=300)
    log = open_log(log_url)
    log.delete_topic("events")
    later = [(u, v, ts + 1_000_000) for u, v, ts in make_events(30, seed=32)]
    write_events(log_url, later)  # re-created, shorter than the committed offsets
    with pytest.raises(InputTopicChangedError, match="'events' was deleted and re-created"):
        StreamsApp(session_topology(), config, spark=spark).run_until_caught_up(timeout=300)
    reset = config.with_overrides(auto_offset_reset="earliest")
    StreamsApp(session_topology(), reset, spark=spark).run_until_caught_up(timeout=300)
    assert engine_outputs(log_url, "session") == expected_outputs("session", events + later)


def test_a_changed_record_before_the_committed_offset_means_a_recreated_topic() -> None:
    lost = SourcePosition("events", 1, 40, 0, 100, None, None, "offset 39 (timestamp 7)")
    with pytest.raises(InputTopicChangedError, match=r"no longer holds the record .* offset 39"):
        input_start(lost, None)
    assert input_start(lost, "earliest") == 0 and input_start(lost, "latest") == 100


def recreated_events(events: list, length: str) -> list:
    """Later events for a re-created input topic whose partitions hold fewer, as many or
    more records than ``events`` put there (the same keys, later timestamps, new ids)."""
    later = [(u, {**v, "id": f"new-{i}"}, ts + 2_000_000) for i, (u, v, ts) in enumerate(events)]
    if length == "shorter":
        return later[: len(later) // 3]
    return later + later[:40] if length == "longer" else later


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.parametrize("length", ["shorter", "as-long", "longer"])
def test_a_recreated_kafka_input_topic_is_never_read_from_the_old_offsets(
    spark, kafka_url, tmp_path, length
) -> None:
    """Kafka reports no topic ids here: the application finds the re-created topic by the
    record it read last before its committed offset, which the new topic does not hold,
    also a driver with an empty application directory (the marks live in Kafka)."""
    events = [(u, v, ts + 1_000_000) for u, v, ts in make_events(120, seed=31)]
    write_events(kafka_url, events)
    app = f"recreated-{length}"
    config = engine_config(kafka_url, str(tmp_path / "state"), app=app, execution="micro_batch")
    StreamsApp(session_topology(), config, spark=spark).run_until_caught_up(timeout=300)
    log = open_log(kafka_url, **config.log_options)
    log.delete_topic("events")
    later = recreated_events(events, length)
    write_events(kafka_url, later)
    elsewhere = config.with_overrides(state_dir=str(tmp_path / "other-machine"))
    for each in (config, elsewhere):
        with pytest.raises(InputTopicChangedError, match="'events' was deleted and re-created"):
            StreamsApp(session_topology(), each, spark=spark).run_until_caught_up(timeout=300)
    reset = config.with_overrides(auto_offset_reset="earliest")
    StreamsApp(session_topology(), reset, spark=spark).run_until_caught_up(timeout=300)
    assert engine_outputs(kafka_url, "session") == expected_outputs("session", events + later)
