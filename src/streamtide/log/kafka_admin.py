"""Topic administration for the Kafka log: metadata, create, delete, configs, delete_records,
high watermarks.

Each call waits at most the log's timeout and turns client errors into ``LogError`` types.
Metadata is always asked for all topics, never for one by name: a metadata request naming a
missing topic creates it on brokers that auto-create topics (the test broker does).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from streamtide.log.errors import LogError, LogUnavailableError
from streamtide.log.kafka_client import error_name, translate


class KafkaAdmin:
    """An AdminClient with the log's timeout and error translation; ``url`` names the
    cluster in messages."""

    def __init__(self, client: Any, url: str, timeout_s: float) -> None:
        self.client = client
        self.url = url
        self.timeout_s = timeout_s

    def partition_counts(self) -> dict[str, int]:
        """Partition counts of all topics (internal ones included)."""
        try:
            metadata = self.client.list_topics(timeout=self.timeout_s)
        except Exception as e:
            raise translate(e, f"listing the topics of {self.url}") from None
        return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}

    def create(self, name: str, partitions: int, configs: Mapping[str, str]) -> None:
        """Create a topic (TopicExistsError if it exists) and wait until metadata shows it."""
        from confluent_kafka.admin import NewTopic

        new = NewTopic(name, partitions, replication_factor=-1, config=dict(configs))
        future = self.client.create_topics([new], request_timeout=self.timeout_s)[name]
        try:
            future.result(self.timeout_s)
        except Exception as e:
            raise translate(e, f"creating topic {name!r} in {self.url}") from None
        self.await_metadata(name, partitions)

    def delete(self, name: str) -> None:
        """Delete a topic (UnknownTopicError if missing) and wait until metadata drops it."""
        future = self.client.delete_topics([name], request_timeout=self.timeout_s)[name]
        try:
            future.result(self.timeout_s)
        except Exception as e:
            raise translate(e, f"deleting topic {name!r} in {self.url}") from None
        self.await_metadata(name, None)

    def configs(self, name: str) -> dict[str, str]:
        """The topic's effective configs as the broker reports them."""
        from confluent_kafka.admin import ConfigResource

        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        future = self.client.describe_configs([resource], request_timeout=self.timeout_s)
        try:
            entries = future[resource].result(self.timeout_s)
        except Exception as e:
            raise translate(e, f"describing the configs of topic {name!r}") from None
        return {key: entry.value for key, entry in entries.items()}

    def topic_id(self, name: str) -> str | None:
        """The topic's id (KIP-516), or None where the broker reports none (an all-zero id,
        as some Kafka-protocol brokers give). Ask only for a topic that exists: a metadata
        request naming a missing one creates it on brokers that auto-create topics."""
        from confluent_kafka import TopicCollection

        future = self.client.describe_topics(
            TopicCollection([name]), request_timeout=self.timeout_s
        )[name]
        try:
            found = future.result(self.timeout_s).topic_id
        except Exception as e:
            raise translate(e, f"describing topic {name!r} in {self.url}") from None
        text = str(found) if found is not None else ""
        return None if not text or set(text) <= {"A", "="} else text

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Purge the records below ``offset``; returns the new low watermark."""
        from confluent_kafka import TopicPartition

        target = TopicPartition(topic, partition, offset)
        futures = self.client.delete_records([target], request_timeout=self.timeout_s)
        try:
            result = next(iter(futures.values())).result(self.timeout_s)
        except Exception as e:
            if error_name(e) == "POLICY_VIOLATION":
                raise LogError(
                    f"cannot truncate {topic}/{partition}: the broker refuses to delete records "
                    "of a topic with cleanup.policy=compact"
                ) from None
            raise translate(e, f"truncating {topic}/{partition} before {offset}") from None
        return int(result.low_watermark)

    def high_watermark(self, topic: str, partition: int) -> int:
        """The offset after the partition's last record, committed or not (a read_committed
        reader's end is the last stable offset, which an open transaction holds back)."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        target = TopicPartition(topic, partition)
        futures = self.client.list_offsets(
            {target: OffsetSpec.latest()},
            isolation_level=IsolationLevel.READ_UNCOMMITTED,
            request_timeout=self.timeout_s,
        )
        try:
            return int(next(iter(futures.values())).result(self.timeout_s).offset)
        except Exception as e:
            raise translate(e, f"reading the high watermark of {topic}/{partition}") from None

    def await_metadata(self, topic: str, partitions: int | None) -> None:
        """Wait until metadata shows ``topic`` with ``partitions`` (None: no longer shows it):
        Kafka creates and deletes topics asynchronously."""
        deadline = time.monotonic() + self.timeout_s
        while self.partition_counts().get(topic) != partitions:
            if time.monotonic() > deadline:
                state = "created" if partitions is not None else "deleted"
                raise LogUnavailableError(
                    f"topic {topic!r} was {state} but the metadata of {self.url} did not show "
                    f"it within {self.timeout_s:g} s"
                )
            time.sleep(0.05)
