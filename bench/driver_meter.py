"""What one batch costs the driver's process: time and CPU by phase, control messages and
bytes, fsyncs and files written, Kafka broker calls, memory (``bench/driver_scale.py``).

``DriverMeter`` instruments a ``StreamsApp`` from the outside: it wraps a few of its bound
methods (and its committer's) with phase timers that count exclusive wall and CPU time, and
wraps the process-wide functions that write files, fsync, talk to the broker or send control
messages with counters. Nothing of the engine changes for it. The time the driver waits for
work units (``ContinuousWorkers.waited_s``) is subtracted from the phase it falls in (sending
the run messages), so "own" time is the driver's wall time minus that wait.
"""

from __future__ import annotations

import functools
import gc
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Phase -> the methods in it: the app's collaborators' (``placing.<name>`` is
#: ``app._placing``) and its committer's (``committer.<name>``).
PHASES: dict[str, tuple[str, ...]] = {
    "fence": ("committer.check_fence",),
    "assign": ("placing.live_executors", "placing.assign", "placing.restore_bound"),
    "ranges": ("inputs.planned",),
    "records": ("committer.plan_stage", "committer.run_stage"),
    "run": ("runner.execute_stages",),
    "seal": ("committer._seal",),
    "take_over": ("runner.take_over",),
    "lags": ("inputs.source_lags",),
    "commit": (
        "committer.commit",
        "placing.write_records",
        "committer.after_commit",
    ),
    "history": ("placing.record_history",),
}
OTHER = "other"

_counts: Counter[str] = Counter()
_counts_lock = threading.Lock()
_patched = False


def _count(name: str, amount: float = 1) -> None:
    with _counts_lock:
        _counts[name] += amount


@dataclass
class BatchCost:
    """One measured batch."""

    wall_ms: float
    wait_ms: float
    cpu_ms: float
    own_ms: float
    phases_ms: dict[str, float] = field(default_factory=dict)
    phases_cpu_ms: dict[str, float] = field(default_factory=dict)
    messages: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    fsyncs: int = 0
    fsync_ms: float = 0.0
    files_written: int = 0
    broker_calls: int = 0
    gc_ms: float = 0.0
    rss_mb: float = 0.0


def _collaborator(app: Any, name: str) -> Any:
    """The app's part that ``PHASES`` names (``StreamsApp``'s collaborators)."""
    if name == "committer":
        return app.committer
    return getattr(app, f"_{name}", app)


class DriverMeter:
    """Measures the batches ``measure`` runs on one app."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._wall: dict[str, float] = {}
        self._cpu: dict[str, float] = {}
        self._stack: list[list[float]] = []  # per open phase: [child wall, child cpu]
        self._owner: threading.Thread | None = None
        patch_process()
        for phase, names in PHASES.items():
            for name in names:
                owner_name, attr = name.split(".")
                owner = _collaborator(app, owner_name)
                method = getattr(owner, attr, None)
                if method is not None:  # engines of other releases name some steps otherwise
                    setattr(owner, attr, self._timed(phase, method))

    def _timed(self, phase: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is not self._owner:  # not a measured batch
                return method(*args, **kwargs)
            wall0, cpu0 = time.perf_counter(), time.process_time()
            waited0 = self._waited()
            self._stack.append([0.0, 0.0])
            try:
                return method(*args, **kwargs)
            finally:
                child_wall, child_cpu = self._stack.pop()
                wall = time.perf_counter() - wall0
                cpu = time.process_time() - cpu0
                waited = self._waited() - waited0
                own_wall = wall - child_wall - (waited if phase == "run" else 0.0)
                self._wall[phase] = self._wall.get(phase, 0.0) + own_wall
                self._cpu[phase] = self._cpu.get(phase, 0.0) + cpu - child_cpu
                if self._stack:
                    self._stack[-1][0] += wall
                    self._stack[-1][1] += cpu

        return timed

    def _waited(self) -> float:
        workers = self.app._workers
        return workers.waited_s if workers is not None else 0.0

    def measure(self, run: Callable[[], Any]) -> BatchCost:
        """Run one batch (``run``) and return what it cost."""
        self._wall, self._cpu = {}, {}
        self._owner = threading.current_thread()
        before = dict(_counts)
        waited0 = self._waited()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        try:
            run()
        finally:
            self._owner = None
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        waited = self._waited() - waited0
        delta = {k: v - before.get(k, 0) for k, v in _counts.items()}
        phases = {k: round(v * 1000, 3) for k, v in self._wall.items()}
        phases_cpu = {k: round(v * 1000, 3) for k, v in self._cpu.items()}
        phases[OTHER] = round((wall - waited - sum(self._wall.values())) * 1000, 3)
        phases_cpu[OTHER] = round((cpu - sum(self._cpu.values())) * 1000, 3)
        return BatchCost(
            wall_ms=round(wall * 1000, 3),
            wait_ms=round(waited * 1000, 3),
            cpu_ms=round(cpu * 1000, 3),
            own_ms=round((wall - waited) * 1000, 3),
            phases_ms=phases,
            phases_cpu_ms=phases_cpu,
            messages=int(delta.get("messages", 0)),
            bytes_sent=int(delta.get("bytes_sent", 0)),
            bytes_received=int(delta.get("bytes_received", 0)),
            fsyncs=int(delta.get("fsyncs", 0)),
            fsync_ms=round(delta.get("fsync_s", 0.0) * 1000, 3),
            files_written=int(delta.get("files", 0)),
            broker_calls=int(delta.get("broker_calls", 0)),
            gc_ms=round(delta.get("gc_s", 0.0) * 1000, 3),
            rss_mb=round(rss_mb(), 1),
        )


def rss_mb() -> float:
    """The process's resident memory now."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


# ---- process-wide counters -------------------------------------------------------------------


class _CountingSocket:
    """A socket that counts the bytes the control channel sends and receives through it."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock

    def sendall(self, data: bytes) -> None:
        _count("bytes_sent", len(data))
        self._sock.sendall(data)

    def recv(self, size: int) -> bytes:
        data = self._sock.recv(size)
        _count("bytes_received", len(data))
        return data


def patch_process() -> None:
    """Count fsyncs, files written, broker calls and control messages in this process."""
    global _patched
    if _patched:
        return
    _patched = True
    from streamtide.engine import channel, continuous
    from streamtide.log import storage

    def send_message(sock: Any, message: dict[str, Any]) -> None:
        _count("messages")
        channel.send_message(_CountingSocket(sock), message)

    def recv_message(sock: Any) -> dict[str, Any]:
        return channel.recv_message(_CountingSocket(sock))

    continuous.send_message = send_message  # type: ignore[assignment]
    continuous.recv_message = recv_message  # type: ignore[assignment]

    fsync = os.fsync

    def counted_fsync(fd: int) -> None:
        began = time.perf_counter()
        fsync(fd)
        _count("fsyncs")
        _count("fsync_s", time.perf_counter() - began)

    os.fsync = counted_fsync
    gc.callbacks.append(_time_collections)
    _count_calls(os, "link", "files")
    _count_calls(os, "replace", "files")
    _count_calls(storage.LocalStorage, "write_table", "files")
    _count_calls(storage.LocalStorage, "write_bytes_atomic", "files")
    _count_calls(storage.LocalStorage, "create_lazily", "files")  # manifest entries, no fsync
    _patch_kafka()


_collecting: list[float] = []


def _time_collections(phase: str, info: dict[str, int]) -> None:
    """Time the cyclic garbage collector's passes (``gc.callbacks``)."""
    if phase == "start":
        _collecting.append(time.perf_counter())
    elif _collecting:
        _count("gc_s", time.perf_counter() - _collecting.pop())


def _patch_kafka() -> None:
    """Count the Kafka client calls that wait for the broker: every admin client call, and
    the consumer and producer calls the log makes (one call may send a few requests at
    once, e.g. both watermarks of a partition, or one per broker)."""
    from confluent_kafka.admin import AdminClient

    from streamtide.log import kafka_group, kafka_log, kafka_read, kafka_transaction

    for name in ("list_topics", "create_topics", "describe_configs", "delete_records"):
        _count_calls(AdminClient, name, "broker_calls")
    if hasattr(AdminClient, "list_offsets"):
        _count_calls(AdminClient, "list_offsets", "broker_calls")
    for owner, name in (
        (kafka_log.KafkaLog, "_watermarks"),
        (kafka_group.GroupOffsets, "committed"),
        (kafka_group.GroupOffsets, "commit"),
        (kafka_read.PartitionReader, "fetch"),
        (kafka_transaction.KafkaTransaction, "call"),
    ):
        _count_calls(owner, name, "broker_calls")
    for name in ("offsets_for_times", "records_at"):  # engines that have them
        if hasattr(kafka_log.KafkaLog, name):
            _count_calls(kafka_log.KafkaLog, name, "broker_calls")
    if hasattr(kafka_log.KafkaLog, "_list_offsets"):  # its consumer requests (and "high"
        # where a consumer asks for it, not the admin client counted above)
        by_consumer = hasattr(kafka_log.KafkaLog, "_watermark_consumer")
        _count_calls(
            kafka_log.KafkaLog,
            "_list_offsets",
            "broker_calls",
            lambda a, k: by_consumer or a[2] != "high",
        )


def _count_calls(
    owner: Any, name: str, counter: str, when: Callable[[tuple, dict], bool] | None = None
) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def counted(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if when is None or when(args, kwargs):
            _count(counter)
        return result

    setattr(owner, name, counted)
