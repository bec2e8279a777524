"""Per-batch progress reports, kept in memory and in the commit record."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

#: Where a batch's time goes (``BatchProgress.phases_ms``). The driver's phases are wall time
#: on the driver and add up to about the batch's duration; the ``task.*`` phases are summed over
#: the batch's tasks, which run in parallel on the executor slots.
PHASES = {
    "plan": "driver: assignment, global table ends, fixing and recording the input ranges",
    "run": "driver: sending the work units their runs until the last one reported",
    "seal": "driver: the prepare record, sealing the segments, the seal record",
    "commit": "driver: assignment records and the batch's commit record",
    "unit.longest": "the longest work unit's run, as it measured it ('run' minus this: "
    "messaging and Spark's part)",
    "unit.settle": "work units applying the previous batch's sealed writes to their stores "
    "(continuous execution; before this batch's run)",
    "task.restore": "tasks: opening stores and restoring them (summed over tasks)",
    "task.read": "tasks: reading the input ranges",
    "task.process": "tasks: processing and punctuating",
    "task.commit": "tasks: the stores' commit (write buffers to changelog records)",
    "task.write": "tasks: writing outputs and changelogs as segments, fsyncs included (on "
    "Kafka: the task's transaction)",
    "task.close": "tasks: closing stores (micro-batch execution)",
}


@dataclass
class BatchProgress:
    """What one batch did: records in and out, time, lag and restores per task.

    ``committed_at`` is the epoch ms of its commit; ``partition_lag`` maps
    ``"topic:partition"`` to end offset minus committed offset after the batch;
    ``phases_ms`` says where the batch's time went (``PHASES``).
    """

    batch: int
    input_records: int = 0
    output_records: int = 0
    #: records written to the stores' changelog topics (not counted in ``output_records``)
    changelog_records: int = 0
    duration_ms: float = 0.0
    restored_records: int = 0
    lag: dict[str, int] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)
    ran_on: dict[str, str] = field(default_factory=dict)
    restored_by_task: dict[str, int] = field(default_factory=dict)
    restore_ms_by_task: dict[str, int] = field(default_factory=dict)
    standbys: dict[str, list[str]] = field(default_factory=dict)
    stage_ms: list[float] = field(default_factory=list)
    resumed: bool = False
    commit_ms: float = 0.0
    committed_at: int = 0
    partition_lag: dict[str, int] = field(default_factory=dict)
    phases_ms: dict[str, float] = field(default_factory=dict)

    def add_phase(self, phase: str, ms: float) -> None:
        """Add ``ms`` to ``phase`` (a key of ``PHASES``)."""
        self.phases_ms[phase] = round(self.phases_ms.get(phase, 0.0) + ms, 3)

    def add_work_unit_reports(self, reports: Iterable[Mapping[str, Any]]) -> None:
        """Add the phases the work units of one stage reported: each task's, summed over the
        tasks (``task.*``), the longest work unit's run and the slots' settling."""
        longest = 0.0
        for report in reports:
            longest = max(longest, float(report.get("duration_ms", 0.0)))
            self.add_phase("unit.settle", float(report.get("settle_ms", 0.0)))
            for task in report.get("tasks", ()):
                for phase, ms in (task.get("phases_ms") or {}).items():
                    self.add_phase(f"task.{phase}", float(ms))
        self.add_phase("unit.longest", longest)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchProgress:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def total_lag(self) -> int:
        return sum(self.lag.values())

    def summary(self) -> str:
        return (
            f"batch {self.batch}: {self.input_records} in, {self.output_records} out, "
            f"{self.duration_ms:.0f} ms, lag {self.total_lag}, restored {self.restored_records}"
        )


@dataclass
class RunningBatch:
    """What the driver knows about the batch it is running: the records it planned (input
    ranges fixed so far) and those of the stages already committed."""

    batch: int
    started: float  # time.monotonic() when the batch began
    stages: int
    stages_done: int = 0
    planned_records: int = 0
    records_done: int = 0
    restore_planned: int = 0  # an upper bound: snapshots can shorten a restore
    restored_done: int = 0
