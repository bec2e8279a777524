"""A partition of a topic in the grouped layout (``file_topic_manifest``).

Its segment files are a ``Partition``'s (``<topic>/<p>/segments``) and so are its reads,
seals, truncations and aborts; only where its manifest entries live differs: in the topic's
groups, shared with the topic's other partitions, instead of a file per entry. A seal or
truncation of one partition is a group of one entry; ``FileLog.seal_many`` seals a stage's
partitions of a topic with one group (``sealing.seal_grouped``).
"""

from __future__ import annotations

import json

from streamtide.log.file_topic_manifest import TopicManifest
from streamtide.log.manifest import PartitionState
from streamtide.log.partition import Partition
from streamtide.log.partition_segments import PartitionSegments
from streamtide.log.shared_segments import SharedSegments
from streamtide.log.storage import LocalStorage


class GroupedPartition(Partition):
    """``<topic>/<number>`` of a grouped topic, its state kept by the topic's manifest."""

    def __init__(
        self,
        storage: LocalStorage,
        topic: str,
        number: int,
        manifest: TopicManifest,
        shared: SharedSegments | None = None,
        topic_id: str | None = None,
    ) -> None:
        PartitionSegments.__init__(self, storage, topic, number, shared)
        self.manifest = manifest
        self.journal = None
        self.topic_id = topic_id

    @property
    def state(self) -> PartitionState:
        return self.manifest.states[self.number]

    @state.setter
    def state(self, value: PartitionState) -> None:
        self.manifest.states[self.number] = value

    @property
    def dropped_shared(self) -> set[str]:
        return self.manifest.dropped_shared

    @dropped_shared.setter
    def dropped_shared(self, value: set[str]) -> None:
        self.manifest.dropped_shared = value

    def refresh(self) -> PartitionState:
        """Apply the groups other writers created since the last refresh (the topic's)."""
        self.manifest.refresh()
        return self.state

    def create_entry(self, data: bytes, *, durable: bool = True, head: bool = True) -> bool:
        """Create a group of this one entry (always durable); False if another writer
        created the topic's next group first."""
        return self.manifest.create([(self.number, json.loads(data))])

    def prev_hash(self) -> None:
        """None: a grouped topic's entries are chained by group, not one by one."""
        return None

    def write_head(self) -> None:
        """Nothing: groups are created durably, so none is lost after its creation."""

    def has_later_entry(self) -> bool:
        return False

    def _maybe_checkpoint(self) -> None:
        """Nothing: the topic's manifest checkpoints all its partitions."""
