"""A stream joined with a global table on Spark: every task sees the whole table as of the
batch's start, updates between batches reach the next batch, and a restarted driver resumes
with the same table. The oracle is the test driver fed the same sequence."""

from __future__ import annotations

import pytest

from streamtide import (
    Consumed,
    Produced,
    Serdes,
    StreamsApp,
    StreamsBuilder,
    StreamsConfig,
    Topology,
)
from streamtide.log import LogRecord, open_log
from streamtide.log.partitioner import partition_for_key
from streamtide.testing import TopologyTestDriver
from tests.engine.scenarios import (
    by_user_key,
    engine_config,
    make_events,
    read_outputs,
    write_events,
)

pytestmark = pytest.mark.spark

STRING, JSON = Serdes.string(), Serdes.json()
PARTITIONS = 4


def group_of(user: str | None, value: dict) -> str:
    return f"g{value['n'] % 5}"


def global_join_topology() -> Topology:
    builder = StreamsBuilder()
    groups = builder.global_table("groups", Consumed.with_(STRING, STRING))
    events = builder.stream("events", Consumed.with_(STRING, JSON))
    events.left_join(groups, group_of, lambda event, group: [event["id"], group]).to(
        "out", Produced.with_(STRING, JSON, by_user_key)
    )
    return builder.build()


#: Phases of input: global table updates, then events. A None name deletes the group.
PHASES = [
    {"g0": "zero", "g1": "one", "g2": "two", "g3": "three"},
    {"g1": "uno", "g3": None, "g4": "four"},
    {"g0": "nil", "g3": "tres"},
]


def write_groups(log_url: str, updates: dict[str, str | None]) -> None:
    log = open_log(log_url)
    log.create_topic("groups", 2, exist_ok=True)
    for group, name in updates.items():
        key = STRING.serialize(group)
        record = LogRecord(key, STRING.serialize(name), 0)
        log.append("groups", partition_for_key(key, 2), [record])
    log.close()


def expected(chunks: list[list[tuple[str, dict, int]]]) -> dict[int, list[tuple]]:
    """The driver's output per events partition, fed updates and events phase by phase."""
    result = {}
    for partition in range(PARTITIONS):
        config = StreamsConfig(application_id="expected", default_key_serde=STRING)
        with TopologyTestDriver(global_join_topology(), config) as driver:
            groups = driver.create_input_topic("groups", STRING, STRING)
            events = driver.create_input_topic("events", STRING, JSON)
            for updates, chunk in zip(PHASES, chunks):
                for group, name in updates.items():
                    groups.pipe_input(group, name, timestamp=0)
                for user, value, ts in chunk:
                    if partition_for_key(STRING.serialize(user), PARTITIONS) == partition:
                        events.pipe_input(user, value, timestamp=ts)
            out = driver.create_output_topic("out", STRING, JSON)
            result[partition] = [(r.key, r.value, r.timestamp) for r in out.read_records()]
    return result


def test_global_table_join_on_spark_with_updates_and_a_driver_restart(
    spark, log_url, tmp_path
) -> None:
    events = make_events(240, seed=21, users=22)
    chunks = [events[:80], events[80:160], events[160:]]
    config = engine_config(
        log_url,
        str(tmp_path / "state"),
        app="global-join",
        max_records_per_batch=10,
        adaptive_batch_size=False,
    )
    app = StreamsApp(global_join_topology(), config, spark=spark)
    for updates, chunk in zip(PHASES[:2], chunks[:2]):
        write_groups(log_url, updates)
        write_events(log_url, chunk, partitions=PARTITIONS)
        assert len(app.run_until_caught_up(timeout=300)) >= 2
    app.stop()
    write_groups(log_url, PHASES[2])
    write_events(log_url, chunks[2], partitions=PARTITIONS)
    again = StreamsApp(global_join_topology(), config, spark=spark)
    progress = again.run_until_caught_up(timeout=300)
    assert progress[0].batch > 0
    again.stop()
    want = expected(chunks)
    names = {value[1] for rows in want.values() for _, value, _ in rows}
    assert {"zero", "uno", "tres", None} <= names
    assert read_outputs(log_url, STRING, JSON) == want
