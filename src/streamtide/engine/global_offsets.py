"""Which offsets of the global tables' topics a batch reads: fixed once per batch.

When a batch starts, the driver records the current end offset of every partition of every
global table's topic (a ``GlobalOffsetsRecord`` in the batch's directory), or reads the record
a previous attempt of the same batch wrote (a retry, a restarted driver). Every work unit of
the batch brings its worker's global stores to exactly those offsets before its tasks run, so
a retried batch sees the same tables as the first attempt did.
"""

from __future__ import annotations

from streamtide.engine.app_dir import AppDirectory
from streamtide.engine.protocol import GlobalOffsetsRecord
from streamtide.log.api import Log
from streamtide.processor.topology import Topology


def global_ends(
    app_dir: AppDirectory, log_: Log, topology: Topology, application_id: str, batch: int
) -> dict[str, list[int]]:
    """The global topics' end offsets for ``batch`` (topic -> end per partition), recorded
    the first time they are asked for; empty when the topology has no global table."""
    if not topology.global_stores:
        return {}
    found = app_dir.read_global_offsets(batch)
    if found is not None:
        return found.ends
    topics = sorted({topology.resolve_topic(t, application_id) for t in topology.global_topics()})
    ends = {t: [log_.end_offset(t, p) for p in range(log_.partitions(t))] for t in topics}
    assert app_dir.epoch is not None
    return app_dir.create_global_offsets(GlobalOffsetsRecord(batch, app_dir.epoch, ends)).ends
