"""A source hands values that nothing reads on as their bytes (``runtime.source``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamtide import (
    Consumed,
    Grouped,
    Produced,
    Serdes,
    StreamsBuilder,
    StreamsConfig,
    TimeWindows,
)
from streamtide.processor.column_batch import ColumnBatch
from streamtide.runtime.source import SourceNode
from streamtide.runtime.stream_task import StreamTask
from streamtide.testing import TopologyTestDriver


class _Collector:
    def partitions_for(self, topic: str) -> int:
        return 1

    def send(self, *record: object) -> None:
        pass


def _repartition_source(builder: StreamsBuilder, **options: object) -> SourceNode:
    """The source node of the sub-topology after the repartition."""
    topology = builder.build()
    (second,) = [sub for sub in topology.subtopologies() if sub.id == 1]
    task = StreamTask(topology, second.id, 0, _Collector(), **options)  # type: ignore[arg-type]
    (source,) = set(task._sources.values())
    return source


def _grouped(value_serde=None) -> tuple[StreamsBuilder, object]:
    builder = StreamsBuilder()
    consumed = Consumed.with_(Serdes.string(), Serdes.json())
    grouped = builder.stream("events", consumed).group_by(
        lambda key, value: key if value is None else value["page"],
        Grouped.with_(Serdes.string(), value_serde or Serdes.json()),
    )
    return builder, grouped


def test_a_count_after_a_repartition_is_given_the_bytes_and_counts_as_before() -> None:
    builder, grouped = _grouped()
    grouped.count().to_stream().to("counts", Produced.with_(Serdes.string(), Serdes.long()))
    assert _repartition_source(builder).values_stay_encoded()
    with TopologyTestDriver(builder.build(), StreamsConfig(application_id="lazy")) as driver:
        events = driver.create_input_topic("events", Serdes.string(), Serdes.json())
        events.pipe_input("u1", {"page": "/a"}, timestamp=1)
        events.pipe_input("u2", None, timestamp=2)  # a null value: the count skips it
        events.pipe_input("u3", {"page": "/a"}, timestamp=3)
        events.pipe_input("u4", {"page": "/b", "n": [1, 2.5]}, timestamp=4)
        out = driver.create_output_topic("counts", Serdes.string(), Serdes.long())
        assert out.read_key_values() == [("/a", 1), ("/a", 2), ("/b", 1)]


def test_windowed_and_session_counts_take_the_bytes_too() -> None:
    builder, grouped = _grouped()
    grouped.windowed_by(TimeWindows.of_size(timedelta(seconds=10))).count()
    assert _repartition_source(builder).values_stay_encoded()


@pytest.mark.parametrize(
    "case",
    ["reduce", "custom value serde", "default extractor"],
)
def test_values_are_deserialized_where_anything_may_read_them(case: str) -> None:
    custom = Serdes.from_functions(lambda v: str(v).encode(), lambda b: b.decode())
    builder, grouped = _grouped(value_serde=custom if case == "custom value serde" else None)
    if case == "reduce":
        grouped.reduce(lambda a, b: b)
    else:
        grouped.count()
    options = {}
    if case == "default extractor":  # (a source's own extractor is the input topic's)
        options["default_timestamp_extractor"] = lambda record, partition_time: 0
    assert not _repartition_source(builder, **options).values_stay_encoded()


def test_a_batch_of_bytes_gives_the_error_handler_the_deserialized_value() -> None:
    serde = Serdes.json()
    batch = ColumnBatch(
        "t",
        0,
        None,
        [0, 1],
        ["k", "k"],
        [serde.serialize({"a": 1}), None],
        [5, 6],
        [(), ()],
        [0, 1],
        [5, 6],
        encoded_values=serde,
    )
    assert batch.record(0).value == {"a": 1}
    assert batch.take([1]).record(0).value is None
    assert batch.with_keys(["x", "y"]).record(0).value == {"a": 1}
    assert batch.with_values([1, 2]).record(0).value == 1  # new values: no longer bytes
    assert batch.derive([0], ["k"], [7]).record(0).value == 7
