"""``TaskHost`` keeps tasks open between runs; a task that changes role in the same process
(standby promoted to active, active demoted to standby) must reopen its stores, which RocksDB
lets only one open copy hold."""

from __future__ import annotations

from pathlib import Path

from streamtide import Consumed, Materialized, Serdes, StreamsBuilder, StreamsConfig
from streamtide.engine.plan import make_plan
from streamtide.log import LogRecord, open_log
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.task_host import TaskHost

STRING = Serdes.string()


def _host(tmp_path: Path) -> tuple[TaskHost, object]:
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(STRING, STRING)).group_by_key().count(
        Materialized.as_("counts")
    )
    topology = builder.build()
    config = StreamsConfig(
        application_id="host",
        log=f"file://{tmp_path / 'log'}",
        state_dir=str(tmp_path / "state"),
        default_key_serde=STRING,
        default_value_serde=STRING,
    )
    log = open_log(config.log)
    log.create_topic("in", 1)
    make_plan(topology, config, log)  # creates the changelog topic
    log.append("in", 0, [LogRecord(STRING.serialize(k), b"v", 1) for k in ("a", "b", "a")])
    host = TaskHost(topology, config, log, make_task_stores, tmp_path / "state", keep_open=True)
    return host, log


def test_a_standby_promoted_in_the_same_process_opens_as_active(tmp_path: Path) -> None:
    host, _ = _host(tmp_path)
    try:
        host.update_standby("0_0")
        report = host.run_active("0_0", {"in": [0, 3]}, {}, "w1", 0)
        assert report["input_records"] == 3
        assert host.held == {"0_0"}
    finally:
        host.close()


def test_an_active_task_demoted_in_the_same_process_opens_as_standby(tmp_path: Path) -> None:
    host, _ = _host(tmp_path)
    try:
        host.run_active("0_0", {"in": [0, 3]}, {}, "w1", 0)
        host.settle({"0_0": "w1"})  # sealed: the active copy stays open
        report = host.update_standby("0_0")
        assert report["lag"] == 0
        assert host.held == {"0_0"}
    finally:
        host.close()
