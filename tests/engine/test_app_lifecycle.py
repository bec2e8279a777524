"""StreamsApp in the background, status, Spark interop and the run/status commands."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from streamtide import StreamsApp
from streamtide.cli import main
from streamtide.engine.app import read_status
from streamtide.errors import ConfigError
from streamtide.log import open_log
from streamtide.spark import read_topic
from tests.engine.scenarios import (
    engine_config,
    engine_outputs,
    expected_outputs,
    make_events,
    session_topology,
    write_events,
)

pytestmark = pytest.mark.spark


def test_started_app_processes_input_as_it_arrives_and_stops(spark, log_url, tmp_path) -> None:
    events = make_events(120, seed=8)
    write_events(log_url, events[:60])
    config = engine_config(log_url, str(tmp_path / "state"), commit_interval=200)
    app = StreamsApp(session_topology(), config, spark=spark).start()
    try:
        deadline = time.monotonic() + 120
        while (app.last_progress is None or app.input_waiting()) and time.monotonic() < deadline:
            time.sleep(0.2)
        write_events(log_url, events[60:])
        while time.monotonic() < deadline:
            if (
                app.last_progress
                and not app.input_waiting()
                and engine_outputs(log_url, "session") == expected_outputs("session", events)
            ):
                break
            time.sleep(0.2)
        assert app.await_termination(timeout=0.1) is False  # still running
    finally:
        app.stop()
    assert engine_outputs(log_url, "session") == expected_outputs("session", events)
    assert spark.sparkContext._jsc is not None  # a session it was given is never stopped
    status = app.status()
    assert set(status["tasks"]) == {"0_0", "0_1"}
    assert all(row["lag"] == 0 and row["owner"] == "driver" for row in status["tasks"].values())


def test_read_topic_gives_a_dataframe_of_committed_records(spark, log_url, tmp_path) -> None:
    events = make_events(50, seed=6)
    write_events(log_url, events)
    frame = read_topic(spark, log_url, "events")
    assert frame.columns == ["key", "value", "topic", "partition", "offset", "timestamp"]
    assert frame.count() == len(events)
    assert sorted(r.key.decode() for r in frame.select("key").collect()) == sorted(
        u for u, _, _ in events
    )


def test_run_and_status_commands(spark, log_url, tmp_path, monkeypatch) -> None:
    events = make_events(80, seed=12)
    write_events(log_url, events)
    module = tmp_path / "user_topology.py"
    module.write_text(
        "from tests.engine.scenarios import session_topology\n"
        "def topology():\n    return session_topology()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = tmp_path / "app.toml"
    settings.write_text(
        f'application_id = "cli-app"\nlog = "{log_url}"\nstate_dir = "{tmp_path / "state"}"\n'
        'max_records_per_batch = 1000\ndefault_key_serde = "string"\n'
    )
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "run",
            "user_topology:topology",
            "--config",
            str(settings),
            "--max-records-per-batch",  # the flag wins over the file
            "20",
            "--no-adaptive-batch-size",  # keep the cap at 20
            "--until-caught-up",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    batches = [line for line in result.output.splitlines() if line.startswith("batch ")]
    # at most 20 per partition and batch (with the file's 1000, one batch would take all 80)
    assert len(batches) >= 2
    assert all(int(line.split()[2]) <= 40 for line in batches)
    assert spark.sparkContext._jsc is not None  # the shared session survived
    status = runner.invoke(main, ["status", "--application-id", "cli-app", "--log", log_url])
    assert status.exit_code == 0, status.output
    assert "0_0" in status.output and "0_1" in status.output
    assert "caught-up" in status.output and "Z" in status.output  # ISO times
    as_json = runner.invoke(
        main,
        ["status", "--application-id", "cli-app", "--log", log_url, "--history", "2", "--json"],
    )
    assert as_json.exit_code == 0, as_json.output
    info = __import__("json").loads(as_json.stdout)
    assert [b["batch"] for b in info["batches"]] == [info["last_batch"] - 1, info["last_batch"]]
    assert info["committed_at_iso"].endswith("Z")
    assert {(p["topic"], p["partition"], p["lag"]) for p in info["partitions"]} == {
        ("events", 0, 0),
        ("events", 1, 0),
    }
    assert sum(p["committed"] for p in info["partitions"]) == len(events)
    write_events(log_url, events[:5])  # lag is current: it shows input that arrived since
    info = read_status(engine_config(log_url, str(tmp_path), app="cli-app"), history=50)
    assert sum(p["lag"] for p in info["partitions"]) == 5
    assert len(info["batches"]) == info["last_batch"] + 1
    assert sum(b["input_records"] for b in info["batches"]) == len(events)
    log = open_log(log_url)
    assert sum(log.end_offset("out", p) for p in range(2)) > 0


def test_the_running_batch_is_visible_while_it_runs(spark, log_url, tmp_path) -> None:
    events = make_events(200, seed=3)
    write_events(log_url, events)
    config = engine_config(log_url, str(tmp_path / "state"), max_records_per_batch=10_000)
    app = StreamsApp(session_topology(), config, spark=spark)
    seen = []
    watching = __import__("threading").Event()

    def watch() -> None:
        while not watching.is_set():
            running = app.running
            if running is not None:
                seen.append((running.batch, running.planned_records, running.stages_done))
            time.sleep(0.005)

    thread = __import__("threading").Thread(target=watch)
    thread.start()
    try:
        app.run_until_caught_up(timeout=120)
    finally:
        watching.set()
        thread.join()
        app.stop()
    assert app.running is None
    assert (0, len(events), 0) in seen  # planned before the stage committed


def test_run_reports_a_bad_target_clearly(tmp_path) -> None:
    result = CliRunner().invoke(
        main,
        ["run", "no_such_module:topology", "--application-id", "x", "--log", f"file://{tmp_path}"],
    )
    assert result.exit_code == 1
    assert "cannot import module 'no_such_module'" in result.output


def test_spark_connect_sessions_are_rejected() -> None:
    from streamtide.engine.interop import spark_context
    from streamtide.errors import ConfigError

    class ConnectLike:
        pass

    with pytest.raises(ConfigError, match="Spark Connect"):
        spark_context(ConnectLike())


def test_wall_clock_punctuators_fire_in_every_batch_without_input(spark, log_url, tmp_path) -> None:
    from tests.engine.scenarios import wall_clock_topology

    write_events(log_url, [])  # the topic exists but stays empty
    app = StreamsApp(
        wall_clock_topology(), engine_config(log_url, str(tmp_path / "s")), spark=spark
    )
    first = app.run_batch()  # schedules start at now + 1 ms: the first batch may be too quick
    later = [app.run_batch() for _ in range(3)]
    assert first.input_records == 0 and all(p.input_records == 0 for p in later)
    assert [p.output_records for p in later] == [2, 2, 2]  # one tick per task per batch
    log = open_log(log_url)
    ticks = [r for p in range(log.partitions("ticks")) for r in log.read("ticks", p)]
    assert {r.key for r in ticks} == {b"0_0", b"0_1"}


def test_the_session_the_app_builds_gets_the_configured_locality_wait(tmp_path, monkeypatch):
    import pyspark.sql

    import streamtide.engine.app as app_module

    seen = {}

    def fake_build(master, name, **conf):
        seen.update(master=master, **conf)
        return "session"

    monkeypatch.setattr(pyspark.sql.SparkSession, "getActiveSession", staticmethod(lambda: None))
    monkeypatch.setattr(app_module, "build_session", fake_build)
    config = engine_config(f"file://{tmp_path}", str(tmp_path / "s"), locality_wait=12_000)
    app = StreamsApp(session_topology(), config, master="local[3]")
    assert app.spark == "session"
    assert seen == {"master": "local[3]", "spark.locality.wait": "12000ms"}
    assert app._owns_spark


def test_scale_refuses_local_mode_and_bad_counts(spark, log_url, tmp_path) -> None:
    write_events(log_url, make_events(10, seed=3))
    app = StreamsApp(session_topology(), engine_config(log_url, str(tmp_path)), spark=spark)
    with pytest.raises(ConfigError, match="executors must be an int >= 1"):
        app.scale(0)
    with pytest.raises(ConfigError, match="local mode runs every task in the driver"):
        app.scale(2)


@pytest.mark.slow
def test_a_stopped_session_is_reported_as_stopped(tmp_path) -> None:
    """Its own Spark (stopping a session stops the suite's shared one): the app is handed a
    session that was stopped, and says so."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    script = textwrap.dedent(
        f"""
        from streamtide import StreamsApp
        from streamtide.engine.interop import build_session
        from streamtide.errors import ConfigError
        from tests.engine.scenarios import engine_config, session_topology

        spark = build_session("local[1]", "stopped-session-test")
        spark.stop()
        config = engine_config("file://{tmp_path}/log", "{tmp_path}/state")
        try:
            StreamsApp(session_topology(), config, spark=spark).run_batch()
        except ConfigError as exc:
            print("ERROR:", exc)
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=root
    )
    error = next((line for line in done.stdout.splitlines() if line.startswith("ERROR:")), "")
    assert "SparkSession handed to Streamtide is stopped" in error, done.stdout + done.stderr
    assert "Spark Connect" not in error
