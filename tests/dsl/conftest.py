from __future__ import annotations

from collections.abc import Callable

import pytest

from streamtide import Consumed, Produced, Serdes, StreamsBuilder, StreamsConfig
from streamtide.testing import TopologyTestDriver


@pytest.fixture
def run_stream():
    """Build ``in`` (str, str) -> ops -> ``out`` (str, str), pipe records, return outputs."""

    def run(
        ops: Callable, records: list[tuple], value_serde=None, out_value_serde=None
    ) -> list[tuple]:
        builder = StreamsBuilder()
        value_serde = value_serde or Serdes.string()
        stream = builder.stream("in", Consumed.with_(Serdes.string(), value_serde))
        result = ops(stream)
        if result is not None:
            result.to("out", Produced.with_(Serdes.string(), out_value_serde or value_serde))
        config = StreamsConfig(
            application_id="dsl-test",
            default_key_serde=Serdes.string(),
            default_value_serde=value_serde,
        )
        with TopologyTestDriver(builder.build(), config) as driver:
            inp = driver.create_input_topic("in", Serdes.string(), value_serde)
            for i, (key, value) in enumerate(records):
                inp.pipe_input(key, value, timestamp=i)
            out = driver.create_output_topic("out", Serdes.string(), out_value_serde or value_serde)
            return out.read_key_values()

    return run
