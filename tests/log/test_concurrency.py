"""Several processes writing and sealing into one partition at the same time."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

from streamtide.log import FileLog, LogRecord

WRITER = str(Path(__file__).with_name("log_writer.py"))


def run_together(configs: list[dict], go_file: Path) -> list[str]:
    """Start one process per config, release them at once, return their outputs."""
    procs = [
        subprocess.Popen(
            [sys.executable, WRITER, json.dumps({**cfg, "go_file": str(go_file)})],
            stdout=subprocess.PIPE,
            text=True,
        )
        for cfg in configs
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    go_file.touch()
    outputs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        outputs.append(out)
    return outputs


def test_two_processes_appending_to_one_partition(tmp_path: Path) -> None:
    root = str(tmp_path / "data")
    FileLog(root).create_topic("t", 1)
    runs = ["A", "B"]
    configs = [
        {
            "root": root,
            "topic": "t",
            "partition": 0,
            "run": run,
            "seed": i,
            "batches": 150,
            "max_batch": 25,
            "mode": "mixed",
            "checkpoint_every": 16,
        }
        for i, run in enumerate(runs)
    ]
    outputs = run_together(configs, tmp_path / "go")

    log = FileLog(root)
    records = list(log.read("t", 0))
    end = log.end_offset("t", 0)
    assert [r.offset for r in records] == list(range(end)), "offsets are not dense"
    expected = {}
    for run, out in zip(runs, outputs):
        lines = out.splitlines()
        assert len(lines) == 150
        for line in lines:
            _, batch, base, size = line.split()
            expected[(run, int(batch))] = (int(base), int(size))
    assert end == sum(size for _, size in expected.values()), "records lost or duplicated"

    owners = []
    for (run, batch), (base, size) in expected.items():
        chunk = records[base : base + size]
        assert [r.value.decode() for r in chunk] == [
            f"{run}:{batch}:{i}:{size}" for i in range(size)
        ], f"batch {run}/{batch} is not whole at offset {base}"
        owners.append((base, run))
    for run in runs:  # each writer's own batches keep their order
        bases = [expected[(run, b)][0] for b in range(150)]
        assert bases == sorted(bases)
    order = [run for _, run in sorted(owners)]
    switches = sum(1 for a, b in itertools.pairwise(order) if a != b)
    assert switches >= 2, "the writers never interleaved; the test proved nothing"


def test_two_processes_sealing_the_same_segments(tmp_path: Path) -> None:
    """A duplicated driver (or a roll-forward racing the original) seals each seal_id once."""
    root = str(tmp_path / "data")
    log = FileLog(root)
    log.create_topic("t", 1)
    jobs = []
    for i in range(40):
        recs = [LogRecord(b"k", f"{i}:{j}".encode(), j) for j in range(i % 5 + 1)]
        ref = log.write_segment("t", 0, recs, writer_id=f"batch-{i}/0_0/attempt-0")
        jobs.append([ref.as_dict(), f"batch-{i}/0_0"])
    configs = [
        {"root": root, "topic": "t", "partition": 0, "run": f"S{s}", "seed": s, "segments": jobs}
        for s in range(2)
    ]
    outputs = run_together(configs, tmp_path / "go")
    answers = [dict(line.split()[1:] for line in out.splitlines()) for out in outputs]
    assert answers[0] == answers[1] and len(answers[0]) == 40
    assert log.end_offset("t", 0) == sum(i % 5 + 1 for i in range(40))
    assert log.list_unsealed("t", 0) == []
    records = list(log.read("t", 0))
    for seal_id, base in answers[0].items():
        i = int(seal_id.split("-")[1].split("/")[0])
        chunk = records[int(base) : int(base) + i % 5 + 1]
        assert [r.value for r in chunk] == [f"{i}:{j}".encode() for j in range(i % 5 + 1)]
