"""Durable state for the engine's work unit, configured from ``StreamsConfig``.

``make_task_stores`` has the signature ``runtime.work_unit`` expects of its
``stores_factory``: it returns the ``TaskStores`` of one task over the log, which the
work unit opens for an active task or, wrapped in a ``StandbyTask``, for a standby or warm-up
task.
"""

from __future__ import annotations

from streamtide.config import StreamsConfig
from streamtide.log.api import Log
from streamtide.processor.topology import Topology
from streamtide.runtime.task_stores import TaskStores


def make_task_stores(
    *,
    topology: Topology,
    config: StreamsConfig,
    log: Log,
    store_names: list[str],
    batch: int = -1,
) -> TaskStores:
    """The stores of one task in one work unit (see the module docstring)."""
    return TaskStores(
        topology, store_names, log, snapshot_interval=config.snapshot_interval, batch=batch
    )
