"""Segment tables and names (``log/segments.py``)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamtide.log import READ_SCHEMA, SEGMENT_SCHEMA, LogError, LogRecord, records_of
from streamtide.log.segments import (
    count_from_schema,
    iter_records,
    new_segment_name,
    to_table,
    with_metadata,
    with_offsets,
    writer_of,
)


@pytest.mark.parametrize(
    "writer", ["append", "batch-12/0_3/attempt-1", "a b+c%d.e~f", "é/ü", ".hidden", "..", "-"]
)
def test_segment_names_encode_the_writer_reversibly(writer: str) -> None:
    name = new_segment_name(writer)
    assert "/" not in name and name.endswith(".arrow")
    assert writer_of(name) == writer
    assert new_segment_name(writer) != name


def test_writer_of_rejects_other_names() -> None:
    segment = new_segment_name("w")
    for name in ["topic.json", "x.arrow", "w+XYZ.arrow", f".tmp-{'0' * 32}-{segment}", "+.arrow"]:
        assert writer_of(name) is None, name
    assert writer_of(f".{segment}") is None


def test_new_segment_name_rejects_bad_writers() -> None:
    with pytest.raises(LogError):
        new_segment_name("")
    with pytest.raises(LogError):
        new_segment_name("/" * 100)


def test_to_table_from_records_round_trips_with_headers_and_nulls() -> None:
    rows = [
        LogRecord(b"a", b"1", 10),
        LogRecord(None, None, -5, (("h", b"x"), ("h", None))),  # type: ignore[arg-type]
        LogRecord(b"", b"", 0, (("trace", b"\x00\xff"),)),
    ]
    table = to_table(rows)
    assert table.schema == SEGMENT_SCHEMA
    back = list(iter_records(table, 100))
    assert [r.offset for r in back] == [100, 101, 102]
    assert [(r.key, r.value, r.timestamp, r.headers) for r in back] == [
        (r.key, r.value, r.timestamp, r.headers) for r in rows
    ]


def test_to_table_accepts_a_table_without_headers_and_casts_types() -> None:
    table = pa.table(
        {
            "timestamp": pa.array([1, 2], pa.int32()),
            "value": pa.array([b"x", None], pa.large_binary()),
            "key": pa.array([None, b"k"]),
        }
    )
    out = to_table(table)
    assert out.schema == SEGMENT_SCHEMA
    assert [r.headers for r in iter_records(out, 0)] == [(), ()]
    assert out.column("key").to_pylist() == [None, b"k"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([LogRecord("str-key", b"v", 1)], "key must be bytes"),  # type: ignore[arg-type]
        ([LogRecord(b"k", "str-value", 1)], "value must be bytes"),  # type: ignore[arg-type]
        ([LogRecord(b"k", b"v", None)], "timestamp"),  # type: ignore[arg-type]
        ([LogRecord(b"k", b"v", 1.5)], "timestamp"),  # type: ignore[arg-type]
        ([LogRecord(b"k", b"v", True)], "timestamp"),
        ([LogRecord(b"k", 5, 1)], "invalid record"),  # type: ignore[arg-type]
        ([LogRecord(b"k", b"v", 1, (("h", "str"),))], "header"),  # type: ignore[arg-type]
        ([("k", "v", 1)], "expected LogRecord"),
        (pa.table({"key": [b"k"], "value": [b"v"]}), "lacks column"),
        (pa.table({"key": [b"k"], "value": [b"v"], "timestamp": ["x"]}), "segment schema"),
    ],
)
def test_to_table_rejects_bad_input(bad: object, message: str) -> None:
    with pytest.raises(LogError, match=message):
        to_table(bad)  # type: ignore[arg-type]


def test_metadata_carries_the_count() -> None:
    table = with_metadata(to_table([LogRecord(b"k", b"v", 1)] * 3), "w")
    assert count_from_schema(table.schema, "x") == 3
    with pytest.raises(LogError, match="not a segment"):
        count_from_schema(SEGMENT_SCHEMA, "x")


def test_with_offsets_and_records_of() -> None:
    table = to_table([LogRecord(b"k", str(i).encode(), i) for i in range(4)]).slice(1, 2)
    read = with_offsets(table, 41)
    assert read.schema == READ_SCHEMA
    assert read.column("offset").to_pylist() == [41, 42]
    assert [(r.offset, r.value) for r in records_of(read)] == [(41, b"1"), (42, b"2")]
    assert records_of(READ_SCHEMA.empty_table()) == []


def test_record_and_str_subclasses() -> None:
    class Tagged(LogRecord):
        __slots__ = ()

    class Text(str):
        pass

    assert to_table([Tagged(b"k", b"v", 1)]).num_rows == 1
    with pytest.raises(LogError, match="must be bytes"):
        to_table([LogRecord(Text("k"), b"v", 1)])  # type: ignore[arg-type]
