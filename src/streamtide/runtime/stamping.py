"""Applying a source's timestamp extractor to the task's input columns.

The task stamps a topic's columns before it computes the processing order, so the order uses
the extracted timestamps (as Kafka Streams' ``RecordQueue`` does when a record becomes the head
of its partition). The extractor sees the records of a partition in offset order with the
partition time (highest extracted timestamp so far, ``-1`` before the first); rows that fail
to deserialize keep their stored timestamp (the deserialization handler takes them).
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

from streamtide.errors import SerdeError, UserCodeError, from_infrastructure
from streamtide.runtime.columns import InputColumns
from streamtide.time import UNKNOWN_TIME
from streamtide.timestamp_extractor import ConsumerRecord, TimestampExtractor


class SourceStamper:
    """Runs one source topic's extractor and keeps that partition's partition time."""

    def __init__(
        self,
        extractor: TimestampExtractor,
        topic: str,
        partition: int,
        task_id: str,
        partition_time: int = UNKNOWN_TIME,
    ) -> None:
        self.extractor = extractor
        self.topic = topic
        self.partition = partition
        self.task_id = task_id
        self.partition_time = partition_time

    def extract(
        self, key: Any, value: Any, timestamp: int, headers: Any, offset: int | None
    ) -> int:
        consumed = ConsumerRecord(
            self.topic, self.partition, offset, key, value, timestamp, tuple(headers or ())
        )
        try:
            extracted = self.extractor(consumed, self.partition_time)
        except Exception as exc:
            if from_infrastructure(exc):
                raise
            raise UserCodeError(
                f"the timestamp extractor failed: {type(exc).__name__}: {exc}",
                task_id=self.task_id,
                topic=self.topic,
                partition=self.partition,
                offset=offset,
            ) from exc
        if extracted.__class__ is not int:
            if not isinstance(extracted, Integral) or isinstance(extracted, bool):
                raise UserCodeError(
                    f"the timestamp extractor returned {extracted!r}, not an int",
                    task_id=self.task_id,
                    topic=self.topic,
                    partition=self.partition,
                    offset=offset,
                )
            extracted = int(extracted)
        if extracted > self.partition_time:
            self.partition_time = extracted
        return extracted

    def stamp_columns(
        self,
        columns: InputColumns,
        keys: list[Any],
        values: list[Any],
        errors: dict[int, SerdeError],
    ) -> None:
        """Replace ``columns.timestamps`` with the extracted ones."""
        extract = self.extract
        stored = columns.timestamps
        columns.timestamps = [
            ts
            if errors and row in errors
            else extract(keys[row], values[row], ts, columns.headers[row], columns.offsets[row])
            for row, ts in enumerate(stored)
        ]
