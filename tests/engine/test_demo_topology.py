"""The demo's topology (dedup through a repartition, sessions after a second repartition,
a stream-time punctuator) gives the same final tables on the engine as in the test driver."""

from __future__ import annotations

from collections import Counter

import pytest

from streamtide import Serdes, StreamsApp, StreamsConfig
from streamtide.cli import demo_app
from streamtide.log import open_log
from streamtide.testing import TopologyTestDriver
from tests.engine.scenarios import log_options_for

pytestmark = pytest.mark.spark
WINDOWED = Serdes.session_windowed(Serdes.string())  # what the demo writes


def session_table(pairs) -> dict:
    table = {}
    for key, value in pairs:
        window = (key.key, key.window.start, key.window.end)
        if value is None:
            table.pop(window, None)
        else:
            table[window] = value
    return table


@pytest.mark.parametrize(
    "one_job,on_kafka,batch_size",
    [
        (True, False, 90),
        (False, False, 90),
        pytest.param(True, True, 90, marks=pytest.mark.kafka),  # repartitions merged by writer
        # a repartition partition holding more than a batch: read whole on Kafka, where a cut
        # would leave other writers' earlier records behind stream time
        pytest.param(True, True, 60, marks=pytest.mark.kafka),
    ],
    ids=["one-job-per-batch", "job-per-stage", "kafka", "kafka-capped-repartition"],
)
def test_demo_engine_equals_driver(spark, tmp_path, request, one_job, on_kafka, batch_size) -> None:
    # 60 a batch: all of 12 users' clicks in the first batch; then more than 60 records of
    # some repartition partition, in one block per writer
    events = (
        demo_app.generate_clicks(users=12, seed=7)
        if batch_size == 60
        else demo_app.generate_clicks(users=25, seed=11)
    )
    url = request.getfixturevalue("kafka_url") if on_kafka else f"file://{tmp_path / 'log'}"
    options = log_options_for(url)
    log = open_log(url, **options)
    demo_app.write_clicks(log, events)
    config = StreamsConfig(
        # one per test: a consumer group's offsets outlive the broker's topics
        application_id=f"clickstats-{request.node.callspec.id}",
        log=url,
        log_options=options,
        state_dir=str(tmp_path / "state"),
        max_records_per_batch=batch_size,
        cache_enabled=True,
        stages_in_one_job=one_job,
        adaptive_batch_size=False,
    )
    app = StreamsApp(demo_app.build_topology(), config, spark=spark)
    progress = app.run_until_caught_up(timeout=300)
    assert len(progress) >= 2
    engine = session_table(
        (WINDOWED.deserialize(r.key), Serdes.int().deserialize(r.value))
        for p in range(log.partitions(demo_app.SESSIONS))
        for r in log.read(demo_app.SESSIONS, p)
    )
    with TopologyTestDriver(demo_app.build_topology(), StreamsConfig(application_id="d")) as d:
        inp = d.create_input_topic(demo_app.CLICKS, Serdes.string(), Serdes.json())
        for user, event in events:
            inp.pipe_input(user, event, timestamp=event["ts"])
        out = d.create_output_topic(demo_app.SESSIONS, WINDOWED, Serdes.int())
        expected = session_table(out.read_key_values())
    assert engine == expected
    assert sum(engine.values()) == len({e["event_id"] for _, e in events})
    summaries = Counter()
    for p in range(log.partitions(demo_app.SUMMARY)):
        for r in log.read(demo_app.SUMMARY, p):
            summaries.update(Serdes.json().deserialize(r.value))
    assert 0 < sum(summaries.values()) <= sum(engine.values())
