"""The engine's output, read back from the log, equals the test driver's, record for record."""

from __future__ import annotations

import pytest

from streamtide import StreamsApp
from tests.engine.scenarios import (
    SCENARIOS,
    engine_config,
    engine_outputs,
    expected_outputs,
    make_events,
    write_events,
)

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_engine_output_equals_driver_output(spark, log_url, tmp_path, name) -> None:
    events = make_events(300, seed=hash(name) % 1000)
    write_events(log_url, events)
    topology_fn = SCENARIOS[name][0]
    app = StreamsApp(topology_fn(), engine_config(log_url, str(tmp_path / "state")), spark=spark)
    progress = app.run_until_caught_up(timeout=300)
    assert len(progress) >= 3, "the input must span several batches"
    assert sum(p.input_records for p in progress) == len(events)
    expected = expected_outputs(name, events)
    assert sum(len(v) for v in expected.values()) > 0
    assert engine_outputs(log_url, name) == expected
    app.stop()


def test_stream_join_on_four_partitions_with_a_driver_restart(spark, log_url, tmp_path) -> None:
    """A windowed outer join: half the input, a new driver (same application), the rest."""
    events = make_events(320, seed=15, users=22)
    config = engine_config(
        log_url,
        str(tmp_path / "state"),
        app="stream-join",
        max_records_per_batch=10,
        adaptive_batch_size=False,
    )
    write_events(log_url, events[:160], partitions=4)
    first = StreamsApp(SCENARIOS["stream_join"][0](), config, spark=spark)
    assert len(first.run_until_caught_up(timeout=300)) >= 3
    first.stop()
    write_events(log_url, events[160:], partitions=4)
    again = StreamsApp(SCENARIOS["stream_join"][0](), config, spark=spark)
    progress = again.run_until_caught_up(timeout=300)
    assert progress[0].batch > 0 and len(progress) >= 3
    again.stop()
    expected = expected_outputs("stream_join", events, partitions=4)
    assert all(expected[p] for p in range(4))
    assert engine_outputs(log_url, "stream_join") == expected
