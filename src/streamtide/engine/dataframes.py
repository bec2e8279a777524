"""Topics as Spark DataFrames: ``read_topic`` and ``write_topic``.

Reading: one Spark partition per log partition; each executor reads its own partition's
committed records (in Arrow chunks) and decodes them with the given serdes. The driver only
fixes the offset ranges, so it never holds the records.

Writing to the file log: each Spark task writes its rows as unsealed segments of the topic,
named after the call and its Spark partition; the driver then seals the segments of the one
successful attempt per Spark partition, with seal ids that make sealing idempotent, and aborts
whatever failed or retried attempts left behind. So a retried Spark task never appends twice.

Writing to Kafka: each Spark task appends its rows in one transaction whose id is the call's
and the Spark partition's, together with a marker of the write (``log.kafka_once``). A retried
attempt fences the earlier ones and writes nothing if one of them committed; a failed call
fences every Spark partition's transactional id, so no transaction stays open.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any

from streamtide.engine.interop import spark_context
from streamtide.errors import ConfigError, LogError
from streamtide.log import KafkaLog, open_log
from streamtide.log.api import Log, LogRecord, SegmentRef
from streamtide.log.encoder import PartitionOutOfRangeError, TopicEncoder
from streamtide.log.kafka_once import append_once, fence, marker_offsets
from streamtide.serde import Serde, Serdes

LOGGER = logging.getLogger("streamtide.dataframes")

#: Records per Arrow batch when reading, and per segment when writing.
CHUNK = 65_536
_COLUMN_TYPES = {
    "bytes": "binary",
    "string": "string",
    "int": "bigint",
    "long": "bigint",
    "float": "double",
    "double": "double",
    "json": "string",
}

#: ``partitioner(key, value, num_partitions) -> partition`` on the DataFrame's column values.
Partitioner = Callable[[Any, Any, int], int]


def _open(log: str | Log, options: dict[str, Any]) -> Log:
    """The log to use on the driver. Given an open Kafka log and no options, the executors
    connect with that log's options (credentials, TLS): they are added to ``options``."""
    if isinstance(log, str):
        return open_log(log, **options)
    if isinstance(log, KafkaLog) and not options:
        options.update(log.options)
    return log


def column_type(serde: Serde[Any], schema: Any = None) -> Any:
    """The Spark type of a column decoded with ``serde``: a json serde with a ``schema``
    (a StructType or a DDL string) gives that struct; other serdes map by kind."""
    from pyspark.sql.types import DataType, StructType, _parse_datatype_string

    if schema is not None:
        if serde.name != "json":
            raise ConfigError(f"a schema needs Serdes.json() values, not {serde!r}")
        parsed = schema if isinstance(schema, DataType) else _parse_datatype_string(schema)
        if not isinstance(parsed, StructType):
            raise ConfigError(f"the schema must be a struct, got {parsed.simpleString()}")
        return parsed
    if serde.name not in _COLUMN_TYPES:
        raise ConfigError(
            f"read_topic cannot map {serde!r} to a column type; read with Serdes.bytes() and "
            "decode the column yourself"
        )
    return _parse_datatype_string(_COLUMN_TYPES[serde.name])


def _decoder(serde: Serde[Any], struct: bool) -> Callable[[bytes | None], Any]:
    if serde.name == "bytes":
        return lambda data: data
    if serde.name == "json" and not struct:
        return lambda data: None if data is None else bytes(data).decode("utf-8")
    return serde.deserialize


