"""``TaskHost.query``: a store query answered from a task's committed state only, whether the
task is held open between batches (continuous execution) or opened for the query (micro-batch
execution), for key-value, window and session stores; checked against the test driver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamtide import (
    Consumed,
    Materialized,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    StreamsConfig,
    TimeWindows,
    Topology,
)
from streamtide.errors import StoreError
from streamtide.log import LogRecord, SegmentRef, open_log
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.store_query import QueryOp, StoreQuery, decode_bytes, encode_bytes
from streamtide.runtime.task_host import TaskHost
from streamtide.testing import TopologyTestDriver

STRING, LONG = Serdes.string(), Serdes.long()
MINUTE = 60_000


def _topology() -> Topology:
    builder = StreamsBuilder()
    clicks = builder.stream("in", Consumed.with_(STRING, STRING))
    grouped = clicks.group_by_key()
    grouped.count(Materialized.as_("counts"))
    grouped.windowed_by(TimeWindows.of_size(MINUTE)).count(Materialized.as_("per-minute"))
    grouped.windowed_by(SessionWindows.with_inactivity_gap(10_000)).count(
        Materialized.as_("sessions")
    )
    clicks.deduplicate_by_key(5_000).to("unique")
    return builder.build()


#: (key, timestamp) of the input, in two batches
BATCHES = [
    [("a", 1_000), ("b", 2_000), ("a", 3_000), ("c", 61_000)],
    [("a", 62_000), ("b", 63_000), ("a", 65_000), ("a", 200_000)],
]


class _Task:
    """Task ``0_0`` of the topology over a file log, run batch by batch as the engine does."""

    def __init__(self, root: Path) -> None:
        self.log = open_log(f"file://{root / 'log'}")
        for topic in ("in", "unique"):
            self.log.create_topic(topic, 1)
        self.config = StreamsConfig(
            application_id="q",
            log=self.log.url,
            state_dir=str(root / "state"),
            default_key_serde=STRING,
            default_value_serde=STRING,
        )
        self.topology = _topology()
        self.state: dict[str, Any] = {}
        self.offset = 0

    def host(self, keep_open: bool) -> TaskHost:
        state_dir = Path(self.config.state_dir) / "client-c"
        return TaskHost(
            self.topology, self.config, self.log, make_task_stores, state_dir, keep_open=keep_open
        )

    def run(self, host: TaskHost, batch: int, seal: bool = True) -> dict[str, Any]:
        """Run one batch; with ``seal`` its outputs and changelogs are sealed (the driver
        committed it), but ``host`` is not told."""
        records = [LogRecord(STRING.serialize(k), b"x", ts) for k, ts in BATCHES[batch]]
        self.log.append("in", 0, records)
        end = self.offset + len(records)
        writer = f"q/b{batch}/0_0/attempt"
        report = host.run_active("0_0", {"in": [self.offset, end]}, self.state, writer, batch)
        host.write_outputs(f"q/b{batch}/unit/attempt")  # what the work unit does after its runs
        for data in report["segments"] if seal else ():
            ref = SegmentRef.from_dict(data)
            self.log.seal(ref.topic, ref.partition, ref, seal_id=f"q/{batch}/{ref.name}")
        if seal:
            self.state, self.offset = report["state"], end
        return report

    def ask(self, host: TaskHost, store: str, op: QueryOp, *args: Any) -> Any:
        query = StoreQuery(store, op, list(args), {"0_0": self.state})
        return host.query(query)["0_0"]


def _driver_after(batches: int) -> TopologyTestDriver:
    driver = TopologyTestDriver(_topology(), initial_wall_clock_ms=0)
    topic = driver.create_input_topic("in", STRING, STRING)
    for batch in BATCHES[:batches]:
        for key, ts in batch:
            topic.pipe_input(key, "x", timestamp=ts)
    return driver


def _counts(answer: list[list[str]]) -> dict[str, int]:
    return {
        STRING.deserialize(decode_bytes(k)): LONG.deserialize(decode_bytes(v)) for k, v in answer
    }


def _key(key: str) -> str:
    return encode_bytes(STRING.serialize(key))  # type: ignore[return-value]


def test_a_held_task_answers_with_committed_data_only(tmp_path: Path) -> None:
    task = _Task(tmp_path)
    host = task.host(keep_open=True)
    try:
        first = task.run(host, 0)
        host.settle({"0_0": first["writer"]})
        committed = _counts(task.ask(host, "counts", QueryOp.ALL))
        assert committed == dict(_driver_after(1).get_key_value_store("counts").all())

        unsealed = task.run(host, 1, seal=False)  # ran, its attempt not committed
        assert _counts(task.ask(host, "counts", QueryOp.ALL)) == committed
        host.settle({"0_0": "q/b1/0_0/another-attempt"})  # another attempt won: dropped
        assert unsealed["writer"] != "q/b1/0_0/another-attempt"

        second = task.run(host, 1)  # ran again and committed
        host.settle({"0_0": second["writer"]})
        latest = _counts(task.ask(host, "counts", QueryOp.ALL))
        assert latest == dict(_driver_after(2).get_key_value_store("counts").all())
        assert latest != committed
        assert "0_0" in host.held  # answered from the open task
    finally:
        host.close()


def test_a_task_opened_for_the_query_answers_the_same(tmp_path: Path) -> None:
    task = _Task(tmp_path)
    for batch in range(2):  # micro-batch execution: every run opens and closes the task
        task.run(task.host(keep_open=False), batch)
    host = task.host(keep_open=False)
    driver = _driver_after(2)
    counts = driver.get_key_value_store("counts")
    assert _counts(task.ask(host, "counts", QueryOp.ALL)) == dict(counts.all())
    assert LONG.deserialize(decode_bytes(task.ask(host, "counts", QueryOp.GET, _key("a")))) == 5
    assert task.ask(host, "counts", QueryOp.GET, _key("zz")) is None
    ranged = task.ask(host, "counts", QueryOp.RANGE, _key("b"), _key("c"))
    assert _counts(ranged) == {"b": 2, "c": 1}
    # RocksDB's estimate: 3 keys, written 5 times; overwrites count until compaction
    assert 3 <= task.ask(host, "counts", QueryOp.COUNT) <= 5

    windows = driver.get_window_store("per-minute")
    fetched = task.ask(host, "per-minute", QueryOp.FETCH, _key("a"), 0, 10 * MINUTE)
    expected = [(w.window.start, n) for w, n in windows.fetch("a", 0, 10 * MINUTE)]
    assert expected == [(0, 2), (MINUTE, 2), (3 * MINUTE, 1)]
    assert [(s, LONG.deserialize(decode_bytes(v))) for s, v in fetched] == expected

    sessions = driver.get_session_store("sessions")
    fetched = task.ask(host, "sessions", QueryOp.FETCH, _key("a"))
    expected = [(w.window.start, w.window.end, n) for w, n in sessions.fetch("a")]
    assert expected == [(1_000, 3_000, 2), (62_000, 65_000, 2), (200_000, 200_000, 1)]
    assert [(s, e, LONG.deserialize(decode_bytes(v))) for s, e, v in fetched] == expected
    assert host.held == set()  # opened, read and closed


def test_queries_refuse_stores_that_cannot_be_queried(tmp_path: Path) -> None:
    task = _Task(tmp_path)
    task.run(task.host(keep_open=False), 0)
    host = task.host(keep_open=False)
    dedup = next(n for n in task.topology.store_builders if "DEDUP" in n.upper())
    with pytest.raises(StoreError, match="cannot be queried"):
        task.ask(host, dedup, QueryOp.ALL)
    with pytest.raises(StoreError, match="does not answer 'fetch'"):
        task.ask(host, "counts", QueryOp.FETCH, _key("a"))
