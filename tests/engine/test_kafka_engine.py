"""The engine with Kafka as the log: each task commits its outputs, changelog and input
offsets in one transaction, and what an independent read_committed consumer sees equals the
test driver's output, record for record."""

from __future__ import annotations

import json
import os
import time

import pytest
from click.testing import CliRunner

from streamtide import StreamsApp
from streamtide.cli import main
from streamtide.errors import FencedError, StreamtideError, UserCodeError
from tests.engine.scenarios import (
    SCENARIOS,
    engine_config,
    engine_outputs,
    expected_outputs,
    make_events,
    session_topology,
    write_events,
)
from tests.engine.test_exactly_once import expected_pass_through, pass_through
from tests.engine.test_failures import assert_stopped_at_first_occurrence, failing_topology
from tests.kafka_broker import BrokerUnavailable, start_broker

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def kafka_events(count: int, seed: int, **kwargs) -> list[tuple[str, dict, int]]:
    """Scenario events with timestamps Kafka stores (it has none below 1 ms)."""
    return [(u, v, ts + 1_000_000) for u, v, ts in make_events(count, seed=seed, **kwargs)]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_engine_output_equals_driver_output_on_kafka(spark, kafka_url, tmp_path, name) -> None:
    events = kafka_events(300, seed=hash(name) % 1000)
    write_events(kafka_url, events)
    topology_fn = SCENARIOS[name][0]
    # one application id per test: a consumer group's offsets outlive the test's topics
    config = engine_config(kafka_url, str(tmp_path / "state"), app=f"kafka-{name}")
    app = StreamsApp(topology_fn(), config, spark=spark)
    progress = app.run_until_caught_up(timeout=300)
    assert len(progress) >= 3, "the input must span several batches"
    assert sum(p.input_records for p in progress) == len(events)
    expected = expected_outputs(name, events)
    assert sum(len(v) for v in expected.values()) > 0
    assert engine_outputs(kafka_url, name) == expected
    app.stop()
    if name == "dedup":  # the driver's account of the batches is where status reads it
        status = app.status()
        assert status["last_batch"] == progress[-1].batch
        assert all(p["lag"] == 0 for p in status["partitions"]) and status["partitions"]


@pytest.mark.parametrize("machines", [1, 2], ids=["same-directory", "two-machines"])
def test_a_second_driver_fences_the_first_through_kafka(
    spark, kafka_url, tmp_path, machines
) -> None:
    """Two drivers of one application: sharing an application directory, or none (as on two
    machines, where only Kafka fences). The older one fails with a clear fencing error and
    every output is there exactly once."""
    events = kafka_events(200, seed=21)
    write_events(kafka_url, events)

    def config(machine: int):
        return engine_config(
            kafka_url,
            str(tmp_path / f"machine-{machine % machines}"),
            app=f"kafka-fence-{machines}",  # a group's offsets outlive the test's topics
            # two drivers with their own work units share this test's Spark cores
            execution="continuous" if machines == 1 else "micro_batch",
        )

    first = StreamsApp(session_topology(), config(0), spark=spark)
    first.run_batch()
    second = StreamsApp(session_topology(), config(1), spark=spark)
    second.run_batch()
    why = "took over" if machines == 1 else "Kafka fenced this driver's producer"
    with pytest.raises(
        FencedError, match=f"another instance of application 'kafka-fence-{machines}'.*{why}"
    ):
        first.run_batch()
    first.stop()
    second.run_until_caught_up(timeout=300)
    second.stop()
    assert engine_outputs(kafka_url, "session") == expected_outputs("session", events)


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
@pytest.mark.parametrize("how", ["log-write", "kill"])
def test_a_failed_attempt_on_kafka_is_retried_and_nothing_is_missing(
    spark, kafka_url, tmp_path, how, guarantee
) -> None:
    """A task attempt's write to Kafka fails, or its Python worker dies, mid-batch; the
    retried batch commits each task's run once (a task whose run committed before the failure
    finds it committed and commits nothing again)."""
    events = [(u, v, ts) for u, v, ts in kafka_events(150, seed=3) if "n" in v]
    events = [(u, {**v, "n": i}, ts) for i, (u, v, ts) in enumerate(events)]
    write_events(kafka_url, events)
    marker = str(tmp_path / "failed-once")
    config = engine_config(
        kafka_url,
        str(tmp_path / "state"),
        app=f"kafka-fail-{how}-{guarantee}",
        processing_guarantee=guarantee,
    )
    app = StreamsApp(pass_through(marker, at=100, how=how), config, spark=spark)
    app.run_until_caught_up(timeout=300)
    app.stop()
    assert os.path.exists(marker), "the failure was injected"
    outputs = engine_outputs(kafka_url, "dedup")
    expected = expected_pass_through(events)
    if guarantee == "exactly_once":
        assert outputs == expected
    else:  # every record is there, once or (after a failure) more often
        for partition, rows in expected.items():
            got = outputs[partition]
            assert [r for i, r in enumerate(got) if r not in got[:i]] == rows


