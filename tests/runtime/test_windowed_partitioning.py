"""Sinks partition windowed keys by their base key (Kafka's WindowedStreamPartitioner), so all
windows of one key land in one partition."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from streamtide import Consumed, Produced, Serdes, SessionWindows, StreamsBuilder, TimeWindows
from streamtide.log.api import LogRecord
from streamtide.log.partitioner import partition_for_key
from streamtide.runtime.stream_task import StreamTask

STRING = Serdes.string()
PARTITIONS = 4


class FourPartitions:
    """A collector whose topics have four partitions; it keeps what is sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, bytes | None]] = []

    def partitions_for(self, topic: str) -> int:
        return PARTITIONS

    def send(self, topic: str, partition: int, key: Any, value: Any, ts: int, headers: Any):
        self.sent.append((topic, partition, key))


def windowed_counts(windows: Any, key_serde: Any) -> Any:
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, STRING)).group_by_key()
    grouped.windowed_by(windows).count().to_stream().to(
        "out", Produced.with_(key_serde, Serdes.long())
    )
    return builder.build()


@pytest.mark.parametrize(
    "windows, key_serde",
    [
        (TimeWindows.of_size(timedelta(seconds=10)), Serdes.time_windowed(STRING, 10_000)),
        (SessionWindows.with_inactivity_gap(timedelta(seconds=1)), Serdes.session_windowed(STRING)),
    ],
    ids=["time-windowed", "session-windowed"],
)
def test_every_window_of_a_key_goes_to_the_base_keys_partition(
    windows, key_serde, tmp_path
) -> None:
    collector = FourPartitions()
    task = StreamTask(
        windowed_counts(windows, key_serde),
        0,
        0,
        collector,
        state_dir=tmp_path,
    ).initialize()
    keys = ["alice", "bob", "carol", "dave", "erin"]
    records = [
        LogRecord(key.encode(), b"v", 1_000 + 7_000 * n + i, (), offset)
        for offset, (n, (i, key)) in enumerate(
            (n, item) for n in range(6) for item in enumerate(keys)
        )
    ]
    task.add_records("in", records)
    task.process()
    task.commit()
    task.close()
    out = [(p, key_serde.deserialize(k)) for topic, p, k in collector.sent if topic == "out"]
    assert len({w.window for _, w in out}) >= 4  # several windows per key
    for partition, windowed in out:
        assert partition == partition_for_key(windowed.key.encode(), PARTITIONS), windowed
    assert len({p for p, _ in out}) > 1  # the keys spread over partitions
