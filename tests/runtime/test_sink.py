"""Sinks take whole batches: serialized a column at a time, partitioned by key (None keys round
robin) or by a partitioner, each partition's rows in input order; a row whose serde fails
goes to the processing handler alone. Checked on dedup into sinks against a plain model of
the dedup rule and Kafka's partitioning."""

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
from streamtide.log.api import LogRecord
from streamtide.log.partitioner import partition_for_key
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


def expected(
    inputs: list[LogRecord],
    sinks: tuple[str, ...] = ("out",),
    partitioner: Any = None,
    refused: Any = None,
    partitions: int = 3,
) -> list[tuple]:
    """What dedup by key (interval 10 s) into ``sinks`` sends, by a plain model: a record
    is dropped when a stored record of its key is within 10 s and unexpired; None keys pass;
    records more than 10 s behind stream time pass but are not stored. Keyed records go to
    ``murmur2(key) % partitions`` (or ``partitioner``), None keys round robin per sink; rows
    ``refused(value)`` says the first sink cannot serialize are not sent there. In topic and
    partition order, as ``run`` returns them."""
    interval = 10 * S
    stored: list[tuple[bytes, int]] = []
    stream_time = -1
    forwarded = []
    for record in inputs:
        stream_time = max(stream_time, record.timestamp)
        key, t = record.key, record.timestamp
        if key is not None:
            live = [ts for k, ts in stored if k == key and stream_time - ts <= interval]
            if any(abs(t - ts) <= interval for ts in live):
                continue
            if t >= stream_time - interval:
                stored.append((key, t))
        forwarded.append(record)
    sent = []
    for index, sink in enumerate(sinks):
        keyless = 0
        for record in forwarded:
            value = JSON.deserialize(record.value)
            if index == 0 and refused is not None and refused(value):
                continue
            if index == 0 and partitioner is not None:
                partition = partitioner(None, value, record.key, partitions)
            elif record.key is None:
                partition, keyless = keyless % partitions, keyless + 1
            else:
                partition = partition_for_key(record.key, partitions)
            value_bytes = JSON.serialize(value)
            sent.append(
                (sink, partition, record.key, value_bytes, record.timestamp, record.headers)
            )
    return sorted(sent, key=lambda row: (row[0], row[1]))


def run(
    tmp: Path,
    topology: Topology,
    inputs: list[LogRecord],
    cuts: tuple[int, ...] = (),
    **options: Any,
) -> tuple[list[tuple], dict[str, int], int]:
    """Process ``inputs`` in batches split at ``cuts``; outputs (in topic and partition
    order), metrics and stream time."""
    collector = Collector()
    task = StreamTask(topology, 0, 0, collector, state_dir=tmp, **options).initialize()
    try:
        start = 0
        for end in (*cuts, len(inputs)):
            task.add_records("in", inputs[start:end])
            task.process()
            task.commit()
            task.stores.on_committed()
            start = end
        # each partition's sequence is what a log keeps (a sink sends partition by partition);
        # the store's changelog is checked elsewhere
        outputs = [sent for sent in collector.sent if not sent[0].endswith("-changelog")]
        by_partition = sorted(outputs, key=lambda sent: (sent[0], sent[1]))
        return by_partition, task.metrics.as_dict(), task.stream_time
    finally:
        task.close()


@pytest.mark.parametrize("cuts", [(), (11,), (5, 23, 40)])
def test_dedup_into_a_sink_sends_what_the_model_says(tmp_path: Path, cuts: tuple[int, ...]) -> None:
    inputs = records()
    got = run(tmp_path, dedup_to_sink(), inputs, cuts)
    sent, metrics, stream_time = got
    assert sent == expected(inputs)
    assert stream_time == max(r.timestamp for r in inputs)
    assert metrics["dropped-duplicates"] > 0 and metrics["processed-records"] == len(inputs)
    assert metrics["dropped-duplicates"] == len(inputs) - len(sent)
    assert {p for _, p, *_ in sent} == {0, 1, 2}  # partitioned by key, None keys round robin
    assert any(h for *_, h in sent)


def test_two_sinks_and_a_custom_partitioner_send_what_the_model_says(tmp_path: Path) -> None:
    inputs = records()
    got, _, _ = run(tmp_path / "two", dedup_to_sink(second_sink=True), inputs, (9,))
    assert got == expected(inputs, sinks=("copy", "out"))

    def by_n(key: Any, value: Any, key_bytes: Any, n: int) -> int:
        return value["n"] % n  # type: ignore[no-any-return]

    got, _, _ = run(tmp_path / "p", dedup_to_sink(partitioner=by_n), inputs, (9,))
    assert got == expected(inputs, partitioner=by_n)


def test_a_sink_serde_failure_is_the_failing_rows_alone_under_continue(tmp_path: Path) -> None:
    """The row the sink cannot serialize goes to the handler (here: skipped, with a
    dead-letter record) and every other row is sent."""
    inputs = records()
    options = {"processing_handler": "continue", "dead_letter_topic": "dlq"}
    sent, metrics, _ = run(tmp_path, dedup_to_sink(PickyJson()), inputs, (20,), **options)
    assert [t for t, *_ in sent].count("dlq") == 1
    assert [row for row in sent if row[0] != "dlq"] == expected(
        inputs, refused=lambda value: value["bad"]
    )
    (dead,) = [row for row in sent if row[0] == "dlq"]
    bad = next(r for r in inputs if b'"bad":true' in r.value)
    assert dead[2:5] == (bad.key, bad.value, bad.timestamp)
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
    got = run(tmp_path, dedup_to_sink(RaisingJson()), inputs, (), **options)
    assert got[0] == expected(inputs, refused=lambda value: value["bad"])
    assert got[1]["processed-records"] == len(inputs) - 1


def test_a_sink_serde_failure_fails_the_task_naming_the_record(tmp_path: Path) -> None:
    with pytest.raises(StreamsProcessingError) as failed:
        run(tmp_path, dedup_to_sink(PickyJson()), records())
    error = failed.value
    assert error.node is not None and error.node.startswith("KSTREAM-SINK")
    assert error.offset == next(i for i, r in enumerate(records()) if b'"bad":true' in r.value)


def test_a_negative_timestamp_is_skipped_in_its_turn(tmp_path: Path) -> None:
    """A record the invalid-timestamp handler skips cuts the batch: the rows before and
    after it are sent as if it had never been there."""
    inputs = records()
    inputs[3] = LogRecord(inputs[3].key, inputs[3].value, -1, (), 3)
    sent, metrics, _ = run(
        tmp_path, dedup_to_sink(), inputs, invalid_timestamp_handler="log_and_skip"
    )
    assert sent == expected(inputs[:3] + inputs[4:])
    assert metrics["dropped-records.invalid_timestamp"] == 1
    assert metrics["processed-records"] == len(inputs) - 1


def test_stream_time_and_offsets_after_a_batch(tmp_path: Path) -> None:
    inputs = records()
    collector = Collector()
    task = StreamTask(dedup_to_sink(), 0, 0, collector, state_dir=tmp_path).initialize()
    try:
        task.add_records("in", inputs)
        assert task.process() == len(inputs)
        assert task.stream_time == max(r.timestamp for r in inputs)
        assert task.committed_offset("in") == len(inputs)
    finally:
        task.close()
