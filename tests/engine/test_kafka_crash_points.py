"""Every crash point of the commit protocol on Kafka, without Spark.

The driver of ``test_crash_points`` runs the same two-stage topology (a repartition, then a
count) with real work units and stores, on Kafka: each task commits its outputs, repartition
and changelog records and input offsets in its own transaction. The driver "dies" right after
its n-th write, counting both its protocol records and every task's transaction commit (a
task that committed but whose report never reached the driver); a new driver must reach
exactly the outcome of a run that never crashed, and no transaction may stay open.
"""

from __future__ import annotations

import pytest

from streamtide.runtime.kafka_task_commit import KafkaTaskCommit
from tests.engine.local_driver import LocalDriver
from tests.engine.scenarios import engine_config, make_events, write_events
from tests.engine.test_crash_points import DriverDied, counting_topology, outcome
from tests.engine.test_crash_points import die_after as crash_after
from tests.kafka_broker import delete_all_topics

pytestmark = pytest.mark.kafka


def kafka_setup(broker, tmp_path, app: str):
    """Fresh topics, the crash test's input (timestamps Kafka stores) and a config."""
    delete_all_topics(broker)
    events = [(u, v, ts + 1_000_000) for u, v, ts in make_events(60, seed=11)]
    write_events(broker.url, events)
    return engine_config(broker.url, str(tmp_path / "state"), app=app)


def renamed(records: dict, app: str) -> dict:
    """Records by topic with the application id taken out of internal topics' names (each
    run has its own id: a consumer group's offsets outlive the topics)."""
    return {(t.replace(app, "<app>"), p): r for (t, p), r in records.items()}


def renamed_states(states: dict, app: str) -> dict:
    return {
        task: {
            **state,
            "offsets": {k.replace(app, "<app>"): v for k, v in state["offsets"].items()},
        }
        for task, state in states.items()
    }


def die_after(driver: LocalDriver, n: int, patch: pytest.MonkeyPatch) -> list[int]:
    """Make the driver die right after its n-th write: a protocol record or a task's
    transaction commit (a task that committed, but whose report never reached the driver)."""
    return crash_after(driver, n, ((KafkaTaskCommit, "commit"),), patch.setattr)


def test_a_driver_dying_after_any_write_on_kafka_leaves_a_state_a_new_driver_completes(
    kafka_broker, tmp_path, monkeypatch
) -> None:
    config = kafka_setup(kafka_broker, tmp_path / "reference", "crash-reference")
    reference = LocalDriver(counting_topology(), config)
    with monkeypatch.context() as patch:
        count = die_after(reference, -1, patch)
        reference.run_until_caught_up()
    writes = count[0]
    expected_states, expected_records = outcome(reference)
    expected_records = renamed(expected_records, "crash-reference")
    assert reference.batch >= 2 and writes > 20, writes
    assert sum(len(r) for (t, _), r in expected_records.items() if t == "out") > 0
    for crash_at in range(1, writes + 1):
        app = f"crash-{crash_at}"
        config = kafka_setup(kafka_broker, tmp_path / app, app)
        first = LocalDriver(counting_topology(), config)
        with monkeypatch.context() as patch:
            die_after(first, crash_at, patch)
            with pytest.raises(DriverDied):
                first.run_until_caught_up()
        second = LocalDriver(counting_topology(), config)  # fences what the first left open
        second.run_until_caught_up()
        states, records = outcome(second)
        assert renamed(records, app) == expected_records, f"crash after write {crash_at}"
        assert renamed_states(states, app) == renamed_states(expected_states, "crash-reference")
