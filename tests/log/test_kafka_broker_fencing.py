"""The test broker's fencing of a commit that races its successor, with confluent-kafka alone
(no Streamtide code): what the engine's exactly-once rests on when a driver dies and its
work units' producers are fenced by the next driver's.

A producer commits a transaction with records and consumer-group offsets while a new
producer of the same ``transactional.id`` initialises, at every relative timing. After the
new producer's ``init_transactions`` returns, the group's committed offsets (read at
read_committed) must show exactly the commits that won: the racing commit's offset if its
``commit_transaction`` returned, the earlier one if it was fenced, and never its records
without its offsets or the other way round.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kafka_broker import read_committed

pytestmark = pytest.mark.kafka

TRIALS = 30


def test_a_commit_racing_its_successors_init_transactions_is_all_or_nothing(
    kafka_url,
) -> None:
    bootstrap = kafka_url.partition("://")[2]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("out", 1, 1), NewTopic("in", 1, 1)]).values():
        future.result(10)
    group = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "racing",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    rnd = random.Random(5)
    outcomes = {"committed": 0, "fenced": 0}
    committed_offset = 0
    won: list[str] = []  # the records of the commits that returned, in order
    try:
        for trial in range(TRIALS):
            old = Producer({"bootstrap.servers": bootstrap, "transactional.id": "task"})
            old.init_transactions(10)
            old.begin_transaction()
            old.produce("out", f"trial-{trial}".encode(), b"k", partition=0)
            old.flush(10)
            offsets = [TopicPartition("in", 0, trial + 1)]
            old.send_offsets_to_transaction(offsets, group.consumer_group_metadata(), 10)
            new = Producer({"bootstrap.servers": bootstrap, "transactional.id": "task"})
            new.list_topics(timeout=10)  # connected: its init races the commit closely
            result: list[str] = []

            def commit(old: Producer = old, result: list[str] = result) -> None:
                try:
                    old.commit_transaction(10)
                    result.append("committed")
                except KafkaException:
                    result.append("fenced")

            committing = threading.Thread(target=commit)
            initialising = threading.Thread(target=lambda new=new: new.init_transactions(10))
            first, second = (committing, initialising)[:: rnd.choice((1, -1))]
            first.start()
            time.sleep(rnd.uniform(0, 0.01))
            second.start()
            committing.join()
            initialising.join()
            found = group.committed([TopicPartition("in", 0)], timeout=10)[0].offset
            outcomes[result[0]] += 1
            if result[0] == "committed":
                committed_offset = trial + 1
            assert found == (committed_offset or -1001), (trial, result, found)
            if result[0] == "committed":
                won.append(f"trial-{trial}")
            new.purge()
    finally:
        group.close()
    assert [v.decode() for _, v, _ in read_committed(kafka_url, "out")[0]] == won
    print(f"\n{TRIALS} racing commits: {outcomes}")
    assert outcomes["committed"] > 0
