"""Durable state for the engine's work unit, configured from ``StreamsConfig``.

``make_state_manager`` has the signature ``runtime.work_unit`` expects of its
``state_manager_factory``: it returns a deferred (exactly-once) ``DurableTaskStateManager`` for
an active task, which additionally knows how to bring the task's standby replica up to date
(``update_standby``) when the slot holds the task as a standby instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamtide.config import StreamsConfig
from streamtide.log.api import Log
from streamtide.processor.topology import Topology
from streamtide.runtime.durable_state import DurableTaskStateManager
from streamtide.runtime.restore import RECORDS_RESTORED, STANDBY_LAG
from streamtide.runtime.standby import StandbyTask


class WorkUnitStateManager(DurableTaskStateManager):
    """A deferred durable state manager that also remembers which task and directory it is
    for, so the same factory serves standby slots."""

    def __init__(
        self,
        topology: Topology,
        store_names: list[str],
        log_: Log,
        *,
        config: StreamsConfig,
        task_id: str,
        state_dir: Path,
        **options: Any,
    ) -> None:
        super().__init__(topology, store_names, log_, **options)
        self.config = config
        self.task_id = task_id
        self.state_root = Path(state_dir)

    def update_standby(self) -> dict[str, Any]:
        """Open the task's standby stores, apply the committed changelog, close them; returns
        the local offsets and what it did (for the driver's lag bookkeeping)."""
        subtopology, partition = (int(part) for part in self.task_id.split("_"))
        standby = StandbyTask(
            self.topology,
            subtopology,
            partition,
            self.log,
            application_id=self.config.application_id,
            state_dir=self.state_root,
            default_key_serde=self.config.default_key_serde,
            default_value_serde=self.config.default_value_serde,
            snapshots=self.snapshots,
        )
        try:
            standby.initialize()
            applied = standby.catch_up()
            return {
                "local_offsets": standby.local_offsets(),
                "offset_sum": standby.offset_sum(),
                "applied": applied,
                "lag": standby.metrics.get(STANDBY_LAG),
                "restored_records": standby.metrics.get(RECORDS_RESTORED),
            }
        finally:
            standby.close()


def make_state_manager(
    *,
    topology: Topology,
    config: StreamsConfig,
    log: Log,
    task_id: str,
    store_names: list[str],
    state_dir: Path | str,
    batch: int = -1,
) -> WorkUnitStateManager:
    """The state manager of one task in one work unit (see the module docstring)."""
    return WorkUnitStateManager(
        topology,
        store_names,
        log,
        config=config,
        task_id=task_id,
        state_dir=Path(state_dir),
        snapshot_interval=config.snapshot_interval,
        batch=batch,
    )
