"""``make_task_stores`` inside the engine's work unit: deferred commits, own-batch restore at
the next batch, and standby slots (sealing done here, as the driver would)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from durable_support import file_log

from streamtide import Processor, Serdes, StreamsConfig, Topology
from streamtide.log import LogRecord, SegmentRef
from streamtide.record import Record
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.work_unit import ActiveSpec, WorkUnitSpec, run_work_unit
from streamtide.state import Stores

CHANGELOG = "app-counts-changelog"


class _Count(Processor):
    def init(self, context):  # type: ignore[no-untyped-def]
        super().init(context)
        self.store = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        self.store.put(record.key, (self.store.get(record.key) or 0) + 1)


def _topology() -> Topology:
    topology = Topology()
    topology.add_source("src", "in", key_serde=Serdes.string(), value_serde=Serdes.string())
    topology.add_processor("count", _Count, "src")
    builder = Stores.key_value_store_builder(
        Stores.persistent_key_value_store("counts"), Serdes.string(), Serdes.int()
    )
    topology.add_state_store(builder, "count")
    return topology


def _seal(log, report: dict[str, Any], batch: int) -> None:  # type: ignore[no-untyped-def]
    for task in report["tasks"]:
        for data in task["segments"]:
            ref = SegmentRef.from_dict(data)
            log.seal(ref.topic, ref.partition, ref, seal_id=f"batch-{batch}/{task['task']}")


def test_work_units_restore_their_own_batch_and_update_standbys(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    log.create_topic("in", 2)
    log.append("in", 1, [LogRecord(k.encode(), b"x", i) for i, k in enumerate("abcabca")])
    config = StreamsConfig(application_id="app", log=log.url, state_dir=str(tmp_path / "state"))
    topology = _topology()
    state: dict[str, Any] = {}
    reports = []
    for batch, (start, end) in enumerate([(0, 4), (4, 7)]):
        spec = WorkUnitSpec(batch, 0, "c1", [ActiveSpec("0_1", {"in": [start, end]}, state)])
        report = run_work_unit(topology, config, log, spec, make_task_stores)
        _seal(log, report, batch)
        state = report["tasks"][0]["state"]
        reports.append(report["tasks"][0])
    assert reports[0]["restored_records"] == 0
    assert reports[1]["restored_records"] == 3  # batch 0's changelog: a, b, c
    assert log.partitions(CHANGELOG) == 2
    replayed: dict[bytes, int] = {}
    for record in log.read(CHANGELOG, 1):
        replayed[record.key] = Serdes.int().deserialize(record.value)  # type: ignore[index]
    assert replayed == {b"a": 3, b"b": 2, b"c": 2}

    standby = WorkUnitSpec(2, 0, "c2", [], ["0_1"])
    first = run_work_unit(topology, config, log, standby, make_task_stores)["standbys"]["0_1"]
    assert first["local_offsets"] == {"counts": log.end_offset(CHANGELOG, 1)}
    assert first["lag"] == 0 and first["applied"] == 6
    again = run_work_unit(topology, config, log, standby, make_task_stores)["standbys"]["0_1"]
    assert again["applied"] == 0 and again["offset_sum"] == 6
