"""The committed offsets of a Kafka consumer group, read and written without joining it.

The engine commits each task's input offsets to the group named by the application id, as
Kafka Streams does, so that standard lag tools see the application. Its consumer only ever
uses ``assign()``-free calls (``committed``, ``commit``, ``consumer_group_metadata``), so it
never joins the group and no rebalance can hang on it. Each offset carries *metadata*: the
engine keeps the task's stream time and punctuation schedules there (Kafka Streams keeps its
partition time there too).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from streamtide.log.errors import LogError
from streamtide.log.kafka_client import (
    REQUIRED_CONSUMER,
    client_config,
    new_client,
    split_options,
    translate,
)
from streamtide.log.kafka_transaction import GRACE_S, bounded

#: What a committed offset of one partition is: ``(next offset, metadata)``.
Committed = tuple[int, str]


class GroupOffsets:
    """Committed offsets of consumer group ``group_id`` on the cluster of a ``KafkaLog``."""

    def __init__(self, log: Any, group_id: str) -> None:
        from confluent_kafka import Consumer

        client, _ = split_options(log.options)
        options = {**client, "group.id": group_id}
        self.group_id = group_id
        self.timeout_s = float(log.timeout_s)
        self._lock = threading.Lock()
        config = client_config(log.bootstrap, options, REQUIRED_CONSUMER)
        self._consumer = new_client(Consumer, config, f"reading the offsets of group {group_id}")

    def committed(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Committed]:
        """The committed ``(offset, metadata)`` of each partition that has one."""
        from confluent_kafka import TopicPartition

        wanted = [TopicPartition(t, p) for t, p in partitions]
        if not wanted:
            return {}
        with self._lock:
            found = self._call(
                lambda: self._consumer.committed(wanted, timeout=self.timeout_s),
                f"reading the committed offsets of group {self.group_id!r}",
            )
        out = {}
        for tp in found:
            if tp.error is not None:
                raise LogError(
                    f"reading the committed offset of group {self.group_id!r} for "
                    f"{tp.topic}/{tp.partition}: {tp.error}"
                )
            if tp.offset >= 0:
                out[(tp.topic, tp.partition)] = (tp.offset, tp.metadata or "")
        return out

    def group_metadata(self) -> Any:
        """The group's metadata, for ``KafkaTransaction.send_offsets``."""
        return self._consumer.consumer_group_metadata()

    def commit(self, offsets: Mapping[tuple[str, int], Committed]) -> None:
        """Commit ``offsets`` outside any transaction (at-least-once processing)."""
        with self._lock:
            self._call(
                lambda: self._consumer.commit(
                    offsets=topic_partitions(offsets), asynchronous=False
                ),
                f"committing offsets of group {self.group_id!r}",
            )

    def close(self) -> None:
        with self._lock:
            self._consumer.close()

    def _call(self, call: Any, what: str) -> Any:
        from confluent_kafka import KafkaException

        try:
            return bounded(call, self.timeout_s + GRACE_S, what)
        except KafkaException as e:
            raise translate(e, what) from None


def topic_partitions(offsets: Mapping[tuple[str, int], Committed]) -> list[Any]:
    """``offsets`` as confluent-kafka ``TopicPartition``s with their metadata."""
    from confluent_kafka import TopicPartition

    return [
        TopicPartition(topic, partition, offset, metadata)
        for (topic, partition), (offset, metadata) in sorted(offsets.items())
    ]
