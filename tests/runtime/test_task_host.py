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
    def __init__(self, tmp_path: Path) -> None:
        self.log = file_log(tmp_path / "log")
        self.log.create_topic("in", 1)
        self.log.create_topic("counts-out", 1)
        self.config = StreamsConfig(
            application_id="app", log=self.log.url, state_dir=str(tmp_path / "state")
        )
        self.topology = _topology()
        self.host = TaskHost(
            self.topology,
            self.config,
            self.log,
            make_task_stores,
            client_state_dir(self.config, "c1"),
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
