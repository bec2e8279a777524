"""Reading one record at a given offset of many Kafka partitions at once.

A driver checks, for every source partition whose end moved, that the record its task read
last is still there (``log.source_marks``: on brokers without topic ids that is how a
re-created topic is told). One read per partition is a few round trips each; here every
partition is assigned at its offset to one consumer, whose fetches ask for all of them
together, with a small per-partition fetch size (the first record is all that is wanted).

Only a record found exactly at the offset asked for is an answer. A partition that delivers
nothing in time, an end-of-partition event, or a record at a later offset (a gap, or a
record the broker hid after an aborted transaction: see ``log.kafka_read``) gets no answer
here: the caller reads it on its own (``mark_holds``), which handles those cases.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from streamtide.log.kafka_client import REQUIRED_CONSUMER, client_config, new_client

#: Fetch sizes of the probing consumer: a broker returns at least one record batch anyway.
PROBE_SETTINGS = {"max.partition.fetch.bytes": 4096, "fetch.max.bytes": 1 << 20}
#: How long a probe waits for partitions that have not answered (they are read on their own).
PROBE_WAIT_S = 2.0
_POLL_S = 0.05

#: A record found at the offset asked for: (timestamp, key, value).
Found = tuple[int, bytes | None, bytes | None]


class RecordProbe:
    """One consumer that reads the record at an offset of many partitions at once."""

    def __init__(self, bootstrap: str, client_options: Mapping[str, Any], group_id: str) -> None:
        from confluent_kafka import Consumer

        options = {"group.id": group_id, **PROBE_SETTINGS, **client_options}
        config = client_config(bootstrap, options, REQUIRED_CONSUMER)
        self._consumer = new_client(Consumer, config, f"reading {bootstrap}")

    def records_at(
        self, positions: Mapping[tuple[str, int], int], wait_s: float = PROBE_WAIT_S
    ) -> dict[tuple[str, int], Found]:
        """The record at each ``(topic, partition) -> offset`` that was found exactly there
        (see the module docstring); partitions left out have no answer."""
        from confluent_kafka import TopicPartition

        pending = dict(positions)
        if not pending:
            return {}
        found: dict[tuple[str, int], Found] = {}
        self._consumer.assign([TopicPartition(t, p, o) for (t, p), o in pending.items()])
        try:
            deadline = time.monotonic() + wait_s
            while pending and time.monotonic() < deadline:
                for message in self._consumer.consume(len(pending), _POLL_S):
                    key = (message.topic(), message.partition())
                    offset = pending.pop(key, None)
                    if offset is None or message.error() is not None:
                        continue  # an end-of-partition event: no answer here
                    if message.offset() == offset:
                        found[key] = (message.timestamp()[1], message.key(), message.value())
        finally:
            self._consumer.unassign()
        return found

    def close(self) -> None:
        self._consumer.close()
