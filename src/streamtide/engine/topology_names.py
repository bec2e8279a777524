"""The start-time check of a topology's store and internal topic names (see
``processor.resource_names``): generated names refused when the config asks for explicit
ones, lost names refused unless the config allows it, and the names recorded for next time."""

from __future__ import annotations

from streamtide.config import StreamsConfig
from streamtide.engine.app_dir import AppDirectory
from streamtide.errors import TopologyError
from streamtide.processor.resource_names import (
    ResourceNames,
    explicit_naming_error,
    name_change_error,
)
from streamtide.processor.topology import Topology


def check_explicit_names(topology: Topology, config: StreamsConfig) -> None:
    """``ensure_explicit_internal_resource_naming``: TopologyError listing generated names."""
    if config.ensure_explicit_internal_resource_naming:
        problem = explicit_naming_error(ResourceNames.of(topology))
        if problem is not None:
            raise TopologyError(problem)


def check_resource_names(app_dir: AppDirectory, topology: Topology, config: StreamsConfig) -> None:
    """Refuse a topology that lost stores or internal topics the application ran with
    (unless ``allow_topology_name_changes``), then record its names. Needs the driver's
    epoch (the record is written under it)."""
    check_explicit_names(topology, config)
    names = ResourceNames.of(topology)
    recorded = app_dir.read_resource_names()
    if recorded == names:
        return
    if recorded is not None and not config.allow_topology_name_changes:
        problem = name_change_error(config.application_id, recorded, names)
        if problem is not None:
            raise TopologyError(problem)
    app_dir.write_resource_names(names)
