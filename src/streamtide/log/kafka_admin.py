"""Topic administration for the Kafka log: metadata, create, delete, configs, delete_records,
high watermarks.

Each call waits at most the log's timeout and turns client errors into ``LogError`` types.
Metadata is always asked for all topics, never for one by name: a metadata request naming a
missing topic creates it on brokers that auto-create topics (the test broker does).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from streamtide.log.errors import LogError, LogUnavailableError
from streamtide.log.kafka_client import error_name, translate, unreachable


class KafkaAdmin:
    """An AdminClient with the log's timeout and error translation; ``url`` names the
    cluster in messages."""

    def __init__(self, client: Any, url: str, timeout_s: float) -> None:
        self.client = client
        self.url = url
        self.timeout_s = timeout_s

    def reach(self, bootstrap: str, timeout_s: float) -> dict[str, int]:
        """Partition counts of all topics, asked within ``timeout_s``; LogUnavailableError
        naming the bootstrap servers and what to check if the cluster does not answer."""
        try:
            metadata = self.client.list_topics(timeout=timeout_s)
        except Exception as e:
            raise unreachable(bootstrap, timeout_s, e) from None
        return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}

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
        return self.delete_records_many({(topic, partition): offset})[(topic, partition)]

    def delete_records_many(
        self, offsets: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """``delete_records`` of many partitions in one request per broker; returns each
        partition's new low watermark."""
        from confluent_kafka import TopicPartition

        if not offsets:
            return {}
        targets = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        futures = self.client.delete_records(targets, request_timeout=self.timeout_s)
        found = {}
        deadline = time.monotonic() + self.timeout_s
        for target, future in futures.items():
            where = f"{target.topic}/{target.partition}"
            try:
                result = future.result(max(0.0, deadline - time.monotonic()))
            except Exception as e:
                if error_name(e) == "POLICY_VIOLATION":
                    raise LogError(
                        f"cannot truncate {where}: the broker refuses to delete records of a "
                        "topic with cleanup.policy=compact"
                    ) from None
                raise translate(e, f"truncating {where} before {target.offset}") from None
            found[(target.topic, target.partition)] = int(result.low_watermark)
        return found

    def high_watermark(self, topic: str, partition: int) -> int:
        """The offset after the partition's last record, committed or not (a read_committed
        reader's end is the last stable offset, which an open transaction holds back)."""
        return self.list_offsets([(topic, partition)], "high")[(topic, partition)]

    def list_offsets(
        self, partitions: Iterable[tuple[str, int]], which: str
    ) -> dict[tuple[str, int], int]:
        """One offset of each partition, in one request per broker: ``"begin"`` (the first
        readable), ``"end"`` (the last stable offset: a read_committed reader's end) or
        ``"high"`` (the high watermark: after the last record, committed or not)."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        wanted = list(dict.fromkeys(partitions))
        if not wanted:
            return {}
        spec = OffsetSpec.earliest() if which == "begin" else OffsetSpec.latest()
        isolation = (
            IsolationLevel.READ_COMMITTED if which == "end" else IsolationLevel.READ_UNCOMMITTED
        )
        futures = self.client.list_offsets(
            {TopicPartition(t, p): spec for t, p in wanted},
            isolation_level=isolation,
            request_timeout=self.timeout_s,
        )
        found = {}
        deadline = time.monotonic() + self.timeout_s
        for target, future in futures.items():
            try:
                result = future.result(max(0.0, deadline - time.monotonic()))
            except Exception as e:
                where = f"{target.topic}/{target.partition}"
                raise translate(e, f"reading the {which} offset of {where} in {self.url}") from None
            found[(target.topic, target.partition)] = int(result.offset)
        return found

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
