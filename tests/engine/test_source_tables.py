"""Source tables and joins on the engine's batch loop, without Spark (the real committer,
work units, RocksDB stores and file log): a table's store is restored from its source topic
up to the committed input offset, with no changelog topic; co-partitioning is checked when
the topology is planned."""

from __future__ import annotations

import shutil

import pytest

from streamtide import Consumed, Materialized, Produced, StreamsBuilder, Topology, TopologyError
from streamtide.engine.plan import make_plan
from streamtide.log import LogRecord, open_log
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.work_unit import ActiveSpec, WorkUnitSpec, run_work_unit
from tests.engine.local_driver import LocalDriver
from tests.engine.scenarios import INT, STRING, engine_config


def enrich_topology() -> Topology:
    builder = StreamsBuilder()
    users = builder.table("users", Consumed.with_(STRING, STRING), Materialized.as_("users"))
    builder.stream("clicks", Consumed.with_(STRING, STRING)).left_join(
        users, lambda page, name: f"{name}:{page}"
    ).to("out", Produced.with_(STRING, STRING))
    return builder.build()


def append(log, topic: str, records: list[tuple]) -> None:
    log.append(
        topic,
        0,
        [LogRecord(STRING.serialize(k), STRING.serialize(v), ts) for k, v, ts in records],
    )


@pytest.fixture
def setup(tmp_path):
    log_url = f"file://{tmp_path / 'log'}"
    log = open_log(log_url)
    for topic in ("users", "clicks"):
        log.create_topic(topic, 1)
    config = engine_config(log_url, str(tmp_path / "state"), app="tables")
    yield log, config, tmp_path
    log.close()


def outputs(log) -> list[tuple]:
    return [
        (STRING.deserialize(r.key), STRING.deserialize(r.value), r.timestamp)
        for r in log.read("out", 0)
    ]


def test_the_table_is_restored_from_its_source_topic_between_batches(setup) -> None:
    log, config, _tmp = setup
    append(log, "users", [(f"u{i}", f"name{i}", i) for i in range(60)])
    driver = LocalDriver(enrich_topology(), config)
    driver.run_until_caught_up()
    assert not any("changelog" in t for t in log.list_topics())
    append(log, "users", [("u1", "renamed", 100), ("u2", None, 101)])
    append(log, "clicks", [("u1", "/a", 200), ("u2", "/b", 201), ("u59", "/c", 202)])
    driver.run_until_caught_up()
    assert outputs(log) == [
        ("u1", "renamed:/a", 200),
        ("u2", "None:/b", 201),
        ("u59", "name59:/c", 202),
    ]


def test_a_task_without_local_state_rebuilds_the_table_from_the_source_topic(setup) -> None:
    log, config, _tmp = setup
    append(log, "users", [(f"u{i}", f"name{i}", i) for i in range(50)])
    LocalDriver(enrich_topology(), config).run_until_caught_up()
    shutil.rmtree(config.state_dir)  # the task moves to an executor without its state
    append(log, "users", [("u7", "seven", 60)])
    append(log, "clicks", [("u3", "/x", 70), ("u7", "/y", 71)])
    LocalDriver(enrich_topology(), config).run_until_caught_up()  # a driver restart too
    assert outputs(log) == [("u3", "name3:/x", 70), ("u7", "seven:/y", 71)]


def test_records_after_the_committed_offset_are_not_restored(setup) -> None:
    """Only what the task committed is in its store: a table record it has not processed
    yet (past its committed input offset) must not be visible to an earlier click."""
    log, config, _tmp = setup
    append(log, "users", [("u1", "old", 1)])
    driver = LocalDriver(enrich_topology(), config)
    driver.run_until_caught_up()
    append(log, "clicks", [("u1", "/early", 5)])
    append(log, "users", [("u1", "new", 10)])
    driver.run_until_caught_up()
    assert outputs(log) == [("u1", "old:/early", 5)]


