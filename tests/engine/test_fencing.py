"""One application, one batch loop: drivers are fenced by epoch, and a started app's calls
never run two batches at once."""

from __future__ import annotations

import threading
import time

import pytest

from streamtide import StreamsApp
from streamtide.engine.stage_runner import StageRunner
from streamtide.errors import FencedError
from tests.engine.scenarios import (
    engine_config,
    engine_outputs,
    expected_outputs,
    make_events,
    punctuation_topology,
    session_topology,
    write_events,
)

pytestmark = pytest.mark.spark


def test_a_second_driver_fences_the_first(spark, log_url, tmp_path) -> None:
    events = make_events(200, seed=21)
    write_events(log_url, events)
    config = engine_config(log_url, str(tmp_path / "state"))
    first = StreamsApp(session_topology(), config, spark=spark)
    first.run_batch()
    second = StreamsApp(session_topology(), config, spark=spark)
    second.run_batch()
    with pytest.raises(FencedError, match="another instance of application 'engine-test'"):
        first.run_batch()
    second.run_until_caught_up(timeout=300)
    assert engine_outputs(log_url, "session") == expected_outputs("session", events)


def test_waiting_for_a_started_app_to_catch_up_never_runs_a_second_batch_loop(
    spark, log_url, tmp_path, monkeypatch
) -> None:
    events = make_events(300, seed=22)
    write_events(log_url, events)
    config = engine_config(log_url, str(tmp_path / "state"), commit_interval=50)
    running, overlaps = [0], [0]
    lock = threading.Lock()
    execute = StageRunner.execute

    def watched(self, *args, **kwargs):
        with lock:
            running[0] += 1
            overlaps[0] = max(overlaps[0], running[0])
        try:
            time.sleep(0.3)  # widen the window in which a second loop would overlap
            return execute(self, *args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(StageRunner, "execute", watched)
    app = StreamsApp(punctuation_topology(), config, spark=spark).start()
    try:
        progress = app.run_until_caught_up(timeout=300)
        assert progress and not app.input_waiting()
        app.run_batch()  # also safe on a started app: it runs between the loop's batches
    finally:
        app.stop()
    assert overlaps[0] == 1
    assert engine_outputs(log_url, "punctuation") == expected_outputs("punctuation", events)
