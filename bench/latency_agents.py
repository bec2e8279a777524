"""The latency benchmarks' producer and observer, each run as a process of its own (as they
are in use), so the driver's process holds only the driver.

The producer appends ``--rate`` records per second in 10 ms slices, each record with a unique
event id and stamped with the wall-clock time it was handed to the log (file log: the append;
Kafka: the produce call). The observer reads the output topics as a consumer would (the file
log's sealed records; Kafka at read_committed) and notes, for each new output record, when it
became visible; its latency is that time minus the record's timestamp (the stamp of the
input record that produced it; a session result carries its session end, the newest input
of the session). Tombstones are left out.

    python -m bench.latency_agents produce --log URL --topic T --partitions P --rate R ...
    python -m bench.latency_agents observe --log URL --topics A B --partitions P ...
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from array import array
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from streamtide.log import LogRecord, open_log
from streamtide.log.partitioner import partition_for_key

SLICE_S = 0.01
KINDS = ("view", "click", "buy")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def bootstrap(url: str) -> str:
    return url.partition("://")[2]


def event(rnd: random.Random, event_id: int) -> bytes:
    """A unique event's JSON value (10% of them bots, as in the pipeline)."""
    kind = "bot" if rnd.random() < 0.1 else KINDS[event_id % 3]
    return json.dumps(
        {
            "id": event_id,
            "page": f"/p/{event_id % 50}",
            "kind": kind,
            "amount": event_id % 8000 / 100,
        }
    ).encode()


# ---- the producer ------------------------------------------------------------------------


class FileSink:
    """Appends to the file log (each append sealed at once, as an outside producer's)."""

    def __init__(self, url: str, topic: str) -> None:
        self.log, self.topic = open_log(url, fsync=False), topic

    def send(self, partition: int, rows: list[tuple[bytes, bytes]]) -> None:
        stamp = now_ms()
        self.log.append(self.topic, partition, [LogRecord(k, v, stamp) for k, v in rows])

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.log.close()


