"""A writer process for the crash and concurrency tests (run as a script, not collected).

Argument: one JSON object with root, topic, partition, run (a name), seed, batches (None:
forever), max_batch, mode ("append", "seal" or "mixed"), go_file (wait for it to exist before
writing) and checkpoint_every. Every record value is ``run:batch:index:size``. After each
successful append/seal it prints ``sealed <batch> <base offset> <size>`` and flushes.

With ``"segments"`` (a list of ``[SegmentRef dict, seal_id]``) it instead seals those, in a
shuffled order, and prints ``sealed <seal_id> <base offset>`` for each.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

from streamtide.log import FileLog, LogRecord, SegmentRef


def main() -> None:
    cfg = json.loads(sys.argv[1])
    log = FileLog(cfg["root"], checkpoint_every=cfg.get("checkpoint_every", 256))
    topic, partition, run = cfg["topic"], cfg["partition"], cfg["run"]
    rng = random.Random(cfg["seed"])
    print("ready", flush=True)
    go_file = cfg.get("go_file")
    while go_file and not os.path.exists(go_file):
        time.sleep(0.001)
    if "segments" in cfg:
        jobs = [(SegmentRef.from_dict(ref), seal_id) for ref, seal_id in cfg["segments"]]
        rng.shuffle(jobs)
        for ref, seal_id in jobs:
            print(f"sealed {seal_id} {log.seal(topic, partition, ref, seal_id=seal_id)}")
        return
    batch = 0
    while cfg.get("batches") is None or batch < cfg["batches"]:
        size = rng.randint(1, cfg.get("max_batch", 30))
        records = [
            LogRecord(run.encode(), f"{run}:{batch}:{i}:{size}".encode(), batch)
            for i in range(size)
        ]
        mode = cfg.get("mode", "append")
        if mode == "append" or (mode == "mixed" and batch % 2 == 0):
            base = log.append(topic, partition, records)
        else:
            ref = log.write_segment(topic, partition, records, writer_id=f"{run}/w{batch}")
            base = log.seal(topic, partition, ref, seal_id=f"{run}/{batch}")
        print(f"sealed {batch} {base} {size}", flush=True)
        batch += 1


if __name__ == "__main__":
    main()
