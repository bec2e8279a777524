"""AppMetrics without Spark: aggregation of task reports, keys, the documented families."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from streamtide.engine.metrics import AppMetrics, sample_key
from streamtide.engine.protocol import UnitReport

DOCS = Path(__file__).resolve().parents[2] / "docs"


def unit(task: str, **result) -> UnitReport:
    return UnitReport.from_dict({"client": "1", "tasks": [{"task": task, **result}]})


def test_reports_of_committed_stages_add_up() -> None:
    metrics = AppMetrics()
    for _ in range(2):
        metrics.record_stage(
            {"0_1": {"clicks": [10, 25]}},
            [
                unit(
                    "0_1",
                    output_records={"out": 7, "app-counts-changelog": 9},
                    metrics={
                        "dropped-records": 3,
                        "dropped-records.late": 2,
                        "dropped-records.invalid_timestamp": 1,
                        "punctuations.wall_clock_time": 4,
                        "records-restored.counts": 5,
                    },
                ),
                UnitReport.from_dict({"client": "2", "standbys": {"0_0": {"lag": 12}}}),
            ],
            {"app-counts-changelog"},
        )
    metrics.record_batch(0.3, 0.02, {("clicks", 1): 4}, {"0_1": "1", "0_0": "2"}, driver_s=0.1)
    metrics.record_batch(0.3, 0.02, {("clicks", 1): 0}, {"0_1": "2", "0_0": "2"}, driver_s=0.2)
    got = metrics.as_dict()
    assert got['streamtide_records_consumed_total{partition="1",topic="clicks"}'] == 30
    assert got['streamtide_records_produced_total{topic="out"}'] == 14
    assert not any("changelog" in k for k in got)
    assert got['streamtide_records_dropped_total{reason="late",task="0_1"}'] == 4
    assert got['streamtide_records_dropped_total{reason="invalid_timestamp",task="0_1"}'] == 2
    assert got['streamtide_punctuations_total{task="0_1",type="wall_clock_time"}'] == 8
    assert got['streamtide_state_restored_records_total{store="counts"}'] == 10
    assert got['streamtide_standby_lag_records{task="0_0"}'] == 12
    assert got['streamtide_records_lag{partition="1",topic="clicks"}'] == 0
    assert got["streamtide_task_moves_total"] == 1
    assert got["streamtide_batch_duration_seconds_count"] == 2
    assert got['streamtide_batch_duration_seconds_bucket{le="0.5"}'] == 2
    assert got["streamtide_commit_duration_seconds_sum"] == 0.04
    assert got["streamtide_batch_driver_seconds_sum"] == pytest.approx(0.3)
    assert got['streamtide_batch_driver_seconds_bucket{le="0.1"}'] == 1


def test_two_apps_keep_separate_registries() -> None:
    a, b = AppMetrics(), AppMetrics()
    a.record_batch(1.0, 0.1, {}, {})
    assert a.as_dict()["streamtide_batch_duration_seconds_count"] == 1
    assert b.as_dict()["streamtide_batch_duration_seconds_count"] == 0


def test_sample_keys_sort_and_escape_labels() -> None:
    assert sample_key("m", {}) == "m"
    assert sample_key("m", {"topic": 'a"b', "partition": "0"}) == 'm{partition="0",topic="a\\"b"}'


def test_docs_and_dashboard_cover_exactly_the_registered_families() -> None:
    exposed = {
        f"{f.name}_total" if f.type == "counter" else f.name
        for f in AppMetrics().registry.collect()
    }
    assert len(exposed) == 12
    text = (DOCS / "metrics.md").read_text()
    documented = set(re.findall(r"^\| `(streamtide_\w+)` \|", text, re.MULTILINE))
    assert documented == exposed
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    used = {
        m
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for m in re.findall(r"streamtide_\w+", target["expr"])
    }
    assert {re.sub(r"_(bucket|sum|count)$", "", m) for m in used} == exposed


def test_a_taken_port_is_a_clear_error_and_a_served_registry_stops() -> None:
    import socket
    import urllib.error
    import urllib.request

    from streamtide.engine.metrics import MetricsServer
    from streamtide.errors import ConfigError

    metrics = AppMetrics()
    server = MetricsServer(metrics.registry, 0)
    try:
        with urllib.request.urlopen(server.url, timeout=5) as response:
            assert b"streamtide_task_moves_total 0.0" in response.read()
        with pytest.raises(ConfigError, match=f"cannot serve metrics on 127.0.0.1:{server.port}"):
            MetricsServer(metrics.registry, server.port)
    finally:
        server.close()
    with pytest.raises(urllib.error.URLError):  # no longer served
        urllib.request.urlopen(server.url, timeout=2)
    with socket.socket() as probe:  # and the port can be served again
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", server.port))


def test_the_endpoint_listens_on_the_configured_address_only() -> None:
    import socket
    import urllib.request

    from streamtide.engine.metrics import MetricsServer

    server = MetricsServer(AppMetrics().registry, 0, "127.0.0.2")  # a loopback alias
    try:
        assert server.url == f"http://127.0.0.2:{server.port}/metrics"
        assert server._server.server_address[0] == "127.0.0.2"  # not 0.0.0.0
        with urllib.request.urlopen(server.url, timeout=5) as response:
            assert b"streamtide_task_moves_total" in response.read()
        with pytest.raises(ConnectionRefusedError):  # another address of the host: nothing
            socket.create_connection(("127.0.0.1", server.port), timeout=5)
    finally:
        server.close()


def test_the_metrics_bind_address_is_validated() -> None:
    from streamtide import StreamsConfig
    from streamtide.errors import ConfigError

    assert StreamsConfig().metrics_bind_address == "127.0.0.1"
    for good in ("0.0.0.0", "::", "::1", "10.1.2.3", "metrics.internal", "localhost"):
        assert StreamsConfig(metrics_bind_address=good).metrics_bind_address == good
    for bad in ("", "10.1.2.3:9464", "http://host", "two words", None, 127):
        with pytest.raises(ConfigError, match="metrics_bind_address must be an IP address"):
            StreamsConfig(metrics_bind_address=bad)
