"""Shared helpers of the deduplication tests: one topology per operator, run in the driver.

Every record carries its dedup label and a sequence number in its value, so a test can see
exactly which records were forwarded. The dedup id of a record is the label:

- ``by_key``: the record key is the label (``None`` label: ``None`` key).
- ``by_key_value``: the key is ``"user"`` and ``id_selector`` returns the label.
- ``deduplicate``: the key is unique per record and ``id_selector`` returns the label.
"""

from __future__ import annotations

from typing import Any

from streamtide import Consumed, Deduplicated, Produced, Serdes, StreamsBuilder, StreamsConfig
from streamtide.testing import TopologyTestDriver

OPERATORS = ("by_key", "by_key_value", "deduplicate")
APP = "dedup-app"


def by_label(_key: Any, value: dict) -> Any:
    return value["id"]


def build(
    operator: str,
    interval: Any,
    *,
    rekey: bool = False,
    deduplicated: Deduplicated | None = None,
) -> StreamsBuilder:
    """``input`` -> [select_key identity] -> dedup -> ``output`` (string keys, JSON values)."""
    builder = StreamsBuilder()
    stream = builder.stream("input", Consumed.with_(Serdes.string(), Serdes.json()))
    if rekey:
        stream = stream.select_key(lambda k, _v: k)
    if deduplicated is None and rekey:  # a key change forgets the key serde
        deduplicated = Deduplicated.with_(Serdes.string(), Serdes.json())
    if operator == "by_key":
        out = stream.deduplicate_by_key(interval, deduplicated)
    else:
        options = deduplicated or Deduplicated()
        if options.id_serde is None:
            options = options.with_id_serde(Serdes.string())
        if operator == "by_key_value":
            out = stream.deduplicate_by_key_value(by_label, interval, options)
        else:
            out = stream.deduplicate(by_label, interval, options)
    out.to("output", Produced.with_(Serdes.string(), Serdes.json()))
    return builder


def driver_for(builder: StreamsBuilder) -> TopologyTestDriver:
    return TopologyTestDriver(builder.build(), StreamsConfig(application_id=APP))


def key_of(operator: str, label: Any, n: int) -> Any:
    if operator == "by_key":
        return label
    if operator == "by_key_value":
        return "user"
    return f"record-{n}"


def run(
    operator: str,
    events: list[tuple[Any, int]],
    interval: Any,
    *,
    rekey: bool = False,
) -> tuple[list[tuple[Any, int]], dict[str, int]]:
    """Pipe ``(label, timestamp)`` events; return the forwarded ones and the metrics."""
    with driver_for(build(operator, interval, rekey=rekey)) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.json())
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.json())
        for n, (label, ts) in enumerate(events):
            source.pipe_input(key_of(operator, label, n), {"id": label, "n": n}, ts)
        records = sink.read_records()
        for record in records:  # records leave unchanged: same key, value and timestamp
            n = record.value["n"]
            assert record.key == key_of(operator, record.value["id"], n)
            assert record.timestamp == events[n][1]
        return [(r.value["id"], r.timestamp) for r in records], driver.metrics()
