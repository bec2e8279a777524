"""The live progress line of ``streamtide run`` (``cli/live.py``)."""

from __future__ import annotations

from streamtide.cli.live import SHOW_AFTER_S, progress_line
from streamtide.engine.progress import BatchProgress, RunningBatch


def test_quiet_for_short_batches_and_between_batches() -> None:
    running = RunningBatch(batch=3, started=100.0, stages=2)
    assert progress_line(None, [], 10.0, 200.0) == ""
    assert progress_line(running, [], 10.0, 100.0 + SHOW_AFTER_S - 0.1) == ""


def test_long_batch_shows_planned_done_restores_and_rate() -> None:
    running = RunningBatch(batch=7, started=100.0, stages=2, stages_done=1)
    running.planned_records, running.records_done = 250_000, 100_000
    committed = [
        BatchProgress(5, input_records=200_000, lag={"0_0": 900_000}),
        BatchProgress(6, input_records=200_000, restored_records=42, lag={"0_0": 700_000}),
    ]
    line = progress_line(running, committed, elapsed_s=20.0, now=105.0)
    assert line == (
        "batch 7 running 5 s: stage 2 of 2, 100,000 of 250,000 records planned so far done"
        " | this run: 500,000 records, 25,000 records/s, lag 700,000 after batch 6"
    )
    running.restore_planned, running.restored_done = 5_000, 1_200
    assert ", 1,200 of up to 5,000 changelog records restored | this run:" in progress_line(
        running, committed, elapsed_s=20.0, now=105.0
    )
