"""``TaskHost`` with ``keep_open``: a task stays open between runs, its writes reach the store
only when the run is settled as the sealed one, and anything else rebuilds it from what was
committed (sealing done here, as the driver would)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from durable_support import file_log

from streamtide import Processor, Serdes, StreamsConfig, Topology
from streamtide.log import LogRecord, SegmentRef
from streamtide.record import Record
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.task_host import TaskHost
from streamtide.runtime.work_unit import ActiveSpec, WorkUnitSpec, client_state_dir, run_work_unit
from streamtide.state import Stores

CHANGELOG = "app-counts-changelog"


class _Count(Processor):
    def init(self, context):  # type: ignore[no-untyped-def]
        super().init(context)
        self.store = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


def _topology() -> Topology:
    topology = Topology()
    topology.add_source("src", "in", key_serde=Serdes.string(), value_serde=Serdes.string())
    topology.add_processor("count", _Count, "src")
    topology.add_sink(
        "out", "counts-out", "count", key_serde=Serdes.string(), value_serde=Serdes.int()
    )
    builder = Stores.key_value_store_builder(
        Stores.persistent_key_value_store("counts"), Serdes.string(), Serdes.int()
    )
    topology.add_state_store(builder, "count")
    return topology


class _Setup:
    def __init__(self, tmp_path: Path, partitions: int = 1) -> None:
        self.log = file_log(tmp_path / "log")
        self.log.create_topic("in", partitions)
        self.log.create_topic("counts-out", 1)
        self.config = StreamsConfig(
            application_id="app", log=self.log.url, state_dir=str(tmp_path / "state")
        )
        self.topology = _topology()
        self.host = self.host_for("c1")

    def host_for(self, client: str) -> TaskHost:
        """A host keeping its tasks open, in ``client``'s state directory."""
        return TaskHost(
            self.topology,
            self.config,
            self.log,
            make_task_stores,
            client_state_dir(self.config, client),
            keep_open=True,
        )

    def run(self, batch: int, start: int, end: int, state: dict[str, Any]) -> dict[str, Any]:
        spec = WorkUnitSpec(batch, 0, "c1", [ActiveSpec("0_0", {"in": [start, end]}, state)])
        report = run_work_unit(
            self.topology, self.config, self.log, spec, make_task_stores, host=self.host
        )
        return report["tasks"][0]

    def seal(self, task: dict[str, Any], batch: int) -> None:
        for data in task["segments"]:
            ref = SegmentRef.from_dict(data)
            self.log.seal(ref.topic, ref.partition, ref, seal_id=f"batch-{batch}/{task['task']}")

    def outputs(self) -> list[tuple[bytes | None, int]]:
        return [(r.key, int.from_bytes(r.value, "big")) for r in self.log.read("counts-out", 0)]


def test_a_kept_task_restores_nothing_and_applies_its_sealed_writes(tmp_path: Path) -> None:
    setup = _Setup(tmp_path)
    setup.log.append("in", 0, [LogRecord(k.encode(), b"x", i) for i, k in enumerate("abab")])
    first = setup.run(0, 0, 2, {})
    setup.seal(first, 0)
    setup.host.settle({"0_0": first["writer"]})
    second = setup.run(1, 2, 4, first["state"])
    setup.seal(second, 1)
    setup.host.settle({"0_0": second["writer"]})
    assert setup.host.held == {"0_0"}
    assert second["restored_records"] == 0  # the store stayed open: nothing replayed
    assert [v for _, v in setup.outputs()] == [1, 1, 2, 2]
    store = setup.host._active["0_0"].task.stores.get("counts")
    assert store.get("a") == 2 and store.get("b") == 2
    assert setup.log.end_offset(CHANGELOG, 0) == 4


def test_a_run_that_lost_is_dropped_and_the_task_rebuilt_from_the_commit(
    tmp_path: Path,
) -> None:
    setup = _Setup(tmp_path)
    setup.log.append("in", 0, [LogRecord(k.encode(), b"x", i) for i, k in enumerate("aaa")])
    first = setup.run(0, 0, 1, {})
    setup.seal(first, 0)
    setup.host.settle({"0_0": first["writer"]})
    lost = setup.run(1, 1, 3, first["state"])  # never sealed: another attempt won
    setup.host.settle({"0_0": "app/b1/s0/0_0/someone-else"})
    assert setup.host.held == set()  # closed: its writes are gone
    again = setup.run(1, 1, 3, first["state"])
    assert again["writer"] != lost["writer"]
    assert again["restored_records"] == 0  # reopened on the applied commit (a=1)
    setup.seal(again, 1)
    setup.host.settle({"0_0": again["writer"]})
    assert [v for _, v in setup.outputs()] == [1, 2, 3]


