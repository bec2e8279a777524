"""The column lane: a batch handed down a chain of column-capable nodes gives exactly what the
record path gives, and the task leaves the lane whenever a record could need more."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from streamtide import (
    Consumed,
    Produced,
    Serde,
    Serdes,
    StreamsBuilder,
    StreamsProcessingError,
    Topology,
)
from streamtide.dsl.dedup_batch import BatchDeduplicateProcessor
from streamtide.log.api import LogRecord
from streamtide.runtime.stream_task import StreamTask

STRING, JSON = Serdes.string(), Serdes.json()
S = 1_000


class Collector:
    """Keeps what the task sends, with ``send_many`` as the engine's collector has it."""

    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def partitions_for(self, topic: str) -> int:
        return 3

    def send(self, topic, partition, key, value, timestamp, headers) -> None:
        self.sent.append((topic, partition, key, value, timestamp, tuple(headers or ())))

    def send_many(self, topic, partition, keys, values, timestamps, headers) -> None:
        for row in zip(keys, values, timestamps, headers):
            self.send(topic, partition, *row)


class PickyJson(Serde):
    """JSON that refuses values with ``"bad": true`` (a sink's serde failing on some rows)."""

    name = "picky-json"

    def _to_bytes(self, value: Any) -> bytes:
        if value.get("bad"):
            raise ValueError("bad value")
        return JSON.serialize(value)  # type: ignore[return-value]

    def _from_bytes(self, data: bytes) -> Any:
        return JSON.deserialize(data)


def dedup_to_sink(
    sink_serde: Serde = JSON, partitioner: Any = None, second_sink: bool = False
) -> Topology:
    builder = StreamsBuilder()
    unique = builder.stream("in", Consumed.with_(STRING, JSON)).deduplicate_by_key(
        timedelta(seconds=10)
    )
    unique.to("out", Produced.with_(STRING, sink_serde, partitioner))
    if second_sink:
        unique.to("copy", Produced.with_(STRING, JSON))
    return builder.build()


def records() -> list[LogRecord]:
    """Resends, late records, None keys, headers and a value the picky serde refuses."""
    rows = []
    for n in range(40):
        key = None if n % 13 == 5 else f"k{n % 4}"
        ts = 100 * S + n * 2 * S - (30 * S if n % 9 == 4 else 0)
        value = {"n": n, "bad": n == 17}
        headers = (("h", b"x"),) if n % 7 == 0 else ()
        rows.append(
            LogRecord(None if key is None else key.encode(), JSON.serialize(value), ts, headers, n)
        )
        if n % 3 == 0:  # a resend of the same record, one offset later
            rows.append(LogRecord(rows[-1].key, rows[-1].value, ts + S, headers, n))
    return [LogRecord(r.key, r.value, r.timestamp, r.headers, i) for i, r in enumerate(rows)]


def run(
    tmp: Path,
    topology: Topology,
    batch: bool,
    inputs: list[LogRecord],
    cuts: tuple[int, ...] = (),
    **options: Any,
) -> tuple[list[tuple], dict[str, int], int]:
    """Process ``inputs`` in batches split at ``cuts``; outputs (in topic and partition
    order), metrics and stream time."""
    collector = Collector()
    task = StreamTask(
        topology,
        0,
        0,
        collector,
        state_dir=tmp / ("batch" if batch else "record"),
        batch_processing=batch,
        **options,
    ).initialize()
    try:
        start = 0
        for end in (*cuts, len(inputs)):
            task.add_records("in", inputs[start:end])
            task.process()
            task.commit()
            task.stores.on_committed()
            start = end
        # each partition's sequence is what a log keeps (the lane sends partition by partition)
        by_partition = sorted(collector.sent, key=lambda sent: (sent[0], sent[1]))
        return by_partition, task.metrics.as_dict(), task.stream_time
    finally:
        task.close()


@pytest.fixture
def no_row_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch twin's per-record ``process`` fails: only the lane may run it."""

    def refuse(self: Any, record: Any) -> None:
        raise AssertionError("the record went down the row path")

    monkeypatch.setattr(BatchDeduplicateProcessor, "process", refuse)