def test_differently_partitioned_join_topics_are_refused_when_planned(tmp_path) -> None:
    log_url = f"file://{tmp_path / 'log'}"
    log = open_log(log_url)
    log.create_topic("users", 4)
    log.create_topic("clicks", 2)
    config = engine_config(log_url, str(tmp_path / "state"), app="tables")
    with pytest.raises(TopologyError) as info:
        make_plan(enrich_topology(), config, log)
    message = str(info.value)
    assert "'clicks' has 2" in message and "'users' has 4" in message
    assert "repartition()" in message


def test_a_repartitioned_stream_gets_the_tables_partition_count(tmp_path) -> None:
    log_url = f"file://{tmp_path / 'log'}"
    log = open_log(log_url)
    log.create_topic("users", 4)
    log.create_topic("clicks", 2)
    builder = StreamsBuilder()
    users = builder.table("users", Consumed.with_(STRING, STRING))
    builder.stream("clicks", Consumed.with_(STRING, STRING)).repartition().join(
        users, lambda a, b: a
    ).to("out")
    config = engine_config(log_url, str(tmp_path / "state"), app="tables")
    stages = make_plan(builder.build(), config, log)
    assert [s.partitions for s in stages] == [2, 4]
    (topic,) = [t for t in log.list_topics() if t.endswith("-repartition")]
    assert log.partitions(topic) == 4


def test_a_standby_replicates_the_table_up_to_the_committed_input_offset(setup) -> None:
    """A standby is given the active task's committed input offsets: it replays the source
    topic up to them (never past), so the task can move to it without restoring."""
    log, config, _tmp = setup
    append(log, "users", [(f"u{i}", f"name{i}", i) for i in range(30)] + [(None, "x", 30)])
    driver = LocalDriver(enrich_topology(), config)
    driver.run_until_caught_up()
    append(log, "users", [("u1", "uncommitted", 40)])  # not processed yet
    committed = driver.states["0_0"]["offsets"]
    assert committed["users:0"] == 31

    def standby_run(offsets):
        spec = WorkUnitSpec(driver.batch, 0, "other", [], ["0_0"], {"0_0": offsets})
        report = run_work_unit(driver.topology, config, log, spec, make_task_stores)
        return report["standbys"]["0_0"]

    first = standby_run(committed)
    assert first["local_offsets"] == {"users": 31}
    assert first["restored_records"] == 30  # the record without key is not a table row
    assert standby_run(committed)["restored_records"] == 0  # already there
    active = ActiveSpec("0_0", {"users": [31, 31], "clicks": [0, 0]}, driver.states["0_0"])
    spec = WorkUnitSpec(driver.batch, 0, "other", [active])
    (task,) = run_work_unit(driver.topology, config, log, spec, make_task_stores)["tasks"]
    assert task["restored_records"] == 0  # the move restores nothing
    assert task["local_offsets"] == {"users": 31}


def test_a_regrouped_table_is_counted_through_its_repartition_topic(setup) -> None:
    """``group_by`` sends (new, old) through a real repartition topic between two stages."""
    log, config, _tmp = setup
    builder = StreamsBuilder()
    (
        builder.table("users", Consumed.with_(STRING, STRING))
        .group_by(lambda user, city: (city, user))
        .count(Materialized.as_("per-city"))
        .to_stream()
        .to("out", Produced.with_(STRING, INT))
    )
    append(log, "users", [("ann", "Oslo", 1), ("bob", "Oslo", 2), ("cid", "Rome", 3)])
    driver = LocalDriver(builder.build(), config)
    driver.run_until_caught_up()
    append(log, "users", [("ann", "Rome", 4), ("bob", None, 5), ("cid", "Rome", 6)])
    driver.run_until_caught_up()
    counts = [
        (STRING.deserialize(r.key), INT.deserialize(r.value), r.timestamp)
        for r in log.read("out", 0)
    ]
    assert counts == [
        ("Oslo", 1, 1),
        ("Oslo", 2, 2),
        ("Rome", 1, 3),
        ("Oslo", 1, 4),
        ("Rome", 2, 4),
        ("Oslo", 0, 5),
        ("Rome", 2, 6),
    ]
