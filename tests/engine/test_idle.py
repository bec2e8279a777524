"""An idle application launches no Spark job and uses almost no CPU; wall-clock punctuators
still fire, each through a batch run when it is due (continuous execution: within 100 ms)."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest

from streamtide import (
    Consumed,
    Processor,
    Produced,
    PunctuationType,
    Record,
    StreamsApp,
    StreamsBuilder,
    Topology,
)
from streamtide.log import open_log
from tests.engine.scenarios import (
    INT,
    JSON,
    STRING,
    engine_config,
    make_events,
    session_topology,
    write_events,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root`` and every live descendant (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        stats[pid] = fields
        children.setdefault(int(fields[1]), []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += (int(stats[pid][11]) + int(stats[pid][12])) / ticks
        todo.extend(children.get(pid, []))
    return total


def spark_job_count(spark) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def wait_until_caught_up(app: StreamsApp, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while app.last_progress is None or app.input_waiting():
        assert time.monotonic() < deadline, "the application did not catch up"
        time.sleep(0.1)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize(
    ("execution", "most", "seconds"), [("continuous", 0.02, 30), ("micro_batch", 0.05, 15)]
)
def test_idle_application_launches_no_job_and_uses_almost_no_cpu(
    spark, log_url, tmp_path, execution, most, seconds
) -> None:
    write_events(log_url, make_events(60, seed=3))
    config = engine_config(
        log_url, str(tmp_path / "state"), commit_interval=200, execution=execution
    )
    app = StreamsApp(session_topology(), config, spark=spark).start()
    try:
        wait_until_caught_up(app)
        time.sleep(1)  # let the batch that caught up finish its bookkeeping
        batches, jobs = len(app.history), spark_job_count(spark)
        cpu_before, started = tree_cpu_seconds(os.getpid()), time.monotonic()
        time.sleep(seconds)
        cpu = tree_cpu_seconds(os.getpid()) - cpu_before
        elapsed = time.monotonic() - started
        assert len(app.history) == batches, "an idle application ran a batch"
        assert spark_job_count(spark) == jobs, "an idle application launched a Spark job"
        print(f"\nidle {execution}: {cpu / elapsed:.2%} of a core over {elapsed:.0f} s")
        assert cpu / elapsed < most, f"idle used {cpu / elapsed:.1%} of a core"
        write_events(log_url, make_events(5, seed=4))  # new input wakes it up
        deadline = time.monotonic() + 60
        while len(app.history) == batches or app.input_waiting():
            assert time.monotonic() < deadline, "new input did not wake the application"
            time.sleep(0.1)
    finally:
        app.stop()


class EverySecond(Processor):
    """Forwards one tick per wall-clock punctuation, stamped with the punctuation time."""

    def init(self, context) -> None:
        super().init(context)
        context.schedule(timedelta(seconds=1), PunctuationType.WALL_CLOCK_TIME, self.tick)

    def process(self, record: Record) -> None:
        pass

    def tick(self, timestamp: int) -> None:
        self.context.forward(Record(self.context.task_id, timestamp, timestamp))


def ticking_topology() -> Topology:
    builder = StreamsBuilder()
    builder.stream("events", Consumed.with_(STRING, JSON)).process(EverySecond).to(
        "out", Produced.with_(STRING, INT)
    )
    return builder.build()


def test_wall_clock_punctuators_fire_when_due_without_input(spark, log_url, tmp_path) -> None:
    write_events(log_url, [])  # the source topic, empty
    config = engine_config(log_url, str(tmp_path / "state"), commit_interval=5_000)
    app = StreamsApp(ticking_topology(), config, spark=spark).start()
    try:
        # far below one commit interval per tick: batches run when ticks are due
        machine_delay_ms = wake_up_delay_ms(8.0)
    finally:
        app.stop()
    log = open_log(log_url)
    try:
        records = [r for p in range(log.partitions("out")) for r in log.read("out", p)]
    finally:
        log.close()
    ticks = sorted(r.timestamp for r in records)
    by_task: dict[str, list[int]] = {}
    for record in records:
        by_task.setdefault(record.key.decode(), []).append(record.timestamp)
    per_task = len(ticks) // 2  # two tasks, one schedule each, due at different instants
    assert per_task >= 4, ticks  # a batch every commit interval (5 s) would give 2 at most
    assert len(app.history) <= len(ticks) + 2  # at most a batch per due tick (and the first)
    late = sorted(lateness_ms(by_task))
    print(f"\nwall-clock ticks: {len(ticks)}, lateness ms: {late}")
    # within 100 ms, plus what the machine itself adds: a tick passes through the driver, a
    # work unit process and back, each a wake-up on a busy machine as slow as the one measured
    assert late and late[-1] <= 100 + 3 * machine_delay_ms, (by_task, machine_delay_ms)


def wake_up_delay_ms(seconds: float, step: float = 0.02) -> float:
    """Sleep ``seconds`` in ``step`` naps and return how late the latest wake-up came (ms):
    the scheduling delay this machine adds right now, measured in the same run."""
    worst = 0.0
    end = time.monotonic() + seconds
    while (now := time.monotonic()) < end:
        time.sleep(step)
        worst = max(worst, time.monotonic() - now - step)
    return round(worst * 1000, 1)


def lateness_ms(by_task: dict[str, list[int]]) -> list[int]:
    """How late each tick fired against its task's 1-s grid (a schedule stays on the grid of
    its first due time, skipping missed seconds). The grid's phase is not known, so it is
    taken as the one that makes the latest tick least late (which can only understate
    lateness). Each task's first tick is left out: it fires in the first batch, which also
    starts the work units."""
    late = []
    for ticks in by_task.values():
        phases = [t % 1000 for t in sorted(ticks)[1:]]
        best = min(
            ([(p - base) % 1000 for p in phases] for base in phases),
            key=max,
            default=[],
        )
        late.extend(best)
    return late
