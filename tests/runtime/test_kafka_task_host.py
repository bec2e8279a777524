"""Active and standby tasks of one work-unit host on a Kafka log: runs commit in their own
transactions, standbys catch up across the transaction markers, and a standby promoted after
its active copy moved away continues exactly where Kafka says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamtide import StreamsConfig
from streamtide.log import LogRecord, open_log
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.task_host import TaskHost
from streamtide.runtime.work_unit import ActiveSpec, WorkUnitSpec, run_work_unit
from tests.kafka_broker import KAFKA_TEST_OPTIONS, read_committed
from tests.runtime.test_task_host import _Setup, _topology

pytestmark = pytest.mark.kafka


class _KafkaSetup(_Setup):
    """``test_task_host``'s setup (topology, hosts) on a Kafka log."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.log = open_log(url, **KAFKA_TEST_OPTIONS)
        self.log.create_topic("in", 1)
        self.log.create_topic("counts-out", 1)
        self.log.create_topic("app-counts-changelog", 1, configs={"cleanup.policy": "compact"})
        self.url = url
        self.config = StreamsConfig(
            application_id="app",
            log=url,
            log_options=dict(KAFKA_TEST_OPTIONS),
            state_dir=str(tmp_path / "state"),
        )
        self.topology = _topology()

    def run_on(self, host: TaskHost, batch: int, start: int, end: int, state: Any) -> Any:
        spec = WorkUnitSpec(batch, 0, "c", [ActiveSpec("0_0", {"in": [start, end]}, state)])
        report = run_work_unit(
            self.topology, self.config, self.log, spec, make_task_stores, host=host
        )
        return report["tasks"][0]


def test_a_standby_follows_a_kafka_changelog_and_takes_over_exactly(kafka_url, tmp_path) -> None:
    setup = _KafkaSetup(kafka_url, tmp_path)
    setup.log.append("in", 0, [LogRecord(k.encode(), b"x", i + 1) for i, k in enumerate("abacb")])
    active, standby = setup.host_for("c1"), setup.host_for("c2")
    first = setup.run_on(active, 0, 0, 3, {})  # a=2, b=1: committed by its own transaction
    assert first["segments"] == [] and first["state"]["offsets"] == {"in:0": 3}
    caught = standby.update_standby("0_0")
    assert caught["lag"] == 0 and caught["local_offsets"]["counts"] >= 2
    second = setup.run_on(active, 1, 3, 4, first["state"])  # c=1
    again = standby.update_standby("0_0")
    assert again["lag"] == 0 and again["applied"] == 1  # one record; the markers are gaps
    active.release([])  # the task leaves its executor

    promoted = setup.run_on(standby, 2, 4, 5, second["state"])  # b=2

    assert promoted["restored_records"] == 0  # the standby was current
    rows = read_committed(setup.url, "counts-out")[0]
    assert [(k, int.from_bytes(v, "big")) for k, v, _ in rows] == [
        (b"a", 1),
        (b"b", 1),
        (b"a", 2),
        (b"c", 1),
        (b"b", 2),
    ]
    store = standby._active["0_0"].task.stores.get("counts")
    assert (store.get("a"), store.get("b"), store.get("c")) == (2, 2, 1)
    standby.close()
    active.close()


def _dies_once(monkeypatch, owner: Any, name: str, after: bool) -> None:
    """``owner.name`` ends its work unit once: before doing its work (``after`` False) or
    right after it (as a process killed there would, its caller gets no further)."""
    original = getattr(owner, name)
    calls = []

    def dying(self, *args: Any, **kwargs: Any) -> Any:
        if calls:
            return original(self, *args, **kwargs)
        calls.append(name)
        if after:
            original(self, *args, **kwargs)
        raise RuntimeError(f"the work unit died {'after' if after else 'in'} {name}")

    monkeypatch.setattr(owner, name, dying)


def test_a_work_unit_dying_in_and_after_its_commits_leaves_what_the_next_ones_restore(
    kafka_url, tmp_path, monkeypatch
) -> None:
    """Continuous execution, work units of one executor replaced after deaths: one dies in a
    task's commit (its transaction, with changelog records, is aborted), the next dies right
    after Kafka committed a run its stores never took (its checkpoint lies past the abort
    marker), and the third restores the store from that checkpoint, finds the retried run
    committed and runs the next. Every output and count is the one a run without deaths
    reaches."""
    from streamtide.log.kafka_transaction import KafkaTransaction
    from streamtide.runtime.kafka_unit_commit import KafkaUnitCommit

    setup = _KafkaSetup(kafka_url, tmp_path)
    # an application of its own: consumer groups outlive the topics of other tests
    setup.config = StreamsConfig(
        application_id="deaths",
        log=kafka_url,
        log_options=dict(KAFKA_TEST_OPTIONS),
        state_dir=str(tmp_path / "state"),
    )
    keys = ["a", "b", "a", "c", "a", "b", "a"]
    setup.log.append("in", 0, [LogRecord(k.encode(), b"x", i + 1) for i, k in enumerate(keys)])

    def new_work_unit() -> TaskHost:  # a process of its own: its own Kafka clients
        setup.log = open_log(kafka_url, **KAFKA_TEST_OPTIONS)
        return setup.host_for("c1")

    first = new_work_unit()
    zero = setup.run_on(first, 0, 0, 2, {})
    _dies_once(monkeypatch, KafkaTransaction, "commit", after=False)
    with pytest.raises(RuntimeError, match="died in commit"):
        setup.run_on(first, 1, 2, 4, zero["state"])
    first.close()

    second = new_work_unit()  # the replacement work unit: the aborted run again
    one = setup.run_on(second, 1, 2, 4, zero["state"])
    _dies_once(monkeypatch, KafkaUnitCommit, "_confirm", after=True)
    with pytest.raises(RuntimeError, match="died after _confirm"):
        setup.run_on(second, 2, 4, 6, one["state"])
    second.close()

    third = new_work_unit()
    retried = setup.run_on(third, 2, 4, 6, one["state"])  # the driver never heard of it
    assert retried["already_committed"] and retried["state"]["offsets"] == {"in:0": 6}
    setup.run_on(third, 3, 6, 7, retried["state"])

    rows = read_committed(setup.url, "counts-out")[0]
    assert [(k, int.from_bytes(v, "big")) for k, v, _ in rows] == [
        (b"a", 1), (b"b", 1), (b"a", 2), (b"c", 1), (b"a", 3), (b"b", 2), (b"a", 4),
    ]  # fmt: skip
    store = third._active["0_0"].task.stores.get("counts")
    assert (store.get("a"), store.get("b"), store.get("c")) == (4, 2, 1)
    third.close()