def read_topic(
    spark: Any,
    log: str | Log,
    topic: str,
    *,
    key_serde: Serde[Any] | None = None,
    value_serde: Serde[Any] | None = None,
    schema: Any = None,
    start_offsets: Mapping[int, int] | None = None,
    end_offsets: Mapping[int, int] | None = None,
    log_options: Mapping[str, Any] | None = None,
) -> Any:
    """A DataFrame (key, value, topic, partition, offset, timestamp) of ``topic``'s committed
    records, one Spark partition per log partition, read on the executors.

    Keys and values are decoded with the serdes (default: bytes, as binary columns); with
    ``schema`` the json value becomes a struct column. ``start_offsets``/``end_offsets`` map
    a partition to its first / end offset (default: begin offset / current end; a partition
    missing from ``end_offsets`` ends at its current end). The ranges are fixed when this is
    called, so evaluating the DataFrame twice gives the same rows. ``log_options`` are the
    log client's settings (as ``StreamsConfig.log_options``); an open Kafka log brings its own.
    """
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    sc = spark_context(spark)
    options = dict(log_options or {})
    log_ = _open(log, options)
    key_serde = key_serde or Serdes.bytes()
    value_serde = value_serde or Serdes.bytes()
    out_schema = StructType(
        [
            StructField("key", column_type(key_serde)),
            StructField("value", column_type(value_serde, schema)),
            StructField("topic", StringType(), False),
            StructField("partition", IntegerType(), False),
            StructField("offset", LongType(), False),
            StructField("timestamp", LongType(), False),
        ]
    )
    count = log_.partitions(topic)
    ranges = []
    for p in range(count):
        start = (start_offsets or {}).get(p, log_.begin_offset(topic, p))
        end = (end_offsets or {}).get(p, log_.end_offset(topic, p))
        ranges.append((p, int(start), int(end)))
    url = log_.url
    decode_key = _decoder(key_serde, False)
    decode_value = _decoder(value_serde, schema is not None)

    def read(descriptors: Iterator[tuple[int, int, int]]) -> Iterator[tuple[Any, ...]]:
        reader = open_log(url, **options)
        try:
            for p, start, end in descriptors:
                position = start
                while position < end:
                    table = reader.read_table(topic, p, position, end, max_records=CHUNK)
                    if table.num_rows == 0:
                        break
                    yield from zip(
                        map(decode_key, table.column("key").to_pylist()),
                        map(decode_value, table.column("value").to_pylist()),
                        [topic] * table.num_rows,
                        [p] * table.num_rows,
                        table.column("offset").to_pylist(),
                        table.column("timestamp").to_pylist(),
                    )
                    position = int(table.column("offset")[-1].as_py()) + 1
        finally:
            reader.close()

    rows = sc.parallelize(ranges, max(1, count)).mapPartitions(read)
    return spark.createDataFrame(rows, out_schema, verifySchema=False)


def write_topic(
    df: Any,
    log: str | Log,
    topic: str,
    *,
    key_col: str | None = "key",
    value_col: str = "value",
    timestamp_col: str | None = None,
    key_serde: Serde[Any] | None = None,
    value_serde: Serde[Any] | None = None,
    partitioner: Partitioner | None = None,
    log_options: Mapping[str, Any] | None = None,
) -> int:
    """Append the rows of ``df`` to ``topic`` exactly once; return how many were written.

    Keys and values are encoded with the serdes (default bytes; ``key_col=None`` writes
    keyless records). A record goes to ``partitioner(key, value, partitions)`` if given, else
    to the partition of its serialized key (Kafka's murmur2), keyless records round-robin.
    ``timestamp_col`` holds epoch ms or Spark timestamps (default: the time of writing). The
    rows of one Spark partition keep their order within each log partition. ``log_options``
    are as for ``read_topic``.

    On the file log the call appends all rows or none. On Kafka each Spark partition commits
    its own transaction, so a call that fails may have appended the rows of some Spark
    partitions (each at most once).
    """
    options = dict(log_options or {})
    log_ = _open(log, options)
    partitions = log_.partitions(topic)  # UnknownTopicError names a missing topic
    columns = [c for c in (key_col, value_col, timestamp_col) if c is not None]
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ConfigError(f"write_topic: no column(s) {missing} in {df.columns}")
    url = log_.url
    since = marker_offsets(log_) if isinstance(log_, KafkaLog) else None
    call = uuid.uuid4().hex[:16]
    spec = _WriteSpec(topic, partitions, call, key_col, value_col, timestamp_col, since)
    key_serde = key_serde or Serdes.bytes()
    value_serde = value_serde or Serdes.bytes()
    encode = (key_serde, value_serde, partitioner)

    def write(index: int, rows: Iterator[Any]) -> Iterator[Any]:
        writer = open_log(url, **options)
        try:
            if isinstance(writer, KafkaLog):
                yield write_partition_once(writer, spec, index, rows, *encode)
            else:
                yield from write_partition(writer, spec, index, rows, *encode)
        finally:
            writer.close()

    rdd = df.select(*columns).rdd
    if not isinstance(log_, KafkaLog):
        return seal_written(log_, topic, spec.prefix, rdd.mapPartitionsWithIndex(write).collect())
    try:
        return sum(rdd.mapPartitionsWithIndex(write).collect())
    except BaseException:
        # Attempts that died may have left transactions open: abort them for good.
        try:
            fence(log_, topic, [spec.write_id(i) for i in range(rdd.getNumPartitions())])
        except LogError as e:
            LOGGER.warning(
                "write_topic to %r failed, and so did aborting its attempts: %s", topic, e
            )
        raise


@dataclass(frozen=True)
class _WriteSpec:
    """What every Spark task of one ``write_topic`` call needs to know. ``since``: on Kafka,
    the offsets of the marker topic when the call began (``kafka_once.marker_offsets``)."""

    topic: str
    partitions: int
    call: str
    key_col: str | None
    value_col: str
    timestamp_col: str | None
    since: Mapping[int, int] | None = None

    @property
    def prefix(self) -> str:
        """The writer id prefix of the call's segments on the file log."""
        return f"write_topic/{self.call}/"

    def write_id(self, index: int) -> str:
        """The id of the call's write of Spark partition ``index`` on Kafka."""
        return f"{self.call}-{index}"


