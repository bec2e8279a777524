"""The tests' Kafka-protocol broker (``streamtide.testing.kafka_broker``) and helpers to
empty it and read it independently of Streamtide's own Kafka client code."""

from __future__ import annotations

import time

from streamtide.testing.kafka_broker import (
    Broker,
    BrokerUnavailable,
    binary,
    free_port,
    start_broker,
)

__all__ = [
    "KAFKA_TEST_OPTIONS",
    "Broker",
    "BrokerUnavailable",
    "binary",
    "delete_all_topics",
    "free_port",
    "read_committed",
    "start_broker",
]


def delete_all_topics(broker: Broker) -> None:
    """Delete every topic but Kafka's internal ones, and wait until metadata shows none."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    names = [t for t in admin.list_topics(timeout=10).topics if not t.startswith("__")]
    if not names:
        return
    for future in admin.delete_topics(names, request_timeout=10).values():
        future.result(10)
    deadline = time.monotonic() + 10
    while any(not t.startswith("__") for t in admin.list_topics(timeout=10).topics):
        if time.monotonic() > deadline:
            raise RuntimeError("topics of earlier tests are still listed after deletion")
        time.sleep(0.05)


#: Options of the tests' Kafka logs: topics keep records with 1970 timestamps (the broker
#: enforces retention.ms within seconds, on the active segment too; see docs/kafka.md).
KAFKA_TEST_OPTIONS = {"topic.retention.ms": "-1"}


def read_committed(url: str, topic: str, timeout_s: float = 30.0) -> dict[int, list[tuple]]:
    """Every partition of ``topic`` as ``(key bytes, value bytes, timestamp)`` rows, read to
    its end by a plain confluent-kafka consumer at read_committed (no Streamtide code), as any
    Kafka tool would see them."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    bootstrap = url.partition("://")[2]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "streamtide-test-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        partitions = len(consumer.list_topics(topic, timeout=timeout_s).topics[topic].partitions)
        rows: dict[int, list[tuple]] = {p: [] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        done: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} took more than {timeout_s} s")
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF
                    done.add(message.partition())
                    continue
                raise RuntimeError(f"reading {topic}: {message.error()}")
            done.discard(message.partition())
            rows[message.partition()].append(
                (message.key(), message.value(), message.timestamp()[1])
            )
        return rows
    finally:
        consumer.close()