class KafkaSink:
    """Produces to Kafka with an idempotent producer (``linger.ms`` 5)."""

    def __init__(self, url: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.producer = Producer(
            {"bootstrap.servers": bootstrap(url), "linger.ms": 5, "enable.idempotence": True}
        )

    def send(self, partition: int, rows: list[tuple[bytes, bytes]]) -> None:
        stamp = now_ms()
        for key, value in rows:
            self.producer.produce(self.topic, value, key, partition=partition, timestamp=stamp)
        self.producer.poll(0)

    def flush(self) -> None:
        if self.producer.flush(30):
            raise TimeoutError("records still unacknowledged after 30 s")

    def close(self) -> None:
        self.flush()


def sink_for(url: str, topic: str) -> FileSink | KafkaSink:
    """A producer of ``topic`` on the log ``url`` names."""
    return KafkaSink(url, topic) if url.startswith("kafka") else FileSink(url, topic)


def produce(args: argparse.Namespace) -> dict[str, Any]:
    """Append ``rate`` records/s for ``seconds``; returns what was produced and how far the
    producer ever fell behind its schedule."""
    rnd = random.Random(args.seed)
    keys = [f"user-{i}".encode() for i in range(args.keys)]
    partition_of = [partition_for_key(k, args.partitions) for k in keys]
    sink = sink_for(args.log, args.topic)
    produced = 0
    behind = 0.0
    started = time.monotonic()
    try:
        while (elapsed := time.monotonic() - started) < args.seconds:
            due = int(elapsed * args.rate) - produced
            behind = max(behind, due / args.rate)
            if due > 0:
                parts: list[list[tuple[bytes, bytes]]] = [[] for _ in range(args.partitions)]
                for event_id in range(produced, produced + due):
                    index = rnd.randrange(args.keys)
                    parts[partition_of[index]].append((keys[index], event(rnd, event_id)))
                for partition, rows in enumerate(parts):
                    if rows:
                        sink.send(partition, rows)
                produced += due
            time.sleep(max(0.0, SLICE_S - (time.monotonic() - started - elapsed)))
    finally:
        sink.close()
    seconds = time.monotonic() - started
    return {"produced": produced, "seconds": round(seconds, 3), "max_behind_s": round(behind, 3)}


# ---- the observer ------------------------------------------------------------------------


class _FileSource:
    """Polls each output partition's end and reads what is new as Arrow columns."""

    def __init__(self, url: str, topics: list[str], partitions: int) -> None:
        self.log = open_log(url)
        self.next = {(t, p): 0 for t in topics for p in range(partitions)}

    def poll(self, count_after: int, out: dict[str, array]) -> int:
        found = 0
        for (topic, partition), start in self.next.items():
            end = self.log.end_offset(topic, partition)
            if end <= start:
                continue
            seen = now_ms()
            table = self.log.read_table(topic, partition, start, end)
            stamps = table.column("timestamp")
            keep = pc.and_(
                pc.is_valid(table.column("value")), pc.greater_equal(stamps, count_after)
            )
            latencies = pc.subtract(seen, pc.filter(stamps, keep)).to_pylist()
            out[topic].extend(latencies)
            found += end - start
            self.next[(topic, partition)] = end
        return found

    def close(self) -> None:
        self.log.close()


class _KafkaSource:
    """A read_committed consumer of every output partition, from the beginning."""

    def __init__(self, url: str, topics: list[str], partitions: int) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap(url),
                "group.id": f"latency-observer-{time.time_ns()}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 5,
            }
        )
        self.consumer.assign(
            [TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in range(partitions)]
        )

    def poll(self, count_after: int, out: dict[str, array]) -> int:
        messages = self.consumer.consume(num_messages=5_000, timeout=0.05)
        seen = now_ms()
        found = 0
        for message in messages:
            if message.error() is not None:
                continue
            found += 1
            stamp = message.timestamp()[1]
            if message.value() is not None and stamp >= count_after:
                out[message.topic()].append(seen - stamp)
        return found

    def close(self) -> None:
        self.consumer.close()


def observe(args: argparse.Namespace) -> dict[str, Any]:
    """Collect the latency of every output record stamped at or after ``--count-after`` until
    ``--stop-file`` exists and nothing new arrives; write them to ``--out`` (one array of
    int64 per topic, ``<out>.<topic>``) and return the counts."""
    kafka = args.log.startswith("kafka")
    source = (_KafkaSource if kafka else _FileSource)(args.log, args.topics, args.partitions)
    latencies = {t: array("q") for t in args.topics}
    stop = Path(args.stop_file)
    quiet = 0
    try:
        while quiet < 3:
            found = source.poll(args.count_after, latencies)
            if stop.exists():
                quiet = quiet + 1 if found == 0 else 0
            if not kafka and found == 0:
                time.sleep(0.005)
    finally:
        source.close()
    for topic, values in latencies.items():
        Path(f"{args.out}.{topic}").write_bytes(values.tobytes())
    return {"counted": {t: len(v) for t, v in latencies.items()}}


def read_latencies(out: str, topic: str) -> array:
    """The latencies the observer wrote for ``topic``."""
    values = array("q")
    values.frombytes(Path(f"{out}.{topic}").read_bytes())
    return values


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.latency_agents")
    sub = parser.add_subparsers(dest="role", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--log", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=int, required=True)
    p.add_argument("--keys", type=int, default=5_000)
    p.add_argument("--rate", type=int, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--seed", type=int, default=7)
    o = sub.add_parser("observe")
    o.add_argument("--log", required=True)
    o.add_argument("--topics", nargs="+", required=True)
    o.add_argument("--partitions", type=int, required=True)
    o.add_argument("--count-after", type=int, required=True, help="epoch ms")
    o.add_argument("--stop-file", required=True)
    o.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    result = produce(args) if args.role == "produce" else observe(args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