def test_user_code_that_raises_on_kafka_stops_the_app_at_its_first_occurrence(
    spark, kafka_url, tmp_path
) -> None:
    events = [(u, {**v, "n": i}, ts) for i, (u, v, ts) in enumerate(kafka_events(60, seed=41))]
    write_events(kafka_url, events)
    seen = tmp_path / "seen"
    config = engine_config(kafka_url, str(tmp_path / "state"), app="kafka-user-code-error")
    app = StreamsApp(failing_topology(str(seen), at=30, kind="mapper"), config, spark=spark)
    with pytest.raises(UserCodeError) as info:
        app.run_until_caught_up(timeout=300)
    assert_stopped_at_first_occurrence(info.value, kafka_url, seen)


def test_a_broker_restart_during_a_run_loses_nothing(spark, tmp_path) -> None:
    """The broker stops (SIGTERM) and comes back on the same port while the application
    runs: the application retries through it or stops with a clear error, and a rerun
    finishes with every output exactly once."""
    try:
        broker = start_broker(tmp_path / "broker")
    except BrokerUnavailable as exc:
        pytest.skip(f"the Kafka test broker cannot start here: {exc}")
    try:
        events = kafka_events(300, seed=31)
        thirds = [events[:100], events[100:200], events[200:]]
        write_events(broker.url, thirds[0])
        config = engine_config(
            broker.url, str(tmp_path / "state"), app="kafka-restart", commit_interval=100
        )
        app = StreamsApp(session_topology(), config, spark=spark).start()
        app.run_until_caught_up(timeout=120)
        write_events(broker.url, thirds[1])
        time.sleep(0.3)  # a batch is likely under way
        broker.stop()
        time.sleep(7)  # longer than a record may wait for its acknowledgement
        broker = start_broker(broker.data_dir, port=broker.port)
        write_events(broker.url, thirds[2])
        try:
            app.run_until_caught_up(timeout=180)
            outcome = "retried through the restart"
        except (StreamtideError, TimeoutError) as exc:
            outcome = f"stopped: {exc}"
        app.stop()
        rerun = StreamsApp(session_topology(), config, spark=spark)
        rerun.run_until_caught_up(timeout=180)
        rerun.stop()
        assert engine_outputs(broker.url, "session") == expected_outputs("session", events), outcome
    finally:
        broker.stop()


def test_the_run_and_status_commands_work_on_kafka(spark, kafka_url, tmp_path) -> None:
    events = kafka_events(120, seed=41)
    write_events(kafka_url, events)
    common = ["--application-id", "kafka-cli", "--log", kafka_url]
    common += ["--state-dir", str(tmp_path / "state")]
    run = CliRunner().invoke(
        main,
        [
            "run",
            "tests.engine.scenarios:session_topology",
            "--until-caught-up",
            "--log-option",
            "topic.retention.ms=-1",
            *common,
        ],
    )
    assert run.exit_code == 0, (run.output[-2000:], run.exception)
    status = CliRunner().invoke(main, ["status", *common])
    assert status.exit_code == 0, status.output
    assert "kafka-cli" in status.output and "0_1" in status.output
    as_json = CliRunner().invoke(main, ["status", "--json", *common])
    info = json.loads(as_json.output)
    assert info["partitions"] and all(p["lag"] == 0 for p in info["partitions"])
    assert sum(p["committed"] for p in info["partitions"]) == len(events)
