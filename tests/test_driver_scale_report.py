"""``python -m bench.driver_scale --report`` prints the stored sweep's table and, last, the one
JSON line of the target point; its results file keeps one line per row."""

from __future__ import annotations

import json

from bench.driver_scale import TARGET, dump, main


def _row(log: str, partitions: int, driver_ms: float) -> dict:
    return {
        "log": log,
        "partitions": partitions,
        "subtopologies": 3,
        "work_units": 64,
        "batches": 2,
        "driver_ms": driver_ms,
        "wall_ms": driver_ms + 5,
        "wait_ms": 5.0,
        "cpu_ms": driver_ms / 2,
        "phases_ms": {"seal": driver_ms / 2, "ranges": driver_ms / 4},
        "phases_cpu_ms": {"seal": 1.0, "ranges": 1.0},
        "messages": 96.0,
        "bytes_sent": 2048.0,
        "bytes_received": 4096.0,
        "fsyncs": 3.0,
        "fsync_ms": 1.0,
        "files_written": 2.0,
        "broker_calls": 9.0,
        "gc_ms": 0.0,
        "rss_mb": 100.0,
    }


def test_report_prints_the_target_point_last(tmp_path, capsys) -> None:
    result = {
        "load_average_at_start": 1.5,
        "elapsed_s": 10.0,
        "settings": {"partitions": [256, 1024]},
        "stopped": {"kafka": None, "file": "4096 partitions, 3 sub-topologies: too big"},
        "skipped": [],
        "assignment": {"clients": 200, "tasks": 4000, "assign_ms": 30.0, "step_ms": 60.0},
        "rows": [_row("kafka", 256, 40.0), _row("kafka", 1024, 120.0), _row("file", 256, 90.0)],
    }
    out = tmp_path / "driver_scale.json"
    out.write_text(dump(result))
    assert json.loads(out.read_text()) == result
    assert len(out.read_text().splitlines()) < 40  # one line per row

    assert main(["--report", "--markdown", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert json.loads(lines[-1]) == {
        **TARGET,
        "kafka_driver_ms": 120.0,
        "file_driver_ms": None,  # not measured at the target point
        "assign_ms_200_clients_4000_tasks": 60.0,
    }
    assert any(line.startswith("| Kafka | 1,024 | 3 | 64 | 120 |") for line in lines)
    assert any("file: stopped at 4096 partitions" in line for line in lines)