def test_an_unsettled_run_or_a_moved_on_state_rebuilds_the_task(tmp_path: Path) -> None:
    setup = _Setup(tmp_path)
    setup.log.append("in", 0, [LogRecord(b"a", b"x", i) for i in range(4)])
    first = setup.run(0, 0, 1, {})
    setup.seal(first, 0)
    # no settle (the driver died before saying): the next run starts from the commit
    retried = setup.run(1, 1, 2, first["state"])
    assert retried["restored_records"] == 1
    setup.seal(retried, 1)
    setup.host.settle({"0_0": retried["writer"]})
    # the task ran elsewhere meanwhile: the committed state is not the one held here
    elsewhere = {**retried["state"], "stream_time": retried["state"]["stream_time"] + 1}
    rebuilt = setup.run(2, 2, 3, elsewhere)
    assert rebuilt["restored_records"] == 0  # the store itself is current; the task reopened
    assert rebuilt["state"]["offsets"] == {"in:0": 3}


def test_release_closes_tasks_that_moved_away(tmp_path: Path) -> None:
    setup = _Setup(tmp_path)
    setup.log.append("in", 0, [LogRecord(b"a", b"x", 0)])
    first = setup.run(0, 0, 1, {})
    assert setup.host.release(["0_0"]) == [] and setup.host.held == {"0_0"}
    assert setup.host.release([]) == ["0_0"] and setup.host.held == set()
    setup.host.settle({"0_0": first["writer"]})  # too late: nothing is held, nothing happens
    setup.host.close()


def test_a_standby_promoted_in_the_same_process_opens_as_active(tmp_path: Path) -> None:
    setup = _Setup(tmp_path)
    setup.log.create_topic(CHANGELOG, 1)
    setup.log.append("in", 0, [LogRecord(k.encode(), b"x", i) for i, k in enumerate("aba")])
    setup.host.update_standby("0_0")  # holds the RocksDB lock of the task's store
    promoted = setup.run(0, 0, 3, {})
    assert promoted["input_records"] == 3
    assert setup.host.held == {"0_0"}
    setup.host.close()


def test_an_active_task_demoted_in_the_same_process_opens_as_standby(tmp_path: Path) -> None:
    setup = _Setup(tmp_path)
    setup.log.append("in", 0, [LogRecord(k.encode(), b"x", i) for i, k in enumerate("aba")])
    first = setup.run(0, 0, 3, {})
    setup.seal(first, 0)
    setup.host.settle({"0_0": first["writer"]})  # sealed: the active copy stays open
    report = setup.host.update_standby("0_0")
    assert report["lag"] == 0
    assert setup.host.held == {"0_0"}
    setup.host.close()


def _counts_db(stores: Any) -> Any:
    """The RocksDB handle under a task's (or standby's) ``counts`` store."""
    return stores.changelogs["counts"].local._db


def _entries(stores: Any) -> list[tuple[bytes, bytes]]:
    return list(stores.changelogs["counts"].local.all())


def _committed_entries(setup: _Setup, tmp_path: Path) -> list[tuple[bytes, bytes]]:
    """What a fresh copy built from the committed changelog holds (another client's dir)."""
    fresh = setup.host_for("fresh")
    fresh.update_standby("0_0")
    try:
        return _entries(fresh._standby["0_0"].stores)
    finally:
        fresh.close()


def _run_on(setup: _Setup, host: TaskHost, batch: int, start: int, end: int, state: Any) -> Any:
    spec = WorkUnitSpec(batch, 0, "c", [ActiveSpec("0_0", {"in": [start, end]}, state)])
    report = run_work_unit(
        setup.topology, setup.config, setup.log, spec, make_task_stores, host=host
    )
    task = report["tasks"][0]
    setup.seal(task, batch)
    host.settle({"0_0": task["writer"]})
    return task


def test_a_promoted_standby_hands_its_open_store_over_and_replays_only_its_lag(
    tmp_path: Path, rocksdb_opens: list[str]
) -> None:
    setup = _Setup(tmp_path)
    setup.log.append("in", 0, [LogRecord(k.encode(), b"x", i) for i, k in enumerate("abacb")])
    standby_host = setup.host_for("c2")
    first = _run_on(setup, setup.host, 0, 0, 3, {})  # a=2, b=1: 2 changelog records
    standby_host.update_standby("0_0")
    standby = standby_host._standby["0_0"]
    assert standby.local_offsets() == {"counts": 2}
    second = _run_on(setup, setup.host, 1, 3, 4, first["state"])  # c=1: the standby lags 1
    setup.host.release([])  # the task leaves its executor
    handle = _counts_db(standby.stores)
    opens_before = len(rocksdb_opens)

    promoted = _run_on(setup, standby_host, 2, 4, 5, second["state"])  # b=2

    assert len(rocksdb_opens) == opens_before  # no RocksDB open: the standby's database
    active = standby_host._active["0_0"].task.stores
    assert _counts_db(active) is handle
    assert promoted["restored_records"] == 1  # only what the standby had not applied
    assert standby_host.held == {"0_0"}
    assert [v for _, v in setup.outputs()] == [1, 1, 2, 1, 2]
    assert _entries(active) == _committed_entries(setup, tmp_path)
    store = active.get("counts")
    assert (store.get("a"), store.get("b"), store.get("c")) == (2, 2, 1)
    standby_host.close()


