"""A task's commit on Kafka, in its work unit's transaction: decisions from the committed
offsets, fencing, and transactions a dead producer left open (on the test broker)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streamtide.errors import StreamtideError
from streamtide.log import ProducerFencedError, open_log
from streamtide.log.kafka_group import GroupOffsets
from streamtide.runtime.committed import TaskCommittedState
from streamtide.runtime.kafka_task_commit import (
    KafkaTaskCommit,
    decode_state,
    encode_metadata,
)
from streamtide.runtime.kafka_unit_commit import KafkaUnitCommit
from tests.kafka_broker import KAFKA_TEST_OPTIONS

pytestmark = pytest.mark.kafka


@pytest.fixture
def klog(kafka_url):
    log = open_log(kafka_url, **KAFKA_TEST_OPTIONS)
    log.create_topic("in", 2)
    log.create_topic("out", 1)
    yield log
    log.close()


def columns(*values: bytes) -> SimpleNamespace:
    return SimpleNamespace(
        keys=[b"k"] * len(values),
        values=list(values),
        timestamps=[1_000 + i for i in range(len(values))],
        headers=[()] * len(values),
    )


def task_commit(log, group, app="app") -> KafkaTaskCommit:
    return KafkaTaskCommit(log, group, app, "0_1", [("in", 1)])


def unit_commit(log, group, app="app", tid: str | None = "app-unit-c-0-s0-g0") -> KafkaUnitCommit:
    return KafkaUnitCommit(log, group, app, tid)


def commit_one(unit: KafkaUnitCommit, task: KafkaTaskCommit, pending, state) -> dict:
    return unit.commit([task.prepare(pending, state)])


def test_a_run_is_done_once_and_found_committed_after(klog) -> None:
    group = GroupOffsets(klog, "app")
    commit, unit = task_commit(klog, group), unit_commit(klog, group)
    start = TaskCommittedState()
    first = commit.decide(start.to_dict(), {"in": [0, 5]})  # nothing committed: run as planned
    assert (first.done, first.state, first.ranges) == (False, start, {"in": [0, 5]})
    done = TaskCommittedState({"in:1": 5}, stream_time=1_004, schedules={"s": 2_000})
    written = commit_one(unit, commit, [("out", 0, columns(b"a", b"b"))], done)
    assert written == {("out", 0): 1}
    # the same run again (its report was lost): committed already, with the whole state
    again = commit.decide(start.to_dict(), {"in": [0, 5]})
    assert again.done and again.state == done
    following = commit.decide(done.to_dict(), {"in": [5, 9]})
    assert not following.done and following.ranges == {"in": [5, 9]}
    # a plan from a stale state (a zombie committed part of its range): run from Kafka's
    partly = commit.decide(TaskCommittedState({"in:1": 3}).to_dict(), {"in": [3, 8]})
    assert (partly.done, partly.state, partly.ranges) == (False, done, {"in": [5, 8]})
    # a plan ahead of Kafka (the driver's records say more than Kafka holds): Kafka wins
    ahead = commit.decide(TaskCommittedState({"in:1": 7}).to_dict(), {"in": [7, 9]})
    assert (ahead.done, ahead.state, ahead.ranges) == (False, done, {"in": [5, 9]})
    assert [r.value for r in klog.read("out", 0)] == [b"a", b"b"]
    unit.close()
    group.close()


def test_a_run_never_reads_from_before_the_committed_offsets(klog) -> None:
    """A restarted driver resumes a stage with the ranges its predecessor recorded, while
    the state it plans from came from Kafka, where the run already committed (the first batch
    was never recorded as committed): the planned state equals Kafka's, the ranges start
    before its offsets. Running them would process those records a second time."""
    group = GroupOffsets(klog, "app")
    commit, unit = task_commit(klog, group), unit_commit(klog, group)
    done = TaskCommittedState({"in:1": 5}, stream_time=1_004)
    commit_one(unit, commit, [("out", 0, columns(b"a"))], done)
    again = commit.decide(done.to_dict(), {"in": [0, 5]})
    assert again.done and again.state == done
    overlapping = commit.decide(done.to_dict(), {"in": [3, 8]})
    assert (overlapping.done, overlapping.state, overlapping.ranges) == (
        False,
        done,
        {"in": [5, 8]},
    )
    unit.close()
    group.close()


def test_a_transaction_a_dead_producer_left_open_is_aborted_by_the_next_one(klog) -> None:
    group = GroupOffsets(klog, "app")
    dead = unit_commit(klog, group)
    txn = dead.transaction
    txn.begin()  # a work unit that dies mid-commit: records sent, no commit, no abort
    txn.produce("out", 0, b"k", b"never", 1_000)
    txn.flush()
    assert klog.end_offset("out", 0) == 0  # readers wait at the open transaction
    again = unit_commit(klog, group)  # the unit runs again: fences and aborts
    task = task_commit(klog, group)
    commit_one(again, task, [("out", 0, columns(b"once"))], TaskCommittedState({"in:1": 3}))
    assert [r.value for r in klog.read("out", 0)] == [b"once"]
    with pytest.raises(ProducerFencedError, match="fenced"):  # the zombie goes on: refused
        txn.produce("out", 0, b"k", b"zombie", 1_001)
        txn.commit()
    assert [r.value for r in klog.read("out", 0)] == [b"once"]
    assert task.committed_state() == TaskCommittedState({"in:1": 3})
    again.close()
    group.close()


def test_at_least_once_appends_then_commits_without_a_transaction(klog) -> None:
    group = GroupOffsets(klog, "app-alo")
    commit = KafkaTaskCommit(klog, group, "app-alo", "0_1", [("in", 1)])
    unit = unit_commit(klog, group, "app-alo", None)
    assert unit.transaction is None
    pending = [("out", 0, columns(b"x", b"y"))]
    written = commit_one(unit, commit, pending, TaskCommittedState({"in:1": 2}))
    assert written == {("out", 0): 1}
    assert commit.committed_state() == TaskCommittedState({"in:1": 2})
    group.close()


def test_the_task_state_travels_in_the_offset_metadata() -> None:
    state = TaskCommittedState({"t:0": 7}, 99, {"p:1": 5}, {"t:0": 98})
    text = encode_metadata(state)
    assert decode_state({("t", 0): (7, text)}, "task 0_0") == state
    assert decode_state({}, "task 0_0") is None
    with pytest.raises(StreamtideError, match="not a task state written by Streamtide"):
        decode_state({("t", 0): (7, "{oops")}, "task 0_0")
    many = TaskCommittedState(schedules={f"schedule-{i}": i for i in range(400)})
    with pytest.raises(StreamtideError, match="offset metadata limit"):
        encode_metadata(many)


def test_repartition_records_are_read_merged_by_timestamp_keeping_each_writers_order() -> None:
    from streamtide.log.api import LogRecord
    from streamtide.log.segments import headers_to_python, to_table, with_offsets
    from streamtide.runtime.repartition_order import SOURCE_HEADER, merge_by_writer

    def rec(value: bytes, ts: int, writer: bytes, extra=()) -> LogRecord:
        return LogRecord(b"k", value, ts, (*extra, (SOURCE_HEADER, writer)))

    # task 0_1's block, then task 0_0's, as two transactions leave them in a partition
    rows = [
        rec(b"b1", 10, b"0_1"),
        rec(b"b2", 5, b"0_1", (("h", b"x"),)),  # out of order within its writer: kept after b1
        rec(b"a1", 7, b"0_0"),
        rec(b"a2", 10, b"0_0"),
    ]
    table = with_offsets(to_table(rows), 0)
    merged = merge_by_writer(table)
    assert merged.column("value").to_pylist() == [b"a1", b"a2", b"b1", b"b2"]
    assert headers_to_python(merged.column("headers")) == [(), (), (), (("h", b"x"),)]
    assert merged.column("offset").to_pylist() == [2, 3, 0, 1]
