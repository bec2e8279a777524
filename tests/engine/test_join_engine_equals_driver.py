"""A stream-table and a table-table join on the engine (4 partitions, a driver restart in
the middle, on executors without local state) give exactly the test driver's output; the
tables' stores are restored from their source topics."""

from __future__ import annotations

import shutil

import pytest

from streamtide import StreamsApp
from streamtide.log import open_log
from tests.engine.scenarios import JSON, STRING, engine_config
from tests.engine.table_scenarios import (
    JOIN_SCENARIOS,
    PARTITIONS,
    expected_join_outputs,
    make_table_events,
    write_table_events,
)

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("name", sorted(JOIN_SCENARIOS))
def test_join_on_the_engine_equals_the_driver_across_a_restart(spark, log_url, tmp_path, name):
    topology_fn, topics = JOIN_SCENARIOS[name]
    events = make_table_events(400, topics, seed=len(name))
    first, second = events[:200], events[200:]
    config = engine_config(
        log_url, str(tmp_path / "state"), app=f"join-{name}", max_records_per_batch=12
    )
    write_table_events(log_url, first, topics)
    first_app = StreamsApp(topology_fn(), config, spark=spark)
    progress = first_app.run_until_caught_up(timeout=300)
    assert len(progress) >= 2, "the first half must span several batches"
    first_app.stop()
    shutil.rmtree(tmp_path / "state")  # the restarted driver's executors have no local state
    write_table_events(log_url, second, topics)
    again = StreamsApp(topology_fn(), config, spark=spark)
    progress = again.run_until_caught_up(timeout=300)
    assert progress[0].batch > 0
    assert sum(p.input_records for p in progress) == len(second)
    assert sum(p.restored_records for p in progress) > 0, "stores restore from the source topics"
    again.stop()

    log = open_log(log_url)
    try:
        assert not any(t.endswith("-changelog") for t in log.list_topics())
        actual = {
            p: [
                (STRING.deserialize(r.key), JSON.deserialize(r.value), r.timestamp)
                for r in log.read("out", p)
            ]
            for p in range(PARTITIONS)
        }
    finally:
        log.close()
    expected = expected_join_outputs(name, events)
    assert sum(len(v) for v in expected.values()) > 50
    assert actual == expected