@pytest.mark.parametrize("cuts", [(), (11,), (5, 23, 40)])
def test_a_dedup_chain_runs_in_the_lane_and_equals_the_record_path(
    tmp_path: Path, cuts: tuple[int, ...], no_row_path: None
) -> None:
    inputs = records()
    expected = run(tmp_path / "r", dedup_to_sink(), False, inputs, cuts)
    got = run(tmp_path / "b", dedup_to_sink(), True, inputs, cuts)
    assert got == expected
    sent, metrics, _ = got
    assert metrics["dropped-duplicates"] > 0 and metrics["processed-records"] == len(inputs)
    assert {p for _, p, *_ in sent} == {0, 1, 2}  # partitioned by key, None keys round robin
    assert any(h for *_, h in sent)


def test_two_children_or_a_custom_partitioner_leave_the_lane_with_the_same_result(
    tmp_path: Path,
) -> None:
    inputs = records()
    for name, topology in (
        ("two-sinks", lambda: dedup_to_sink(second_sink=True)),
        ("partitioner", lambda: dedup_to_sink(partitioner=lambda k, v, kb, n: v["n"] % n)),
    ):
        expected = run(tmp_path / f"{name}-r", topology(), False, inputs, (9,))
        assert run(tmp_path / f"{name}-b", topology(), True, inputs, (9,)) == expected, name


def test_a_sink_serde_failure_is_the_failing_rows_alone_under_continue(tmp_path: Path) -> None:
    """The sink sends the batch row by row; the row it cannot serialize goes to the handler
    (here: skipped, with a dead-letter record) and every other row is sent."""
    inputs = records()
    options = {"processing_handler": "continue", "dead_letter_topic": "dlq"}
    expected = run(tmp_path / "r", dedup_to_sink(PickyJson()), False, inputs, (20,), **options)
    got = run(tmp_path / "b", dedup_to_sink(PickyJson()), True, inputs, (20,), **options)
    assert got == expected
    sent, metrics, _ = got
    assert [t for t, *_ in sent].count("dlq") == 1
    assert metrics["processed-records"] == len(inputs) - 1


class RaisingJson(PickyJson):
    """A user's serde that raises its own exception, not a SerdeError."""

    def serialize(self, value: Any) -> bytes | None:
        if value.get("bad"):
            raise KeyError("bad value")
        return JSON.serialize(value)


def test_a_user_serde_raising_its_own_error_goes_to_the_handler_too(tmp_path: Path) -> None:
    inputs = records()
    options = {"processing_handler": "continue"}
    expected = run(tmp_path / "r", dedup_to_sink(RaisingJson()), False, inputs, (), **options)
    got = run(tmp_path / "b", dedup_to_sink(RaisingJson()), True, inputs, (), **options)
    assert got == expected
    assert got[1]["processed-records"] == len(inputs) - 1


def test_a_sink_serde_failure_fails_the_task_naming_the_record(tmp_path: Path) -> None:
    with pytest.raises(StreamsProcessingError) as failed:
        run(tmp_path, dedup_to_sink(PickyJson()), True, records())
    error = failed.value
    assert error.node is not None and error.node.startswith("KSTREAM-SINK")
    assert error.offset == next(i for i, r in enumerate(records()) if b'"bad":true' in r.value)


def test_a_negative_timestamp_takes_the_row_path(tmp_path: Path, no_row_path: None) -> None:
    """A batch holding a record the invalid-timestamp handler must see is not in the lane."""
    inputs = records()
    inputs[3] = LogRecord(inputs[3].key, inputs[3].value, -1, (), 3)
    with pytest.raises(StreamsProcessingError, match="went down the row path"):
        run(tmp_path, dedup_to_sink(), True, inputs, invalid_timestamp_handler="log_and_skip")


def test_stream_time_and_offsets_after_the_lane(tmp_path: Path) -> None:
    inputs = records()
    collector = Collector()
    task = StreamTask(
        dedup_to_sink(), 0, 0, collector, state_dir=tmp_path, batch_processing=True
    ).initialize()
    try:
        task.add_records("in", inputs)
        assert task.process() == len(inputs)
        assert task.stream_time == max(r.timestamp for r in inputs)
        assert task.committed_offset("in") == len(inputs)
    finally:
        task.close()
