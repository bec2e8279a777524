"""A live progress line for ``streamtide run`` while a batch runs longer than a few seconds.

It shows only what the driver knows: the running batch's planned input, the stages it has
committed, the changelog records its tasks may have to restore, and the records and rate of
the batches committed since the command started. (A stage's records and restores count as
done when the stage commits; the driver learns nothing in between.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from streamtide.engine.progress import BatchProgress, RunningBatch

#: A batch shorter than this shows no line, so normal operation stays quiet.
SHOW_AFTER_S = 3.0


def progress_line(
    running: RunningBatch | None,
    committed: Iterable[BatchProgress],
    elapsed_s: float,
    now: float,
) -> str:
    """The line for a batch running since ``running.started`` (monotonic ``now``); empty if
    no batch has been running for ``SHOW_AFTER_S``. ``committed``: batches committed since
    the command started ``elapsed_s`` seconds ago."""
    if running is None or now - running.started < SHOW_AFTER_S:
        return ""
    done = list(committed)
    records = sum(b.input_records for b in done) + running.records_done
    rate = records / elapsed_s if elapsed_s > 0 else 0.0
    batch = (
        f"batch {running.batch} running {now - running.started:.0f} s: "
        f"stage {min(running.stages_done + 1, running.stages)} of {running.stages}, "
        f"{running.records_done:,} of {running.planned_records:,} records planned so far done"
    )
    if running.restore_planned:
        batch += (
            f", {running.restored_done:,} of up to {running.restore_planned:,} changelog "
            "records restored"
        )
    run = f"this run: {records:,} records, {rate:,.0f} records/s"
    if done:
        run += f", lag {done[-1].total_lag:,} after batch {done[-1].batch}"
    return f"{batch} | {run}"


@contextmanager
def live_progress(app: Any, enabled: bool, interval_s: float = 0.25) -> Iterator[None]:
    """While the body runs, show ``progress_line`` for ``app`` on stderr (when enabled)."""
    if not enabled:
        yield
        return
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    started = time.monotonic()
    first = app.last_progress.batch + 1 if app.last_progress is not None else 0
    stop = threading.Event()

    def render() -> Text:
        committed = [b for b in list(app.history) if b.batch >= first]
        line = progress_line(app.running, committed, time.monotonic() - started, time.monotonic())
        return Text(line, style="cyan")

    with Live(render(), console=Console(stderr=True), transient=True, auto_refresh=False) as live:

        def watch() -> None:
            while not stop.wait(interval_s):
                live.update(render(), refresh=True)

        thread = threading.Thread(target=watch, name="streamtide-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
