"""Simulated executors for the driver-scale benchmark (``bench/driver_scale.py``).

``SimulatedExecutors`` is a ``WorkUnitLauncher`` (``streamtide.engine.launcher``): the real
driver assigns tasks to its executors and launches a long-running work unit per slot, as on
Spark, but each work unit runs in one of a few simulator processes (``python -m
bench.simulated_executors``), never in the driver's interpreter. A simulated work unit
connects to the driver's control channel over TLS as ``engine.worker`` does (it pins the
certificate fingerprint of the launch payload and proves its secret) and answers the real
protocol (``engine.worker.answer_driver``): it processes no records, but for each active
task with input it leaves what the driver's commit needs, as a real task would:

- on the file log, one unsealed one-record segment per partition the task writes (its sink
  partition and its stores' changelog partitions), which the driver seals: slices of two
  shared files per work unit and run (changelogs, and the rest), written at the end of the
  run with the work units' own ``runtime.unit_writes``, as real work units write them;
- on Kafka, one record to each of those partitions, and the task's input offsets with its
  state in the application's consumer group (one commit per run message), from which the
  driver plans the next batch.

It replies at once or after ``delay_ms``. Each simulator process hosts many executors on
threads (a work unit mostly waits on its socket), so 128 work units cost four interpreters;
one of them also appends the benchmark's input between batches (``feed``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from streamtide.engine import slots as slot_registry
from streamtide.engine.control_address import LOOPBACK
from streamtide.engine.interop import ExecutorInfo
from streamtide.runtime.unit_writes import UnitWrites

PROCESSES = 4


class SimulatedExecutors:
    """Executors with one slot each, whose work units run in simulator processes."""

    def __init__(self, processes: int = PROCESSES) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self._procs = [
            subprocess.Popen(
                [sys.executable, "-m", "bench.simulated_executors"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                bufsize=1,
                env=env,
            )
            for _ in range(processes)
        ]
        self._lock = threading.Lock()
        self._answers: dict[int, dict[str, Any]] = {}
        self._arrived = threading.Condition(self._lock)
        self._tokens = iter(range(1, 1 << 62))
        self._groups: dict[str, tuple[int, int]] = {}  # group -> (process, token)
        self._executors: list[ExecutorInfo] = []
        #: the session the slot registry (``engine.slots``) keys holders by, as Spark's id
        self.applicationId = f"simulated-{uuid.uuid4().hex[:12]}"
        for index, proc in enumerate(self._procs):
            threading.Thread(
                target=self._read, args=(index, proc), name=f"sim-reader-{index}", daemon=True
            ).start()

    # ---- the launcher interface ----------------------------------------------------------

    def executors(self) -> list[ExecutorInfo]:
        return list(self._executors)

    def control_address(self) -> tuple[str, str]:
        return LOOPBACK, LOOPBACK  # the simulator processes run on this machine

    def hold_slots(self, application_id: str, held: Callable[[], Mapping[str, int]]) -> int:
        return slot_registry.hold(self, application_id, held)

    def check_slots_free(
        self,
        application_id: str,
        slots: Iterable[tuple[ExecutorInfo, int]],
        own_token: int | None = None,
    ) -> None:
        slot_registry.check_free(self, application_id, slots, own_token)

    def busy_slots(self) -> dict[str, int]:
        return {}

    def serve(self, payload: str, executor: ExecutorInfo, blob: bytes, group: str) -> str:
        index = int(executor.id) % len(self._procs)
        token = self._send(index, {"op": "launch", "payload": payload}, group)
        answer = self._await(token)
        with self._lock:
            self._groups.pop(group, None)
        return json.dumps({"ended": answer.get("ended", "ended")})

    def cancel(self, group: str) -> None:
        with self._lock:
            found = self._groups.get(group)
        if found is not None:
            self._write(found[0], {"op": "cancel", "token": found[1]})

    # ---- the benchmark's controls --------------------------------------------------------

    def set_executors(self, count: int) -> None:
        """``count`` live executors, ids 1..count (ids stay, as Spark's do)."""
        self._executors = [ExecutorInfo(str(i), f"sim-{i}", 1) for i in range(1, count + 1)]

    def configure(self, settings: Mapping[str, Any]) -> None:
        """Tell every simulator what the application writes (``simulator_settings``)."""
        tokens = [self._send(i, {"op": "configure", **settings}) for i in range(len(self._procs))]
        for token in tokens:
            self._await(token)

    def feed(self, topic: str, partitions: int) -> None:
        """Append one record to every partition of ``topic`` (from a simulator process, so
        the driver's process does none of it)."""
        self._await(self._send(0, {"op": "feed", "topic": topic, "partitions": partitions}))

    def close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.stdin.close()  # type: ignore[union-attr]
        for proc in self._procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    # ---- plumbing ------------------------------------------------------------------------

    def _send(self, index: int, message: dict[str, Any], group: str | None = None) -> int:
        with self._lock:
            token = next(self._tokens)
            if group is not None:
                self._groups[group] = (index, token)
        self._write(index, {**message, "token": token})
        return token

    def _write(self, index: int, message: dict[str, Any]) -> None:
        stdin = self._procs[index].stdin
        assert stdin is not None
        with self._lock:
            stdin.write(json.dumps(message) + "\n")
            stdin.flush()

    def _await(self, token: int) -> dict[str, Any]:
        with self._arrived:
            self._arrived.wait_for(lambda: token in self._answers)
            answer = self._answers.pop(token)
        if "error" in answer:
            raise RuntimeError(f"simulated executor: {answer['error']}")
        return answer

    def _read(self, index: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            answer = json.loads(line)
            with self._arrived:
                self._answers[int(answer["token"])] = answer
                self._arrived.notify_all()
        with self._arrived:  # the process ended: every open launch ends with it
            for _, token in list(self._groups.values()):
                self._answers.setdefault(token, {"error": f"simulator {index} exited"})
            self._arrived.notify_all()


def simulator_settings(app: Any, delay_ms: float) -> dict[str, Any]:
    """What a simulator needs to know of a started ``StreamsApp``: its log, application id,
    and per stage the partitions each task writes (sinks and changelogs of its partition)."""
    topology, config = app.topology, app.config
    stages = {}
    for stage in app.stages:
        sub = topology.subtopology(stage.subtopology)
        sinks = [topology.resolve_topic(t, config.application_id) for t in sub.sink_topics]
        stages[str(stage.subtopology)] = {
            "writes": sinks + sorted(stage.changelog_topics.values()),
            "stores": dict(stage.changelog_topics),
        }
    return {
        "log": config.log,
        "app": config.application_id,
        "stages": stages,
        "delay_ms": delay_ms,
    }


# ---- the simulator process ---------------------------------------------------------------


class _Simulator:
    """One simulator process: work units on threads, answering over their channels."""

    def __init__(self) -> None:
        self.out_lock = threading.Lock()
        self.settings: dict[str, Any] = {}
        self.log: Any = None
        self.kafka: Any = None  # (producer, group offsets) on a Kafka log
        self.sockets: dict[int, socket.socket] = {}
        self.written: dict[tuple[str, int], int] = {}  # records written per partition

    def reply(self, message: dict[str, Any]) -> None:
        with self.out_lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def handle(self, message: dict[str, Any]) -> None:
        op, token = message["op"], message["token"]
        try:
            if op == "configure":
                self.configure(message)
                self.reply({"token": token})
            elif op == "feed":
                self.feed(message["topic"], int(message["partitions"]))
                self.reply({"token": token})
            elif op == "launch":
                threading.Thread(
                    target=self.serve, args=(token, message["payload"]), daemon=True
                ).start()
            elif op == "cancel":
                sock = self.sockets.get(int(message["token"]))
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)
        except Exception as exc:  # reported to the benchmark, which stops
            self.reply({"token": token, "error": f"{type(exc).__name__}: {exc}"})

    def configure(self, settings: dict[str, Any]) -> None:
        from streamtide.log import open_log
        from streamtide.log.factory import is_kafka_url

        if settings["log"] != self.settings.get("log") or settings["app"] != self.settings.get(
            "app"
        ):
            self.close_log()
            if is_kafka_url(settings["log"]):
                from confluent_kafka import Producer

                from streamtide.log.kafka_group import GroupOffsets

                self.log = open_log(settings["log"])
                producer = Producer({"bootstrap.servers": self.log.bootstrap, "linger.ms": 1})
                self.kafka = (producer, GroupOffsets(self.log, settings["app"]))
            else:  # a real task fsyncs its segments; that is the work unit's time, not ours
                self.log = open_log(settings["log"], fsync=False)
            self.written = {}
        self.settings = settings

    def close_log(self) -> None:
        if self.kafka is not None:
            self.kafka[0].flush(10)
            self.kafka[1].close()
            self.kafka = None
        if self.log is not None:
            self.log.close()
            self.log = None

    def feed(self, topic: str, partitions: int) -> None:
        from streamtide.log import LogRecord

        now = int(time.time() * 1000)
        if self.kafka is not None:
            producer = self.kafka[0]
            for p in range(partitions):
                producer.produce(topic, b"v", b"k", partition=p, timestamp=now)
            producer.flush(30)
            return
        for p in range(partitions):
            self.log.append(topic, p, [LogRecord(b"k", b"v", now)])

    def serve(self, token: int, payload: str) -> None:
        from streamtide.engine.channel import connect
        from streamtide.engine.worker import answer_driver

        job = json.loads(payload)
        hello = {
            "slot": job["slot"],
            "generation": job["generation"],
            "executor": job["executor"],
            "pid": os.getpid(),
        }
        ended = "ended"
        try:
            sock = connect(job["host"], int(job["port"]), job["secret"], job["fingerprint"], hello)
            self.sockets[token] = sock
            try:
                ended = answer_driver(sock, _Host(), self.run_units, lambda: None)
            finally:
                self.sockets.pop(token, None)
                sock.close()
        except Exception as exc:
            ended = f"{type(exc).__name__}: {exc}"
        self.reply({"token": token, "ended": ended})

    # ---- one run message -----------------------------------------------------------------

    def run_units(self, units: list[dict[str, Any]]) -> list[dict[str, Any]]:
        delay = float(self.settings.get("delay_ms", 0)) / 1000
        if delay:
            time.sleep(delay)
        offsets: dict[tuple[str, int], tuple[int, str]] = {}
        reports = [self.run_unit(unit, offsets) for unit in units]
        if self.kafka is not None:
            self.kafka[0].flush(30)
            if offsets:
                self.kafka[1].commit(offsets)
        return reports

    def run_unit(
        self, unit: dict[str, Any], offsets: dict[tuple[str, int], tuple[int, str]]
    ) -> dict[str, Any]:
        stage = self.settings["stages"][str(unit["stage"])]
        attempt = uuid.uuid4().hex[:12]
        prefix = f"{self.settings['app']}/b{unit['batch']}/s{unit['stage']}/"
        now = int(time.time() * 1000)
        tasks = []
        writes = UnitWrites()
        for active in unit["active"]:
            task = active["task_id"]
            partition = int(task.split("_")[1])
            ranges = {t: (int(r[0]), int(r[1])) for t, r in active["ranges"].items()}
            read = sum(end - start for start, end in ranges.values())
            writer = f"{prefix}{task}/{attempt}"
            segments: list[Any] = []
            if read:
                segments = self.write(stage, partition, writer, now, writes)
            state = {
                "offsets": {f"{t}:{partition}": end for t, (_, end) in ranges.items()},
                "stream_time": now,
                "schedules": {},
                "partition_times": {},
            }
            if self.kafka is not None:
                meta = json.dumps(
                    {"stream_time": now, "schedules": {}, "partition_times": {}},
                    sort_keys=True,
                    separators=(",", ":"),
                )
                for t, (_, end) in ranges.items():
                    offsets[(t, partition)] = (end, meta)
            local = {s: self.written.get((t, partition), 0) for s, t in stage["stores"].items()}
            tasks.append(
                {
                    "task": task,
                    "writer": writer,
                    "state": state,
                    "segments": segments,
                    "input_records": read,
                    "output_records": {t: 1 for t in stage["writes"]} if read else {},
                    "restored_records": 0,
                    "metrics": {"process-records": read, "punctuations.stream_time": 0},
                    "local_offsets": local,
                    "phases_ms": {"read": 0.1, "process": 0.1, "commit": 0.1, "write": 0.1},
                    "duration_ms": 0.5,
                }
            )
        if self.log is not None and len(writes):
            writes.write(self.log, f"{prefix}unit/{attempt}")
        standbys = {}
        for task in unit.get("standby", []):
            partition = int(task.split("_")[1])
            local = {s: self.written.get((t, partition), 0) for s, t in stage["stores"].items()}
            standbys[task] = {
                "local_offsets": local,
                "offset_sum": sum(local.values()),
                "applied": 0,
                "lag": 0,
                "restored_records": 0,
            }
        return {
            "client": unit["client"],
            "batch": unit["batch"],
            "stage": unit["stage"],
            "tasks": tasks,
            "standbys": standbys,
            "duration_ms": 1.0,
            "ran_on": {"executor": unit["client"], "pid": os.getpid()},
        }

    def write(
        self, stage: dict[str, Any], partition: int, writer: str, now: int, writes: UnitWrites
    ) -> list[Any]:
        """One record to ``partition`` of each topic the stage writes: held in ``writes`` on
        the file log (written at the end of the unit, filling the list returned), a produced
        record each on Kafka."""
        from streamtide.log import LogRecord
        from streamtide.log.segments import to_table

        segments: list[Any] = []
        tables = []
        for topic in stage["writes"]:
            key = (topic, partition)
            self.written[key] = self.written.get(key, 0) + 1
            if self.kafka is not None:
                self.kafka[0].produce(topic, b"v", b"k", partition=partition, timestamp=now)
                continue
            tables.append((topic, partition, to_table([LogRecord(b"k", b"v", now)])))
        if tables:
            writes.add(segments, writer, tables, set(stage["stores"].values()))
        return segments


class _Host:
    """The task host a simulated work unit answers for: it holds nothing."""

    def settle(self, winners: dict[str, str]) -> None:
        pass

    def release(self, keep: list[str]) -> list[str]:
        return []

    def query(self, query: Any) -> dict[str, Any]:
        return {}


def main() -> None:
    simulator = _Simulator()
    for line in sys.stdin:
        simulator.handle(json.loads(line))
    simulator.close_log()


if __name__ == "__main__":
    main()
