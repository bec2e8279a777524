"""Counts of what a batch writes, for the benchmarks only: fsyncs (and their time), segment
files (a partition's own or one shared by many) and bytes, manifest entries, seal journal
records, log and store checkpoints, application-directory records, RocksDB write batches and
WAL syncs, Kafka commits (of a task, or of a work unit's tasks), producers created,
transactions committed, offset sends and offset reads, and control-channel messages.

Nothing in the product changes: ``install`` wraps ``os.fsync`` and a few functions of the
file log, the stores and the control channel in the process it runs in. The driver's process
installs it directly; Spark's Python workers install it in the daemon they are forked from
(``bench/counted_daemon.py``, named by ``spark.python.daemon.module``), so the work units'
writes are counted too. Each process counts into a small memory-mapped file of its own in
one directory; ``read_counts`` sums them all, so a benchmark takes a snapshot before and after
the batches it measures. A name the release no longer has is skipped (its count stays 0).

    counts = IOCounts.start(directory)           # in the benchmark's process, before Spark
    ... batches ...
    before = counts.read(); ...; after = counts.read()
"""

from __future__ import annotations

import functools
import mmap
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The environment variable naming the counts directory (inherited by Spark's workers).
ENV = "STREAMTIDE_BENCH_IO_COUNTS"
NAMES = (
    "fsync",
    "fsync_us",
    "fsync.segment",
    "fsync.manifest",
    "fsync.log_checkpoint",
    "fsync.store_checkpoint",
    "fsync.app_dir",
    "fsync.seal_journal",
    "fsync.directory",
    "fsync.other",
    "segment_files",
    "segment_bytes",
    "manifest_entries",
    "seal_journal_records",
    "head_writes",
    "log_checkpoints",
    "store_checkpoints",
    "app_dir_records",
    "rocksdb_write_batches",
    "rocksdb_puts",
    "rocksdb_wal_syncs",
    "kafka_task_commits",
    "kafka_producers",
    "kafka_transactions",
    "kafka_offset_sends",
    "kafka_offset_fetches",
    "messages_sent",
    "messages_received",
)
_SLOT = {name: index for index, name in enumerate(NAMES)}


class _Counters:
    """This process's counters, in a memory-mapped file named after its pid (forked workers
    open their own on first use)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._pid = -1
        self._view: Any = None

    def add(self, name: str, amount: int = 1) -> None:
        if self._pid != os.getpid():
            self._open()
        self._view[_SLOT[name]] += amount

    def _open(self) -> None:
        self._pid = os.getpid()
        path = self.directory / f"{self._pid}.counts"
        with open(path, "wb") as handle:
            handle.write(b"\0" * (8 * len(NAMES)))
        fd = os.open(path, os.O_RDWR)
        try:
            self._map = mmap.mmap(fd, 8 * len(NAMES))
        finally:
            os.close(fd)
        self._view = memoryview(self._map).cast("q")


def read_counts(directory: str | Path) -> dict[str, int]:
    """The counters of every process that counted into ``directory``, summed."""
    totals = dict.fromkeys(NAMES, 0)
    for path in Path(directory).glob("*.counts"):
        data = memoryview(path.read_bytes()).cast("q")
        for name, index in _SLOT.items():
            if index < len(data):
                totals[name] += data[index]
    return totals


def difference(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {name: after.get(name, 0) - before.get(name, 0) for name in NAMES}


class IOCounts:
    """Counting switched on for this process and (through the environment and the daemon
    module) for the Spark workers started after it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def start(cls, directory: str | Path) -> IOCounts:
        """Count into ``directory`` here and in Spark workers launched later (call before the
        SparkSession starts); ``spark_conf()`` gives the settings the session needs."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        os.environ[ENV] = str(path)
        root = str(Path(__file__).resolve().parent.parent)
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
        install(path)
        return cls(path)

    @staticmethod
    def spark_conf() -> dict[str, str]:
        """The session settings that make Spark's Python workers count too."""
        return {"spark.python.daemon.module": "bench.counted_daemon"}

    def read(self) -> dict[str, int]:
        return read_counts(self.directory)


_INSTALLED: _Counters | None = None


def install_from_env() -> None:
    """Install counting if the environment names a counts directory (Spark's workers)."""
    directory = os.environ.get(ENV)
    if directory:
        install(Path(directory))


def install(directory: Path) -> None:
    """Wrap the counted functions in this process (once)."""
    global _INSTALLED
    if _INSTALLED is not None:
        return
    counters = _INSTALLED = _Counters(directory)
    # the modules whose functions are wrapped, imported now so that forked workers inherit
    # the wrapped versions
    for module in (
        "streamtide.files",
        "streamtide.log.storage",
        "streamtide.state.rocksdb",
        "streamtide.state.checkpoint",
        "streamtide.engine.channel",
        "streamtide.engine.app_dir",
        "streamtide.engine.continuous",
        "streamtide.engine.worker",
        "streamtide.runtime.kafka_task_commit",
        "streamtide.runtime.kafka_unit_commit",
        "streamtide.log.kafka_transaction",
        "streamtide.log.kafka_group",
    ):
        try:
            __import__(module)
        except ImportError:
            continue
    original_fsync = os.fsync

    def fsync(fd: Any) -> None:
        began = time.perf_counter()
        try:
            original_fsync(fd)
        finally:
            counters.add("fsync")
            counters.add("fsync_us", int((time.perf_counter() - began) * 1e6))
            counters.add(_fsync_kind(fd))

    os.fsync = fsync  # type: ignore[assignment]
    storage = sys.modules.get("streamtide.log.storage")
    cls = getattr(storage, "LocalStorage", None)
    if cls is not None:
        # every segment file (a partition's own or a shared one) is written by write_batches
        # (by write_table in releases before shared files)
        written = "write_batches" if hasattr(cls, "write_batches") else "write_table"
        _wrap_method(cls, written, _after(counters, _segment_written))
        _wrap_method(cls, "create_exclusive", _after(counters, _log_file_created))
        _wrap_method(cls, "create_lazily", _after(counters, _log_file_created))
        _wrap_method(cls, "write_bytes_atomic", _after(counters, _log_file_replaced))
    files = sys.modules.get("streamtide.files")
    for name in ("write_atomically", "create_exclusively"):
        original = getattr(files, name, None)
        if original is not None:
            _replace_everywhere(original, _wrap(original, _after(counters, _small_file_written)))
    rocksdb = sys.modules.get("streamtide.state.rocksdb")
    store = getattr(rocksdb, "RocksDBKeyValueBytesStore", None)
    if store is not None:
        _wrap_method(store, "put_all", _count(counters, "rocksdb_write_batches"))
        _wrap_method(store, "put", _count(counters, "rocksdb_puts"))
        _wrap_method(store, "sync", _count(counters, "rocksdb_wal_syncs"))
    kafka = sys.modules.get("streamtide.runtime.kafka_task_commit")
    task_commit = getattr(kafka, "KafkaTaskCommit", None)
    if task_commit is not None and hasattr(task_commit, "commit"):
        _wrap_method(task_commit, "commit", _count(counters, "kafka_task_commits"))
    unit = sys.modules.get("streamtide.runtime.kafka_unit_commit")
    unit_commit = getattr(unit, "KafkaUnitCommit", None)
    if unit_commit is not None:  # one commit of a work unit: every task it ran
        _wrap_method(unit_commit, "commit", _count(counters, "kafka_task_commits"))
    transaction = getattr(
        sys.modules.get("streamtide.log.kafka_transaction"), "KafkaTransaction", None
    )
    if transaction is not None:  # the driver's fencing transactions count too
        _wrap_method(transaction, "__init__", _count(counters, "kafka_producers"))
        _wrap_method(transaction, "commit", _count(counters, "kafka_transactions"))
        _wrap_method(transaction, "send_offsets", _count(counters, "kafka_offset_sends"))
    group = getattr(sys.modules.get("streamtide.log.kafka_group"), "GroupOffsets", None)
    if group is not None:
        _wrap_method(group, "committed", _count(counters, "kafka_offset_fetches"))
    channel = sys.modules.get("streamtide.engine.channel")
    for name, counter in (("send_message", "messages_sent"), ("recv_message", "messages_received")):
        original = getattr(channel, name, None)
        if original is not None:
            _replace_everywhere(original, _wrap(original, _count(counters, counter)))


# ---- what a call counts as ----------------------------------------------------------------

Hook = Callable[[tuple[Any, ...]], None]


def _fsync_kind(fd: Any) -> str:
    try:
        number = fd if isinstance(fd, int) else fd.fileno()
        path = os.readlink(f"/proc/self/fd/{number}")
    except (OSError, AttributeError, ValueError):
        return "fsync.other"
    if os.path.isdir(path):
        return "fsync.directory"
    for part, kind in (
        ("/segments/", "fsync.segment"),
        ("/.shared/", "fsync.segment"),
        ("/manifest/", "fsync.manifest"),
        ("/.seals/", "fsync.seal_journal"),
        ("/checkpoints/", "fsync.log_checkpoint"),
        (".checkpoint.json", "fsync.store_checkpoint"),
        ("/_apps/", "fsync.app_dir"),
    ):
        if part in path:
            return kind
    return "fsync.other"


def _segment_written(counters: _Counters, args: tuple[Any, ...]) -> None:
    storage, rel = args[0], args[1]
    counters.add("segment_files")
    try:
        counters.add("segment_bytes", os.path.getsize(storage.path(rel)))
    except OSError:
        pass


def _log_file_created(counters: _Counters, args: tuple[Any, ...]) -> None:
    rel = str(args[1])
    counters.add("manifest_entries" if "/manifest/" in rel else "head_writes")


def _log_file_replaced(counters: _Counters, args: tuple[Any, ...]) -> None:
    rel = str(args[1])
    if "/checkpoints/" in rel:
        counters.add("log_checkpoints")
    else:
        counters.add("seal_journal_records" if rel.startswith(".seals/") else "head_writes")


def _small_file_written(counters: _Counters, args: tuple[Any, ...]) -> None:
    path = str(args[0])
    counters.add("store_checkpoints" if path.endswith(".checkpoint.json") else "app_dir_records")


# ---- wrapping ----------------------------------------------------------------------------


def _after(counters: _Counters, hook: Callable[[_Counters, tuple[Any, ...]], None]) -> Hook:
    return lambda args: hook(counters, args)


def _count(counters: _Counters, name: str) -> Hook:
    return lambda args: counters.add(name)


def _wrap(original: Callable[..., Any], hook: Hook) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        hook(args)
        return result

    return wrapper


def _wrap_method(cls: type, name: str, hook: Hook) -> None:
    original = cls.__dict__.get(name)
    if original is not None:
        setattr(cls, name, _wrap(original, hook))


def _replace_everywhere(original: Callable[..., Any], wrapper: Callable[..., Any]) -> None:
    """Point every loaded Streamtide module's reference to ``original`` at ``wrapper``
    (modules that imported the function by name hold their own reference)."""
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith("streamtide"):
            continue
        for attribute, value in list(vars(module).items()):
            if value is original:
                setattr(module, attribute, wrapper)
