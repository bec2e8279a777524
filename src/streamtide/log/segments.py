"""Segment files: the Arrow schema, records <-> tables, and segment file names.

A segment is one Arrow IPC file holding one record batch with the columns key, value
(binary, nullable), timestamp (int64) and headers (list of key/value structs). Offsets are not
stored: a record's offset is the segment's base offset (from the manifest) plus its row index.
The schema metadata names the writer and the record count, so a segment can be checked and
described from its footer alone.

File names are ``<writer>+<32 hex>.arrow`` where ``<writer>`` is the writer_id percent-encoded
(so any writer_id, including ``/``, maps to a safe, reversible name).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from urllib.parse import quote, unquote

import pyarrow as pa

from streamtide.log.api import LogRecord, Records
from streamtide.log.errors import LogError, SegmentError

HEADER_TYPE = pa.list_(
    pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
)

#: Columns of a segment file.
SEGMENT_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("headers", HEADER_TYPE),
    ]
)

#: Columns returned by ``Log.read_table``: the segment columns with the offset first.
READ_SCHEMA = pa.schema([pa.field("offset", pa.int64(), nullable=False), *SEGMENT_SCHEMA])

SEGMENT_SUFFIX = ".arrow"
FORMAT_VERSION = "1"
_META_FORMAT = b"streamtide.segment"
_META_WRITER = b"streamtide.writer_id"
_META_COUNT = b"streamtide.record_count"
# Never starts with "." (temporary files do; a writer_id's leading "." is encoded).
_NAME_RE = re.compile(r"^([A-Za-z0-9_~%-][A-Za-z0-9_.~%-]*)\+([0-9a-f]{32})\.arrow$")
_MAX_WRITER_CHARS = 180


def new_segment_name(writer_id: str) -> str:
    """A fresh, unique file name for a segment written by ``writer_id``."""
    if not isinstance(writer_id, str) or not writer_id:
        raise LogError("writer_id must be a non-empty string")
    encoded = quote(writer_id, safe="")
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > _MAX_WRITER_CHARS:
        raise LogError(f"writer_id is too long for a file name: {writer_id[:40]!r}...")
    return f"{encoded}+{uuid.uuid4().hex}{SEGMENT_SUFFIX}"


def writer_of(name: str) -> str | None:
    """The writer_id encoded in a segment file name, or None if it is not a segment name."""
    match = _NAME_RE.match(name)
    return unquote(match.group(1)) if match else None


def to_table(records: Records) -> pa.Table:
    """Records (LogRecords or a table with key/value/timestamp[/headers]) as a segment table."""
    if isinstance(records, pa.Table):
        return _conform(records)
    if isinstance(records, pa.RecordBatch):
        return _conform(pa.Table.from_batches([records]))
    rows = records if isinstance(records, (list, tuple)) else list(records)
    # Type checks through set(map(type, ...)) run at C speed; details only on failure.
    if set(map(type, rows)) - {LogRecord}:
        bad = next((r for r in rows if not isinstance(r, LogRecord)), None)
        if bad is not None:
            raise LogError(f"expected LogRecord, got {type(bad).__name__}")
    keys = [r.key for r in rows]
    values = [r.value for r in rows]
    stamps = [r.timestamp for r in rows]
    _reject_str(keys, "key")
    _reject_str(values, "value")
    if set(map(type, stamps)) - {int}:
        for t in stamps:
            if isinstance(t, bool) or not isinstance(t, int):
                raise LogError(f"a record timestamp must be int epoch milliseconds, got {t!r}")
    try:
        columns = [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(stamps, pa.int64()),
            headers_array([r.headers for r in rows]),
        ]
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise LogError(f"invalid record: {e}") from e
    return pa.Table.from_arrays(columns, schema=SEGMENT_SCHEMA)


def with_metadata(table: pa.Table, writer_id: str) -> pa.Table:
    """The table with the segment metadata (format, writer, count) on its schema."""
    meta = {
        _META_FORMAT: FORMAT_VERSION.encode(),
        _META_WRITER: writer_id.encode(),
        _META_COUNT: str(table.num_rows).encode(),
    }
    return table.combine_chunks().replace_schema_metadata(meta)


def count_from_schema(schema: pa.Schema, name: str) -> int:
    """The record count a segment's footer declares; SegmentError if it is not a segment."""
    meta = schema.metadata or {}
    if meta.get(_META_FORMAT) != FORMAT_VERSION.encode() or _META_COUNT not in meta:
        raise SegmentError(f"{name} is not a segment file of this format")
    return int(meta[_META_COUNT])


def iter_records(table: pa.Table, base_offset: int) -> Iterator[LogRecord]:
    """Rows of a segment table (or slice) as LogRecords with offsets from ``base_offset``."""
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    stamps = table.column("timestamp").to_pylist()
    headers = headers_to_python(table.column("headers"))
    offsets = range(base_offset, base_offset + len(keys))
    return map(LogRecord, keys, values, stamps, headers, offsets)


def with_offsets(table: pa.Table, base_offset: int) -> pa.Table:
    """A segment table (or slice) with an offset column in front (``READ_SCHEMA``)."""
    offsets = pa.array(range(base_offset, base_offset + table.num_rows), pa.int64())
    return pa.Table.from_arrays([offsets, *table.columns], schema=READ_SCHEMA)


def _conform(table: pa.Table) -> pa.Table:
    missing = {"key", "value", "timestamp"} - set(table.column_names)
    if missing:
        raise LogError(f"record table lacks column(s) {sorted(missing)}")
    if "headers" not in table.column_names:
        empty = pa.array([[]] * table.num_rows, HEADER_TYPE)
        table = table.append_column("headers", empty)
    try:
        table = table.select(SEGMENT_SCHEMA.names).cast(SEGMENT_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError) as e:
        raise LogError(f"record table does not match the segment schema: {e}") from e
    return table


def _reject_str(items: list[object], what: str) -> None:
    if any(issubclass(t, str) for t in set(map(type, items))):
        item = next(i for i in items if isinstance(i, str))
        raise LogError(f"record {what} must be bytes or None, got str {item[:40]!r}")


def headers_array(headers: list[tuple[tuple[str, bytes], ...]]) -> pa.Array:
    """Per-record headers as the segment's headers column (each a (str, bytes) pair)."""
    if not any(headers):
        return pa.ListArray.from_arrays(
            pa.array([0] * (len(headers) + 1), pa.int32()),
            pa.array([], HEADER_TYPE.value_type),
        )
    rows = [[{"key": k, "value": v} for k, v in h] for h in headers]
    for row in rows:
        for item in row:
            if not isinstance(item["key"], str) or isinstance(item["value"], str):
                raise LogError(f"a header must be (str, bytes), got {tuple(item.values())!r}")
    return pa.array(rows, HEADER_TYPE)


def headers_to_python(column: pa.ChunkedArray) -> list[tuple[tuple[str, bytes], ...]]:
    """A headers column back as per-record tuples of (str, bytes) pairs."""
    if all(len(chunk.values) == 0 for chunk in column.chunks):
        return [()] * len(column)
    return [
        () if row is None else tuple((h["key"], h["value"]) for h in row)
        for row in column.to_pylist()
    ]


def records_of(table: pa.Table) -> list[LogRecord]:
    """All rows of a ``read_table`` result as LogRecords (offsets from the offset column)."""
    if table.num_rows == 0:
        return []
    offsets = table.column("offset").to_pylist()
    rows = list(iter_records(table, 0))
    return [LogRecord(r.key, r.value, r.timestamp, r.headers, off) for r, off in zip(rows, offsets)]
