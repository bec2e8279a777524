"""Prometheus metrics of a running application, scraped over HTTP and checked against input."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamtide import (
    Consumed,
    Deduplicated,
    Materialized,
    Produced,
    Serdes,
    StreamsApp,
    StreamsBuilder,
    StreamsConfig,
    TimeWindows,
    Topology,
)
from streamtide.log import LogRecord, open_log
from streamtide.processor import drops
from streamtide.testing import TopologyTestDriver
from tests.engine.scenarios import EveryTenSeconds

pytestmark = pytest.mark.spark

STRING, INT, JSON = Serdes.string(), Serdes.int(), Serdes.json()
FAMILIES = {
    "streamtide_records_consumed",
    "streamtide_records_produced",
    "streamtide_records_lag",
    "streamtide_batch_duration_seconds",
    "streamtide_batch_driver_seconds",
    "streamtide_commit_duration_seconds",
    "streamtide_records_dropped",
    "streamtide_punctuations",
    "streamtide_state_restored_records",
    "streamtide_standby_lag_records",
    "streamtide_task_moves",
    "streamtide_dropped_duplicates",
}


def topology() -> Topology:
    """Per-key counts in 10 s tumbling windows without grace, and a stream-time punctuator."""
    from streamtide import Stores

    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.key_value_store_builder(Stores.persistent_key_value_store("seen"), STRING, INT)
    )
    clicks = builder.stream("clicks", Consumed.with_(STRING, JSON))
    (
        clicks.group_by_key()
        .windowed_by(TimeWindows.of_size(timedelta(seconds=10)).grace(timedelta(0)))
        .count(Materialized.as_("counts"))
        .to_stream()
        .to("counts-out", Produced.with_(Serdes.windowed(STRING), INT))
    )
    clicks.process(EveryTenSeconds, "seen").to("seen-out", Produced.with_(STRING, INT))
    clicks.deduplicate_by_key(timedelta(seconds=5), Deduplicated.as_("unique")).to(
        "unique-out", Produced.with_(STRING, JSON)
    )
    return builder.build()


def clicks(partition: int) -> tuple[list[tuple[str, int]], int]:
    """(key, timestamp) pairs of one partition in offset order, and how many are late."""
    on_time = [(f"user-{partition}-{i % 3}", i * 1_500) for i in range(40)]
    late = [(f"user-{partition}-0", 2_000 + partition), (f"user-{partition}-1", 5_000)]
    late = late[: partition + 1]  # partition 0 gets one late record, partition 1 two
    return on_time + late + [(f"user-{partition}-2", 61_000)], len(late)


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            samples[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    samples["__families__"] = {f.name for f in text_string_to_metric_families(text)}  # type: ignore[assignment]
    return samples


def expected_counts(records: list[tuple[str, int]]) -> dict[str, int]:
    """The test driver's task metrics (punctuations, dropped duplicates) for ``records``."""
    with TopologyTestDriver(topology(), StreamsConfig(application_id="oracle")) as driver:
        inp = driver.create_input_topic("clicks", STRING, JSON)
        for key, ts in records:
            inp.pipe_input(key, {"k": key}, timestamp=ts)
        return dict(driver.metrics())