def test_a_retried_batch_reopens_its_task_on_the_open_store_holding_committed_data_only(
    tmp_path: Path, rocksdb_opens: list[str]
) -> None:
    setup = _Setup(tmp_path)
    setup.log.append("in", 0, [LogRecord(b"a", b"x", i) for i in range(3)])
    first = _run_on(setup, setup.host, 0, 0, 1, {})
    handle = _counts_db(setup.host._active["0_0"].task.stores)
    setup.run(1, 1, 3, first["state"])  # its batch failed elsewhere: never sealed nor settled
    opens_before = len(rocksdb_opens)

    retried = _run_on(setup, setup.host, 1, 1, 3, first["state"])

    assert len(rocksdb_opens) == opens_before
    active = setup.host._active["0_0"].task.stores
    assert _counts_db(active) is handle
    assert retried["restored_records"] == 0  # the unsettled writes never reached the store
    assert [v for _, v in setup.outputs()] == [1, 2, 3]
    assert active.get("counts").get("a") == 3
    assert _entries(active) == _committed_entries(setup, tmp_path)
    setup.host.close()


def test_a_demoted_active_task_hands_its_open_store_to_the_standby(
    tmp_path: Path, rocksdb_opens: list[str]
) -> None:
    setup = _Setup(tmp_path)
    setup.log.append("in", 0, [LogRecord(k.encode(), b"x", i) for i, k in enumerate("aba")])
    _run_on(setup, setup.host, 0, 0, 3, {})
    handle = _counts_db(setup.host._active["0_0"].task.stores)
    opens_before = len(rocksdb_opens)

    report = setup.host.update_standby("0_0")

    assert len(rocksdb_opens) == opens_before
    standby = setup.host._standby["0_0"].stores
    assert _counts_db(standby) is handle
    assert report["lag"] == 0 and report["restored_records"] == 0
    assert _entries(standby) == _committed_entries(setup, tmp_path)
    setup.host.close()


def test_a_run_that_opened_active_tasks_starts_no_new_replica(tmp_path: Path) -> None:
    setup = _Setup(tmp_path, partitions=2)
    setup.log.append("in", 0, [LogRecord(b"a", b"x", 0)])
    setup.log.append("in", 1, [LogRecord(b"b", b"x", 0)])
    elsewhere = setup.host_for("c2")
    spec = WorkUnitSpec(0, 0, "c2", [ActiveSpec("0_1", {"in": [0, 1]}, {})])
    other = run_work_unit(
        setup.topology, setup.config, setup.log, spec, make_task_stores, host=elsewhere
    )
    setup.seal(other["tasks"][0], 0)
    elsewhere.settle({"0_1": other["tasks"][0]["writer"]})

    def run(batch: int, start: int, end: int, state: dict[str, Any]) -> dict[str, Any]:
        spec = WorkUnitSpec(
            batch, 0, "c1", [ActiveSpec("0_0", {"in": [start, end]}, state)], ["0_1"]
        )
        report = run_work_unit(
            setup.topology, setup.config, setup.log, spec, make_task_stores, host=setup.host
        )
        setup.seal(report["tasks"][0], batch)
        setup.host.settle({"0_0": report["tasks"][0]["writer"]})
        return report

    opening = run(0, 0, 1, {})  # 0_0 opened (restored) here: the new standby waits
    assert opening["standbys"] == {} and setup.host.held == {"0_0"}
    kept = run(1, 1, 1, opening["tasks"][0]["state"])  # nothing opened: it starts
    assert kept["standbys"]["0_1"]["lag"] == 0
    assert kept["standbys"]["0_1"]["local_offsets"] == {"counts": 1}
    assert setup.host.held == {"0_0", "0_1"}
    setup.host.close()
    elsewhere.close()


def test_a_kept_task_writes_its_due_checkpoint_after_the_run_not_within_the_settle(
    tmp_path: Path, monkeypatch
) -> None:
    import streamtide.runtime.task_host as task_host
    from streamtide.state.checkpoint import read_checkpoint

    monkeypatch.setattr(task_host, "KEPT_CHECKPOINT_RECORDS", 3)
    setup = _Setup(tmp_path)
    setup.log.append("in", 0, [LogRecord(k.encode(), b"x", i) for i, k in enumerate("abcdef")])
    first = setup.run(0, 0, 4, {})  # four changelog records: a checkpoint is due once settled
    setup.seal(first, 0)
    setup.host.settle({"0_0": first["writer"]})
    stores = setup.host._active["0_0"].task.stores
    assert stores.task_dir is not None
    before = read_checkpoint(stores.task_dir)
    assert before is None or before.offsets.get("counts", 0) == 0  # the settle wrote none
    second = setup.run(1, 4, 6, first["state"])  # held, not settled: the stores hold batch 0
    assert setup.host.checkpoint_due() == 1
    written = read_checkpoint(stores.task_dir)
    assert written is not None and written.offsets == {"counts": 4}  # batch 0's, not 1's
    assert setup.host.checkpoint_due() == 0  # nothing new applied since
    setup.seal(second, 1)
    setup.host.settle({"0_0": second["writer"]})
    assert setup.host.checkpoint_due() == 0  # two records since: not due yet
    setup.host.close()
    assert read_checkpoint(stores.task_dir).offsets == {"counts": 6}  # closing writes it
