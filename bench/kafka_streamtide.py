"""One Streamtide application over the benchmark's input topic on Kafka, in a process of its
own (``bench.kafka``'s peer comparison starts it fresh for every run).

The SparkSession starts first (its start is reported apart: a streaming application pays it
once); the clock then runs from ``StreamsApp(...)`` until every input record is committed
(``run_until_caught_up``). Start-up is the time to the first committed batch less what its
work units spent on its records (the longest one's run). Afterwards the
run reads what it wrote to its output topic and writes it, in order, to ``--emitted`` as
JSON for the comparison with Quix's. Prints one JSON line.

    python -m bench.kafka_streamtide --log kafka://HOST:PORT --operation dedup ...
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

from bench.streamtide_bench import TOPOLOGIES, WINDOW_COUNT_MS
from bench.workload import Workload
from streamtide import Serdes, StreamsApp, StreamsConfig
from streamtide.log import open_log

#: The output topic of each operation (``bench.streamtide_bench``'s topologies).
OUTPUTS = {
    "dedup": "dedup-out",
    "window-count": "window-count-out",
    "session-count": "session-out",
    "pipeline": "pipeline-counted",
}
KEY_SERDES = {
    "window-count": Serdes.time_windowed(Serdes.string(), WINDOW_COUNT_MS),
    "session-count": Serdes.session_windowed(Serdes.string()),
}


def output_ends(log: Any, topic: str) -> list[int]:
    if not log.has_topic(topic):
        return []
    return [log.end_offset(topic, p) for p in range(log.partitions(topic))]


def emitted(log: Any, operation: str, starts: list[int]) -> list[list[Any]]:
    """What this run wrote to its output topic (from ``starts``): surviving (key, id), or
    (key, start, end, count or None)."""
    topic = OUTPUTS[operation]
    out: list[list[Any]] = []
    json_serde = Serdes.json()
    long_serde = Serdes.long()
    key_serde = KEY_SERDES.get(operation)
    for partition in range(log.partitions(topic)):
        start = starts[partition] if partition < len(starts) else 0
        table = log.read_table(topic, partition, start)
        keys = table.column("key").to_pylist()
        values = table.column("value").to_pylist()
        for key, value in zip(keys, values):
            if key_serde is None:
                out.append([key.decode(), json_serde.deserialize(value)["id"]])
            else:
                windowed = key_serde.deserialize(key)
                count = None if value is None else long_serde.deserialize(value)
                window = windowed.window
                out.append([windowed.key, window.start, window.end, count])
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.kafka_streamtide")
    p.add_argument("--log", required=True)
    p.add_argument("--operation", choices=sorted(OUTPUTS), required=True)
    p.add_argument("--application-id", required=True)
    p.add_argument("--state-dir", required=True)
    p.add_argument("--workload", required=True, help="the Workload as JSON")
    p.add_argument("--max-records-per-batch", type=int)
    p.add_argument("--fixed-batch-size", action="store_true", help="adaptive batch size off")
    p.add_argument("--emitted")
    p.add_argument("--master", default="local[2]")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    data = json.loads(args.workload)
    w = Workload(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
    from streamtide.engine.interop import build_session

    began = time.perf_counter()
    spark = build_session(args.master, f"bench-{args.application_id}")
    spark_start_s = time.perf_counter() - began
    options = {"topic.retention.ms": "-1"}
    log = open_log(args.log, **options)
    starts = output_ends(log, OUTPUTS[args.operation])
    settings: dict[str, Any] = {}
    if args.max_records_per_batch:
        settings["max_records_per_batch"] = args.max_records_per_batch
    if args.fixed_batch_size:
        settings["adaptive_batch_size"] = False
    config = StreamsConfig(
        application_id=args.application_id,
        log=args.log,
        log_options=options,
        state_dir=str(Path(args.state_dir) / args.application_id),
        **settings,
    )
    started_ms = time.time() * 1000
    started = time.perf_counter()
    app = StreamsApp(TOPOLOGIES[args.operation](w), config, spark=spark)
    try:
        batches = app.run_until_caught_up(timeout=7200)
        seconds = time.perf_counter() - started
    finally:
        app.stop()
    first = batches[0]
    first_commit_s = (first.committed_at - started_ms) / 1000
    result = {
        "system": "streamtide",
        "seconds": round(seconds, 3),
        "spark_start_s": round(spark_start_s, 3),
        "startup_s": round(first_commit_s - first.phases_ms.get("unit.longest", 0.0) / 1000, 3),
        "first_commit_s": round(first_commit_s, 3),
        "first_batch_records": first.input_records,
        "commits": len(batches),
        "records": sum(b.input_records for b in batches),
        "outputs": sum(b.output_records for b in batches),
        "changelog_records": sum(b.changelog_records for b in batches),
        "settings": settings,
    }
    if args.emitted:
        Path(args.emitted).write_text(json.dumps(emitted(log, args.operation, starts)))
    log.close()
    spark.stop()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