def test_metrics_are_served_while_running_and_match_the_input(spark, log_url, tmp_path) -> None:
    log = open_log(log_url)
    log.create_topic("clicks", 2)
    inputs = {p: clicks(p) for p in range(2)}
    for p, (records, _) in inputs.items():
        log.append("clicks", p, [LogRecord(STRING.serialize(k), b"{}", ts) for k, ts in records])
    config = StreamsConfig(
        application_id="metered",
        log=log_url,
        state_dir=str(tmp_path / "state"),
        max_records_per_batch=15,
        cache_enabled=False,
        commit_interval=100,
        metrics_port=0,
    )
    app = StreamsApp(topology(), config, spark=spark).start()
    try:
        deadline = time.monotonic() + 120
        while app.metrics_url is None and time.monotonic() < deadline:
            time.sleep(0.05)
        url = app.metrics_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        first = scrape(url)  # every per-task and per-store series is there from the start
        for p in range(2):
            for reason in drops.REASONS:
                assert (
                    f'streamtide_records_dropped_total{{reason="{reason}",task="0_{p}"}}' in first
                )
            for kind in ("stream_time", "wall_clock_time"):
                assert f'streamtide_punctuations_total{{task="0_{p}",type="{kind}"}}' in first
            assert f'streamtide_dropped_duplicates_total{{task="0_{p}"}}' in first
        for store in ("counts", "seen", "unique"):
            assert first[f'streamtide_state_restored_records_total{{store="{store}"}}'] == 0
        assert "streamtide_standby_lag_records" in first["__families__"]
        assert not any(k.startswith("streamtide_standby_lag_records{") for k in first)
        while time.monotonic() < deadline:
            seen = scrape(url)
            consumed = [
                seen.get(f'streamtide_records_consumed_total{{partition="{p}",topic="clicks"}}')
                for p in range(2)
            ]
            lags = [
                seen.get(f'streamtide_records_lag{{partition="{p}",topic="clicks"}}')
                for p in range(2)
            ]
            if consumed == [len(inputs[p][0]) for p in range(2)] and lags == [0, 0]:
                break
            time.sleep(0.2)
        seen = scrape(url)  # during the run, after catching up
    finally:
        app.stop()
    assert seen["__families__"] >= FAMILIES
    for p, (records, late) in inputs.items():
        oracle = expected_counts(records)
        assert oracle["dropped-duplicates"] > 0
        assert seen[f'streamtide_records_consumed_total{{partition="{p}",topic="clicks"}}'] == len(
            records
        )
        assert seen[f'streamtide_records_lag{{partition="{p}",topic="clicks"}}'] == 0
        for reason in drops.REASONS:
            dropped = seen[f'streamtide_records_dropped_total{{reason="{reason}",task="0_{p}"}}']
            assert dropped == (late if reason == drops.LATE else 0)
        assert (
            seen[f'streamtide_punctuations_total{{task="0_{p}",type="stream_time"}}']
            == (oracle["punctuations"])
        )
        assert seen[f'streamtide_punctuations_total{{task="0_{p}",type="wall_clock_time"}}'] == 0
        assert (
            seen[f'streamtide_dropped_duplicates_total{{task="0_{p}"}}']
            == (oracle["dropped-duplicates"])
        )
    total_in = sum(len(r) for r, _ in inputs.values())
    total_late = sum(late for _, late in inputs.values())
    # without the record cache every accepted record emits one window update
    assert seen['streamtide_records_produced_total{topic="counts-out"}'] == total_in - total_late
    batches = seen["streamtide_batch_duration_seconds_count"]
    assert batches >= 3  # 43 records per partition at 15 per batch
    assert seen["streamtide_commit_duration_seconds_count"] == batches
    assert seen["streamtide_batch_driver_seconds_count"] == batches
    # the driver's own time is the batch's wall time without the wait for work units
    assert (
        seen["streamtide_batch_driver_seconds_sum"] < seen["streamtide_batch_duration_seconds_sum"]
    )
    assert seen["streamtide_task_moves_total"] == 0
    # the dict has the scraped samples (batches kept running after the scrape: compare the
    # counters that no longer change)
    metrics = app.metrics()
    scraped = {k for k in seen if k != "__families__"}
    assert set(metrics) == scraped
    for key in scraped:
        if key.startswith(("streamtide_records_", "streamtide_punctuations")):
            assert metrics[key] == seen[key], key
    with pytest.raises(urllib.error.URLError):  # stop() stops serving
        urllib.request.urlopen(url, timeout=2)


def test_restores_are_counted_per_store(spark, log_url, tmp_path) -> None:
    log = open_log(log_url)
    log.create_topic("clicks", 2)
    for p in range(2):
        records, _ = clicks(p)
        log.append("clicks", p, [LogRecord(STRING.serialize(k), b"{}", ts) for k, ts in records])
    settings = dict(application_id="restored", log=log_url, cache_enabled=False)
    first = StreamsApp(
        topology(), StreamsConfig(state_dir=str(tmp_path / "a"), **settings), spark=spark
    )
    first.run_until_caught_up(timeout=120)
    first.stop()
    changelog = {
        store: sum(log.end_offset(f"restored-{store}-changelog", p) for p in range(2))
        for store in ("counts", "seen", "unique")
    }
    log.append("clicks", 0, [LogRecord(b"late-comer", b"{}", 70_000)])
    # a new state directory: every store is rebuilt from its changelog
    second = StreamsApp(
        topology(), StreamsConfig(state_dir=str(tmp_path / "b"), **settings), spark=spark
    )
    bounds = []
    watching = threading.Event()

    def watch() -> None:  # what a progress display sees while the batch runs
        while not watching.is_set():
            running = second.running
            if running is not None:
                bounds.append((running.restore_planned, running.restored_done))
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        second.run_until_caught_up(timeout=120)
    finally:
        watching.set()
        watcher.join()
        second.stop()
    total = sum(changelog.values())
    assert (total, 0) in bounds  # the bound is known before the stage runs
    assert max(b for b, _ in bounds) == total
    metrics = second.metrics()
    for store, records in changelog.items():
        assert records > 0
        assert metrics[f'streamtide_state_restored_records_total{{store="{store}"}}'] == records
