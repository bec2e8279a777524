"""Helpers of the table and join tests: a processor that captures what a table node
forwards (its ``Change`` values, as Kafka's tests capture them with a mock processor)."""

from __future__ import annotations

from typing import Any

from streamtide import Processor, Record, Serdes, StreamsBuilder, StreamsConfig
from streamtide.dsl.change import Change

STRING, INT = Serdes.string(), Serdes.int()


class Captured:
    """What a ``capture`` processor received, as ``(key, Change(new, old), timestamp)``."""

    def __init__(self) -> None:
        self.records: list[tuple[Any, Change, int]] = []

    def take(self) -> list[tuple[Any, Any, int]]:
        taken, self.records = self.records, []
        return taken


def capture(builder: StreamsBuilder, node: str) -> Captured:
    """Attach a processor under ``node`` that records every update it forwards."""
    captured = Captured()

    class Capture(Processor):
        def process(self, record: Record) -> None:
            captured.records.append((record.key, record.value, record.timestamp))

    builder.topology.add_processor(f"capture-{node}", Capture, node)
    return captured


def config(key_serde: Any = STRING, value_serde: Any = STRING) -> StreamsConfig:
    return StreamsConfig(
        application_id="table-test", default_key_serde=key_serde, default_value_serde=value_serde
    )


def C(new: Any, old: Any = None) -> Change:
    return Change(new, old)
