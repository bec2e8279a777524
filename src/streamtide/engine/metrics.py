"""The application's Prometheus metrics: aggregated on the driver from the task reports.

Executors send their per-batch counters with every task report (``work_unit``); the driver
adds the reports of the attempts it commits (never those of a failed or retried attempt) into
one registry per application, serves it over HTTP while the application runs, and offers it
as a dict (``StreamsApp.metrics()``). docs/metrics.md lists every family.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from streamtide.engine.protocol import TaskReport, UnitReport
from streamtide.errors import ConfigError
from streamtide.processor import drops
from streamtide.processor.api import PunctuationType
from streamtide.task_id import TaskId

#: Batch and commit durations range from tens of milliseconds to minutes (a catch-up).
_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
_PUNCTUATIONS = "punctuations."
_RESTORED = "records-restored."
#: Repeats a deduplication operator dropped (its purpose, not a drop: docs/metrics.md).
_DUPLICATES = "dropped-duplicates"


class AppMetrics:
    """Counters, gauges and histograms of one application, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.consumed = Counter(
            "streamtide_records_consumed",
            "Records read from source topics by committed tasks.",
            ["topic", "partition"],
            registry=r,
        )
        self.produced = Counter(
            "streamtide_records_produced",
            "Records written to output and repartition topics by committed tasks.",
            ["topic"],
            registry=r,
        )
        self.lag = Gauge(
            "streamtide_records_lag",
            "End offset minus committed offset of each source partition, after the last batch.",
            ["topic", "partition"],
            registry=r,
        )
        self.batch_duration = Histogram(
            "streamtide_batch_duration_seconds",
            "Wall time of each committed batch on the driver.",
            buckets=_BUCKETS,
            registry=r,
        )
        self.driver_duration = Histogram(
            "streamtide_batch_driver_seconds",
            "The driver's own wall time of each committed batch: its wall time minus the time "
            "it waited for work units to start and reply.",
            buckets=_BUCKETS,
            registry=r,
        )
        self.commit_duration = Histogram(
            "streamtide_commit_duration_seconds",
            "Wall time of each batch's commit: sealing its stages and writing its commit record.",
            buckets=_BUCKETS,
            registry=r,
        )
        self.dropped = Counter(
            "streamtide_records_dropped",
            "Records dropped by tasks, by reason (see streamtide.processor.drops).",
            ["task", "reason"],
            registry=r,
        )
        self.punctuations = Counter(
            "streamtide_punctuations",
            "Punctuator calls, by task and punctuation type.",
            ["task", "type"],
            registry=r,
        )
        self.restored = Counter(
            "streamtide_state_restored_records",
            "Changelog records applied to active tasks' stores before processing.",
            ["store"],
            registry=r,
        )
        self.standby_lag = Gauge(
            "streamtide_standby_lag_records",
            "Changelog records a standby replica is behind, after its last update.",
            ["task"],
            registry=r,
        )
        self.duplicates = Counter(
            "streamtide_dropped_duplicates",
            "Repeats dropped by deduplication operators (not counted as dropped records).",
            ["task"],
            registry=r,
        )
        self.task_moves = Counter(
            "streamtide_task_moves",
            "Active tasks that ran on another executor than in the batch before.",
            registry=r,
        )
        self._owners: dict[str, str] = {}

    # ---- recording -----------------------------------------------------------------------

    def declare(
        self, tasks: Iterable[str], stores: Iterable[str], standby_tasks: Iterable[str]
    ) -> None:
        """Export every per-task and per-store series at 0 from the start, so dashboards show
        0 rather than no data until something happens: drops (every reason), punctuations
        (both types) and dropped duplicates of ``tasks``, restores of the changelogged
        ``stores``, and the standby lag of ``standby_tasks`` (the tasks that get standbys)."""
        for task in tasks:
            for reason in drops.REASONS:
                self.dropped.labels(task=task, reason=reason)
            for kind in PunctuationType:
                self.punctuations.labels(task=task, type=kind.value)
            self.duplicates.labels(task=task)
        for store in stores:
            self.restored.labels(store=store)
        for task in standby_tasks:
            self.standby_lag.labels(task=task)

    def record_stage(
        self,
        ranges: Mapping[str, Mapping[str, Sequence[int]]],
        units: Iterable[UnitReport],
        changelogs: set[str],
    ) -> None:
        """Add one committed stage: its input ``ranges`` per task and its work-unit reports."""
        for task, topics in ranges.items():
            partition = str(TaskId.parse(task).partition)
            for topic, (start, end) in topics.items():
                if end > start:
                    self.consumed.labels(topic=topic, partition=partition).inc(end - start)
        for unit in units:
            for result in unit.tasks:
                self._record_task(result, changelogs)
            for task, standby in unit.standbys.items():
                if standby.get("lag") is not None:
                    self.standby_lag.labels(task=task).set(standby["lag"])

    def _record_task(self, result: TaskReport, changelogs: set[str]) -> None:
        task = result.task
        for topic, count in result.output_records.items():
            if topic not in changelogs and count:
                self.produced.labels(topic=topic).inc(count)
        for name, count in result.metrics.items():
            if not count:
                continue
            if name.startswith(drops.PREFIX):
                self.dropped.labels(task=task, reason=name[len(drops.PREFIX) :]).inc(count)
            elif name.startswith(_PUNCTUATIONS):
                self.punctuations.labels(task=task, type=name[len(_PUNCTUATIONS) :]).inc(count)
            elif name.startswith(_RESTORED):
                self.restored.labels(store=name[len(_RESTORED) :]).inc(count)
            elif name == _DUPLICATES:
                self.duplicates.labels(task=task).inc(count)

    def record_batch(
        self,
        duration_s: float,
        commit_s: float,
        lags: Mapping[tuple[str, int], int],
        owners: Mapping[str, str],
        driver_s: float | None = None,
    ) -> None:
        """Add one committed batch: its durations, the lag it left, where its tasks ran."""
        self.batch_duration.observe(duration_s)
        self.driver_duration.observe(duration_s if driver_s is None else driver_s)
        self.commit_duration.observe(commit_s)
        for (topic, partition), lag in lags.items():
            self.lag.labels(topic=topic, partition=str(partition)).set(lag)
        moved = sum(1 for t, c in owners.items() if t in self._owners and self._owners[t] != c)
        if moved:
            self.task_moves.inc(moved)
        self._owners.update(owners)

    def remember_owners(self, owners: Mapping[str, str]) -> None:
        """Where tasks ran before this driver started (from the last commit record)."""
        self._owners.update(owners)

    # ---- reading -------------------------------------------------------------------------

    def as_dict(self) -> dict[str, float]:
        """Every sample, keyed by its name and labels in Prometheus text form."""
        out: dict[str, float] = {}
        for family in self.registry.collect():
            for sample in family.samples:
                if sample.name.endswith("_created"):
                    continue
                out[sample_key(sample.name, sample.labels)] = float(sample.value)
        return out


def sample_key(name: str, labels: Mapping[str, str]) -> str:
    """``name{a="1",b="x"}`` with labels sorted by name, as Prometheus writes them."""
    if not labels:
        return name
    escaped = (f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{','.join(escaped)}}}"


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class MetricsServer:
    """Serves a registry as Prometheus text on ``http://<address>:<port>/metrics``
    (``address`` is loopback unless configured otherwise: ``metrics_bind_address``)."""

    def __init__(self, registry: CollectorRegistry, port: int, address: str = "127.0.0.1") -> None:
        from prometheus_client import start_http_server

        shown = f"[{address}]" if ":" in address else address
        try:
            self._server, self._thread = start_http_server(port, addr=address, registry=registry)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {shown}:{port}: {exc}") from exc
        self.address = address
        self.port: int = self._server.server_port

    @property
    def url(self) -> str:
        """Where to reach the endpoint from this host (loopback for a wildcard address)."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.address, self.address)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
