"""Writers killed with SIGKILL at random points never leave a broken or half-visible log."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from streamtide.log import FileLog, LogRecord
from streamtide.log.manifest import PartitionState, entry_name

WRITER = str(Path(__file__).with_name("log_writer.py"))
KILLS = 30


def spawn_writer(cfg: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, WRITER, json.dumps(cfg)], stdout=subprocess.PIPE, text=True
    )


def wait_ready(proc: subprocess.Popen) -> None:
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"


def parse(value: bytes) -> tuple[str, int, int, int]:
    run, batch, index, size = value.decode().split(":")
    return run, int(batch), int(index), int(size)


def check_batches(records: list[LogRecord]) -> dict[tuple[str, int], int]:
    """Every batch is contiguous, complete, in order and present once; returns its base."""
    bases: dict[tuple[str, int], int] = {}
    i = 0
    while i < len(records):
        run, batch, index, size = parse(records[i].value)
        assert index == 0, f"offset {records[i].offset} starts inside batch {run}/{batch}"
        assert (run, batch) not in bases, f"batch {run}/{batch} visible twice"
        chunk = records[i : i + size]
        assert [parse(r.value) for r in chunk] == [(run, batch, k, size) for k in range(size)]
        bases[(run, batch)] = records[i].offset
        i += size
    return bases


def test_sigkilled_writers_leave_only_whole_sealed_segments(tmp_path: Path) -> None:
    root = str(tmp_path / "data")
    FileLog(root).create_topic("crash", 1)
    rng = random.Random(20240605)
    reported: dict[tuple[str, int], tuple[int, int]] = {}

    def spawn(k: int) -> subprocess.Popen:
        # Each writer waits for its go file, so the next one can start up (import) while the
        # current one writes; only one writes at a time.
        cfg = {
            "root": root,
            "topic": "crash",
            "partition": 0,
            "run": f"run{k}",
            "seed": k,
            "batches": None,
            "max_batch": 40,
            "mode": "mixed",
            "checkpoint_every": 5,
            "go_file": str(tmp_path / f"go{k}"),
        }
        return spawn_writer(cfg)

    upcoming = spawn(0)
    for k in range(KILLS):
        proc = upcoming
        wait_ready(proc)
        (tmp_path / f"go{k}").touch()
        if k + 1 < KILLS:
            upcoming = spawn(k + 1)
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        for line in out.splitlines():
            _, batch, base, size = line.split()
            reported[(f"run{k}", int(batch))] = (int(base), int(size))

    log = FileLog(root)
    end = log.end_offset("crash", 0)
    records = list(log.read("crash", 0))
    assert [r.offset for r in records] == list(range(end)), "offsets are not dense"
    visible = check_batches(records)
    # Everything a writer saw sealed is visible at the offset it was told.
    for key, (base, _size) in reported.items():
        assert visible.get(key) == base, f"sealed batch {key} lost or moved"
    # A writer can die after sealing and before reporting: at most one batch per run.
    unreported = [key for key in visible if key not in reported]
    assert len(unreported) <= KILLS
    assert len({run for run, _ in unreported}) == len(unreported)
    assert len(reported) > KILLS, "the writers hardly wrote anything; the test proves little"

    # Every manifest entry names a whole segment file; checkpoints agree with the groups of
    # entries the topic's manifest holds.
    replayed = PartitionState()
    groups = Path(root, "crash", "manifest")
    group = 0
    while (groups / entry_name(group)).exists():
        for partition, fields in json.loads((groups / entry_name(group)).read_bytes())["entries"]:
            assert partition == 0
            replayed.apply_fields(fields, "e")
        group += 1
    loaded = log._partition("crash", 0).refresh()
    assert loaded.segments == replayed.segments and loaded.end_offset == end
    part = log._partition("crash", 0)
    for seg in replayed.segments:
        assert part.segment_count(seg.name) == seg.record_count

    # Written-but-unsealed segments are whole, and none of their records is visible.
    for ref in log.list_unsealed("crash", 0):
        table = part.storage.read_table(f"crash/0/segments/{ref.name}")
        assert table.num_rows == ref.record_count
        run, batch, _, size = parse(table.column("value")[0].as_py())
        assert size == ref.record_count and (run, batch) not in visible

    # The log is still writable: no half-created entry blocks the next writer.
    more = [LogRecord(b"k", b"after:0:0:1", 0)]
    assert log.append("crash", 0, more) == end
    assert FileLog(root).end_offset("crash", 0) == end + 1
