"""A windowed aggregation through the TopologyTestDriver, and Kafka's string mock functions
(MockInitializer.STRING_INIT, MockAggregator.TOSTRING_ADDER) that the ported tests use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtide import Consumed, EmitStrategy, Serdes, StreamsBuilder, StreamsConfig
from streamtide.testing import TopologyTestDriver

STRING = Serdes.string()


def run_windowed(
    windows: Any,
    operation: Callable[[Any], Any],
    records: list[tuple[str, str, int]],
    value_serde: Any = STRING,
    strategy: EmitStrategy = EmitStrategy.ON_WINDOW_UPDATE,
) -> tuple[list[tuple], dict[str, int]]:
    """Pipe ``(key, value, timestamp)`` records through ``windowed_by(windows)``, the emit
    strategy and ``operation``; return the output as (key, value, timestamp) and the task's
    metrics."""
    builder = StreamsBuilder()
    windowed = (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .windowed_by(windows)
        .emit_strategy(strategy)
    )
    operation(windowed).to_stream().to("out")
    config = StreamsConfig(
        application_id="windowed", default_key_serde=STRING, default_value_serde=STRING
    )
    with TopologyTestDriver(builder.build(), config) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        for key, value, ts in records:
            inp.pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic("out", Serdes.windowed(STRING), value_serde)
        return [(r.key, r.value, r.timestamp) for r in out.read_records()], driver.metrics()


def string_init() -> str:
    return "0"


def to_string_adder(_key: Any, value: str, agg: str) -> str:
    return f"{agg}+{value}"