def encode_rows(
    spec: _WriteSpec,
    index: int,
    rows: Iterator[Any],
    key_serde: Serde[Any],
    value_serde: Serde[Any],
    partitioner: Partitioner | None,
) -> Iterator[tuple[int, LogRecord]]:
    """Each row as its log partition and record, a chunk of rows at a time through the sinks'
    encoder (``log.encoder``; chunks double up to ``CHUNK`` rows); the first row that cannot
    be encoded raises."""
    choose = None
    if partitioner is not None:
        chosen_by = partitioner

        def choose(key: Any, value: Any, _key_bytes: Any, partitions: int) -> int:
            return chosen_by(key, value, partitions)

    encoder = TopicEncoder(key_serde, value_serde, choose, first_keyless=index)
    now = time.time_ns() // 1_000_000
    size = 1  # chunks grow from one row, so the first records go out as soon as they come
    while chunk := list(islice(rows, size)):
        size = min(size * 2, CHUNK)
        keys = (
            [row[spec.key_col] for row in chunk]
            if spec.key_col is not None
            else [None] * len(chunk)
        )
        encoded = encoder.encode(keys, [row[spec.value_col] for row in chunk], spec.partitions)
        if encoded.errors:
            error = encoded.errors[min(encoded.errors)]
            if isinstance(error, PartitionOutOfRangeError):
                raise ConfigError(
                    f"the partitioner chose partition {error.partition}; {spec.topic!r} has "
                    f"partitions 0..{spec.partitions - 1}"
                )
            raise error
        timestamps = (
            [_millis(row[spec.timestamp_col]) for row in chunk]
            if spec.timestamp_col
            else [now] * len(chunk)
        )
        for partition, key, value, timestamp in zip(
            encoded.partitions, encoded.keys, encoded.values, timestamps
        ):
            yield partition, LogRecord(key, value, timestamp)


def write_partition_once(
    log: KafkaLog,
    spec: _WriteSpec,
    index: int,
    rows: Iterator[Any],
    key_serde: Serde[Any],
    value_serde: Serde[Any],
    partitioner: Partitioner | None,
) -> int:
    """Write one Spark partition's rows to Kafka in one transaction, unless an earlier attempt
    committed them; the number of records of the Spark partition."""
    if spec.since is None:
        raise ConfigError("a write to Kafka needs the marker offsets taken when it began")
    records = encode_rows(spec, index, rows, key_serde, value_serde, partitioner)
    return append_once(log, spec.topic, records, write_id=spec.write_id(index), since=spec.since)


def write_partition(
    log: Log,
    spec: _WriteSpec,
    index: int,
    rows: Iterator[Any],
    key_serde: Serde[Any],
    value_serde: Serde[Any],
    partitioner: Partitioner | None,
) -> Iterator[dict[str, Any]]:
    """Write one Spark partition's rows as unsealed segments (one attempt: its own writer
    id); yield each segment's ref with its position, for the driver to seal."""
    writer_id = f"{spec.prefix}{index}/{uuid.uuid4().hex[:12]}"
    buffers: dict[int, list[LogRecord]] = {}
    written = 0
    for partition, record in encode_rows(spec, index, rows, key_serde, value_serde, partitioner):
        buffer = buffers.setdefault(partition, [])
        buffer.append(record)
        if len(buffer) >= CHUNK:
            yield _segment(log, spec, index, written, partition, buffer, writer_id)
            written += 1
            buffers[partition] = []
    for partition, buffer in sorted(buffers.items()):
        if buffer:
            yield _segment(log, spec, index, written, partition, buffer, writer_id)
            written += 1


def _segment(
    log: Log,
    spec: _WriteSpec,
    index: int,
    seq: int,
    partition: int,
    records: list[LogRecord],
    writer: str,
) -> dict[str, Any]:
    ref = log.write_segment(spec.topic, partition, records, writer_id=writer)
    return {"spark_partition": index, "seq": seq, "ref": ref.as_dict()}


def seal_written(log: Log, topic: str, prefix: str, refs: list[dict[str, Any]]) -> int:
    """Seal the segments one successful attempt per Spark partition wrote (in Spark partition
    and write order; idempotent by seal id), abort every other segment of the call, and
    return the records sealed."""
    seals = [
        (SegmentRef.from_dict(item["ref"]), f"{prefix}{item['spark_partition']}/{item['seq']}")
        for item in sorted(refs, key=lambda r: (r["spark_partition"], r["seq"]))
    ]
    log.seal_many(seals)  # the file log: one durable group of entries per topic
    log.abort_unsealed_by_prefix(prefix, topics=[topic])
    return sum(ref.record_count for ref, _ in seals)


def _millis(value: Any) -> int:
    if isinstance(value, datetime):  # from a Spark timestamp column
        return round(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"timestamps must be epoch ms or timestamps, got {value!r}")
    return value
