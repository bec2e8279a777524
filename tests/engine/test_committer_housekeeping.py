"""The driver's housekeeping after a stage, on both logs: unsealed segments are looked for
only when attempts other than the winners may have left some (file log); repartition records
are purged at most every ``PURGE_INTERVAL_S`` and transactions are waited for in bulk (Kafka).
"""

from __future__ import annotations

import logging

import pytest

from streamtide.engine import kafka_committer
from streamtide.engine.app_dir import AppDirectory
from streamtide.engine.committer import BatchCommitter
from streamtide.engine.kafka_committer import KafkaBatchCommitter
from streamtide.log import REPARTITION_CONFIGS, LogRecord, open_log
from streamtide.runtime.work_unit import writer_prefix
from tests.kafka_broker import KAFKA_TEST_OPTIONS, delete_all_topics


def records(n: int) -> list[LogRecord]:
    return [LogRecord(b"k", f"v{i}".encode(), 1000 + i) for i in range(n)]


def test_a_stage_is_swept_only_when_other_attempts_may_have_written(tmp_path) -> None:
    log = open_log(str(tmp_path / "log"))
    log.create_topic("out", 1)
    committer = BatchCommitter(AppDirectory(tmp_path / "app", "app"), log, "app")
    committer.start()

    def run(batch: int, others_ran: bool) -> tuple[str, str]:
        prefix = writer_prefix("app", batch, 0)
        lost = log.write_segment("out", 0, records(2), writer_id=f"{prefix}0_0/lost")
        won = log.write_segment("out", 0, records(2), writer_id=f"{prefix}0_0/won")
        report = {
            "tasks": [
                {"task": "0_0", "segments": [won.as_dict()], "state": {}, "writer": won.writer_id}
            ]
        }
        committer.run_stage(
            batch,
            0,
            lambda: ({"0_0": {}}, {}),
            lambda ranges: [("client", report)],
            others_ran=lambda: others_ran,
        )
        return lost.name, won.name

    clean_lost, _ = run(0, others_ran=False)
    assert [s.name for s in log.list_unsealed("out", 0)] == [clean_lost]  # not looked for
    retried_lost, _ = run(1, others_ran=True)
    assert [s.name for s in log.list_unsealed("out", 0)] == [clean_lost]  # batch 1's deleted
    assert retried_lost not in {s.name for s in log.list_unsealed("out", 0)}
    assert log.end_offset("out", 0) == 4  # both winners sealed
    # a restarted driver deletes what decided batches left behind (``start`` sweeps them)
    assert committer.sweep_committed(1) == 1
    assert log.list_unsealed("out", 0) == []


@pytest.mark.kafka
def test_repartition_records_are_purged_at_most_every_interval(kafka_broker, tmp_path) -> None:
    delete_all_topics(kafka_broker)
    log = open_log(kafka_broker.url, **KAFKA_TEST_OPTIONS)
    log.create_topic("r", 2, configs=REPARTITION_CONFIGS)
    for p in range(2):
        log.append("r", p, records(5))
    committer = KafkaBatchCommitter(AppDirectory(tmp_path / "app", "app"), log, "app")
    try:
        committer.purge({("r", 0): 3, ("r", 1): 2})
        assert log.begin_offsets([("r", 0), ("r", 1)]) == {("r", 0): 3, ("r", 1): 2}
        committer.purge({("r", 0): 5, ("r", 1): 5})  # within the interval: nothing
        assert log.begin_offsets([("r", 0), ("r", 1)]) == {("r", 0): 3, ("r", 1): 2}
        committer.purge({("r", 0): 5, ("r", 1): 4}, force=True)
        assert log.begin_offsets([("r", 0), ("r", 1)]) == {("r", 0): 5, ("r", 1): 4}
    finally:
        committer.close()


@pytest.mark.kafka
def test_settled_ends_wait_for_open_transactions_in_bulk(
    kafka_broker, tmp_path, monkeypatch, caplog
) -> None:
    from confluent_kafka import Producer

    delete_all_topics(kafka_broker)
    log = open_log(kafka_broker.url, **KAFKA_TEST_OPTIONS)
    log.create_topic("r", 3, configs=REPARTITION_CONFIGS)
    log.append("r", 0, records(2))
    producer = Producer(
        {"bootstrap.servers": kafka_broker.bootstrap, "transactional.id": "settle-test"}
    )
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("r", b"open", b"k", partition=2, timestamp=1000)
    producer.flush(10)
    committer = KafkaBatchCommitter(AppDirectory(tmp_path / "app", "app"), log, "app")
    monkeypatch.setattr(kafka_committer, "SETTLE_WAIT_S", 0.3)
    keys = [("r", 0), ("r", 1), ("r", 2)]
    with caplog.at_level(logging.WARNING):
        assert committer.settled_ends(keys) == {("r", 0): 2, ("r", 1): 0, ("r", 2): 0}
    assert "r/2: records up to offset 1 are not readable yet" in caplog.text
    producer.commit_transaction(10)
    settled = committer.settled_ends(keys)
    assert settled[("r", 2)] >= 1 and settled == log.end_offsets(keys)
    assert committer.settled_end("r", 0) == 2
    committer.close()
