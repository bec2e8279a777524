"""StandbyTask: the offset limit, catching up, and handing over to an active."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from durable_support import APP, file_log, open_task, store_topology

from streamtide.errors import StoreError
from streamtide.log import LogRecord
from streamtide.runtime.standby import StandbyTask
from streamtide.serde import Serdes
from streamtide.state import Stores

CHANGELOG = f"{APP}-kv-changelog"
INT = Serdes.int()


def _topology():  # type: ignore[no-untyped-def]
    builder = Stores.key_value_store_builder(
        Stores.persistent_key_value_store("kv"), Serdes.string(), Serdes.int()
    )
    unlogged = Stores.key_value_store_builder(
        Stores.persistent_key_value_store("scratch"), Serdes.string(), Serdes.int()
    ).with_logging_disabled()
    return store_topology(builder, unlogged)


def _standby(log, state_dir: Path) -> StandbyTask:  # type: ignore[no-untyped-def]
    return StandbyTask(
        _topology(), 0, 0, log, application_id=APP, state_dir=state_dir, fsync=False
    ).initialize()


def _records(log) -> list[LogRecord]:  # type: ignore[no-untyped-def]
    return list(log.read(CHANGELOG, 0))


def _fill(log, count: int, start: int = 0) -> None:  # type: ignore[no-untyped-def]
    if not log.has_topic(CHANGELOG):
        log.create_topic(CHANGELOG, 1)
    log.append(
        CHANGELOG,
        0,
        [LogRecord(b"k%d" % (i % 3), INT.serialize(i), 0) for i in range(start, start + count)],
    )


def test_records_at_or_beyond_the_limit_wait_for_a_later_commit(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    _fill(log, 10)
    standby = _standby(log, tmp_path / "state")
    assert standby.offset_limits == {"kv": 0}  # only logged stores are replicated
    standby.set_offset_limit(6)
    kept = standby.update("kv", _records(log))
    assert [r.offset for r in kept] == [6, 7, 8, 9]
    assert standby.local_offsets() == {"kv": 6}
    store = standby.store("kv")
    assert dict(store.all()) == {"k0": 3, "k1": 4, "k2": 5}
    assert standby.metrics.get("records-restored") == 6
    assert standby.set_offset_limit(10) == 4
    assert dict(store.all()) == {"k0": 9, "k1": 7, "k2": 8}
    assert standby.update("kv", _records(log)) == []  # already applied: skipped
    standby.close()


def test_poll_applies_below_the_limit_and_reports_lag(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    _fill(log, 5)
    standby = _standby(log, tmp_path / "state")
    assert standby.poll() == 0  # limit still 0: everything is kept
    assert standby.metrics.get("standby-lag") == 5
    assert standby.catch_up() == 5
    assert standby.metrics.get("standby-lag") == 0
    _fill(log, 3, start=5)
    assert standby.lag() == 3
    standby.set_offset_limit(7)
    assert standby.poll() == 2
    assert standby.local_offsets() == {"kv": 7}
    assert standby.metrics.get("standby-lag") == 1
    standby.close()


def test_a_deadline_bounds_a_catch_up_to_steps_of_records(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    _fill(log, 25)
    standby = _standby(log, tmp_path / "state")
    passed = time.perf_counter()  # a deadline already passed: one step per store
    assert standby.catch_up(passed, at_least=10) == 10
    assert standby.local_offsets() == {"kv": 10}
    assert standby.metrics.get("standby-lag") == 15
    assert standby.catch_up(passed, at_least=10) == 10
    assert standby.catch_up(time.perf_counter() + 60, at_least=4) == 5  # time left: the rest
    assert standby.metrics.get("standby-lag") == 0
    assert dict(standby.store("kv").all()) == {"k0": 24, "k1": 22, "k2": 23}
    standby.close()


def test_gaps_are_refused(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    _fill(log, 5)
    standby = _standby(log, tmp_path / "state")
    with pytest.raises(StoreError, match="skip from offset 0 to 2"):
        standby.update("kv", _records(log)[2:])
    standby.close()


def test_an_active_task_taking_over_restores_only_the_lag(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    writer = open_task(log, _topology(), tmp_path / "active")
    for i in range(20):
        writer.store("kv").put(f"k{i}", i)
    writer.commit()
    standby = _standby(log, tmp_path / "standby")
    standby.catch_up()
    standby.close()
    for i in range(3):
        writer.store("kv").put(f"late{i}", i)
    writer.commit()
    writer.close()
    # the active task moves to the standby's executor
    run = open_task(log, _topology(), tmp_path / "standby")
    assert run.metrics["records-restored"] == 3
    assert dict(run.store("kv").all()) == {
        **{f"k{i}": i for i in range(20)},
        **{f"late{i}": i for i in range(3)},
    }
    run.close()


def test_a_standby_behind_a_truncated_changelog_rebuilds_from_a_snapshot(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = file_log(tmp_path / "log")
    writer = open_task(log, _topology(), tmp_path / "active", snapshot_interval=2)
    writer.store("kv").put("a", 1)
    writer.commit()
    standby = _standby(log, tmp_path / "standby")
    standby.catch_up()
    standby.close()
    for i in range(4):
        writer.store("kv").put("a", i + 2)
        writer.store("kv").put(f"b{i}", i)
        writer.commit()
    writer.close()
    assert log.begin_offset(CHANGELOG, 0) > 1
    with caplog.at_level(logging.WARNING):
        standby = _standby(log, tmp_path / "standby")
    assert "changelog was truncated" in caplog.text
    standby.catch_up()
    assert dict(standby.store("kv").all()) == {"a": 5, "b0": 0, "b1": 1, "b2": 2, "b3": 3}
    standby.close()
