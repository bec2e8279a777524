"""One Quix Streams application over the benchmark's input topic, run in Quix's own virtual
environment (``bench/quix_env.py``) as a process of its own; imports nothing of Streamtide.

Timed from ``Application(...)`` until the consumer group's committed offsets reach the end of
every input partition (a monitor thread polls them), exactly once, Quix's defaults otherwise
(commit interval 5 s). The operations, with the semantics of Streamtide's:

- ``dedup``: drop a record whose key already had its event id within 10 s (a stateful
  filter keeping each key's recent ids; a record more than 10 s behind its key's newest is
  forwarded and not remembered, as Streamtide forwards late records);
- ``window-count``: 60 s tumbling count, no grace, every update, windows closed by the
  partition's event time (``closing_strategy="partition"``: Streamtide's stream time);
- ``session-count``: session count with a 30 s gap, every update, closed by the partition's
  event time, with Streamtide's session grace (a day less the gap).

After the clock stops it reads its output topic (read_committed) and writes what it emitted,
in order, to ``--emitted`` as JSON, for the comparison with Streamtide's outputs. Prints one
JSON line: start-up (to the first record processed), the first commit, seconds, commits,
records.

    <quix-venv>/bin/python bench/quix_runner.py --broker HOST:PORT --topic events ...
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

DEDUP_INTERVAL_MS = 10_000
WINDOW_MS = 60_000
SESSION_GAP_MS = 30_000
SESSION_GRACE_MS = 86_400_000 - SESSION_GAP_MS


def dedup(value: Any, key: Any, timestamp: int, headers: Any, state: Any) -> bool:
    """Forward the first copy of an event id within the interval (per key)."""
    seen = state.get("seen") or {}
    newest = max(state.get("newest") or timestamp, timestamp)
    event = str(value["id"])
    previous = seen.get(event)
    if previous is not None and abs(previous - timestamp) <= DEDUP_INTERVAL_MS:
        return False
    if timestamp >= newest - DEDUP_INTERVAL_MS:  # a late record is forwarded, not remembered
        seen = {i: t for i, t in seen.items() if t >= newest - DEDUP_INTERVAL_MS}
        seen[event] = timestamp
        state.set("seen", seen)
    state.set("newest", newest)
    return True


class Committed:
    """Polls the group's committed offsets until they reach every partition's end."""

    def __init__(self, broker: str, group: str, topic: str, partitions: int) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer(
            {"bootstrap.servers": broker, "group.id": group, "enable.auto.commit": False}
        )
        self.partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self.ends = [
            self.consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in self.partitions
        ]

    def reached(self) -> bool:
        committed = self.consumer.committed(self.partitions, timeout=10)
        return all(c.offset >= end for c, end in zip(committed, self.ends))

    def close(self) -> None:
        self.consumer.close()


def read_output(broker: str, topic: str) -> list[tuple[Any, ...]]:
    """Every committed record of ``topic`` as (key, value) in partition order."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": f"quix-bench-reader-{time.time_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    done: set[int] = set()
    out: list[tuple[Any, ...]] = []
    empty = 0
    while len(done) < len(partitions) and empty < 50:
        messages = consumer.consume(num_messages=10_000, timeout=0.5)
        empty = 0 if messages else empty + 1
        for message in messages:
            if message.error() is not None:
                if message.error().code() == -191:  # _PARTITION_EOF
                    done.add(message.partition())
                continue
            key = message.key().decode() if message.key() is not None else None
            value = json.loads(message.value()) if message.value() is not None else None
            out.append((key, value))
    consumer.close()
    return out


def emitted(operation: str, records: list[tuple[Any, ...]]) -> list[list[Any]]:
    """What the comparison needs: surviving (key, id), or (key, start, end, count)."""
    if operation == "dedup":
        return [[key, value["id"]] for key, value in records]
    return [[key, v["start"], v["end"], v["value"]] for key, v in records if v is not None]


def main() -> None:
    parser = argparse.ArgumentParser(prog="quix_runner.py")
    parser.add_argument("--broker", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--operation", choices=["dedup", "window-count", "session-count"])
    parser.add_argument("--group", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--emitted", required=True)
    args = parser.parse_args()

    import quixstreams
    from quixstreams import Application
    from quixstreams.checkpointing.checkpoint import Checkpoint

    commits = [0]
    committed_at: list[float] = []
    original_commit = Checkpoint.commit

    def counted_commit(self: Any, *a: Any, **k: Any) -> Any:
        counted = not self.empty()
        result = original_commit(self, *a, **k)
        if counted:
            commits[0] += 1
            committed_at.append(time.perf_counter())
        return result

    Checkpoint.commit = counted_commit  # type: ignore[method-assign]
    first: list[float] = []
    records = [0]

    def mark(value: Any) -> None:
        if not first:
            first.append(time.perf_counter())
        records[0] += 1

    started = time.perf_counter()
    app = Application(
        broker_address=args.broker,
        consumer_group=args.group,
        processing_guarantee="exactly-once",
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        loglevel="WARNING",
    )
    source = app.topic(args.topic, key_deserializer="str", value_deserializer="json")
    sink = app.topic(args.output, key_serializer="str", value_serializer="json")
    sdf = app.dataframe(source).update(mark)
    if args.operation == "dedup":
        sdf = sdf.filter(dedup, stateful=True, metadata=True)
    elif args.operation == "window-count":
        sdf = sdf.tumbling_window(WINDOW_MS).count().current(closing_strategy="partition")
    else:
        windows = sdf.session_window(SESSION_GAP_MS, grace_ms=SESSION_GRACE_MS)
        sdf = windows.count().current(closing_strategy="partition")
    sdf.to_topic(sink)
    monitor = Committed(args.broker, args.group, args.topic, args.partitions)
    finished: list[float] = []

    def watch() -> None:
        while not finished:
            if first and monitor.reached():
                finished.append(time.perf_counter())
                app.stop()
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    app.run()
    if not finished:
        finished.append(time.perf_counter())
    monitor.close()
    out = read_output(args.broker, args.output)
    with open(args.emitted, "w") as handle:
        json.dump(emitted(args.operation, out), handle)
    print(
        json.dumps(
            {
                "system": "quix",
                "version": quixstreams.__version__,
                "seconds": round(finished[0] - started, 3),
                "startup_s": round(first[0] - started, 3) if first else None,
                "first_commit_s": round(committed_at[0] - started, 3) if committed_at else None,
                "commits": commits[0],
                "records": records[0],
                "outputs": len(out),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
