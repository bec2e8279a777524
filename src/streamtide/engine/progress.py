"""Per-batch progress reports, kept in memory and in the commit record."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class BatchProgress:
    """What one batch did: records in and out, time, lag and restores per task.

    ``committed_at`` is the epoch ms of its commit; ``partition_lag`` maps
    ``"topic:partition"`` to end offset minus committed offset after the batch;
    ``work_unit_wait_ms`` is the part of ``duration_ms`` the driver waited for work units
    (to start and to reply): the rest is the driver's own work.
    """

    batch: int
    input_records: int = 0
    output_records: int = 0
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
    work_unit_wait_ms: float = 0.0

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
