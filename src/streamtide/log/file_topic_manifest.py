"""A topic's manifest in the grouped layout: numbered groups of entries for all its partitions.

Topics this release creates keep their partitions' manifest entries (``manifest``: the same
seal and truncate entries) in numbered **groups** of the topic rather than in one file per
entry and partition. Group ``G`` is ``<topic>/manifest/<G, 20 digits>.json``::

    {"v": 1, "prev": "<hash of group G-1; empty for group 0>",
     "entries": [[partition, {seal or truncate entry}], ...]}

One group seals (or truncates) any number of the topic's partitions, so sealing a stage
writes one file per topic it wrote to, whatever its partitions. Groups are created
exclusively and durably (``LocalStorage.create_exclusive``: written, synced, then linked), so
they are totally ordered, appear whole or not at all, and concurrent writers agree on their
order, as on a partition's entries; a writer that loses a group number re-plans on what
won. Each group names the hash of the group before it, so a replaced, reordered or lost
group raises ``CorruptLogError``, and so does a gap (a later group exists, an earlier one
does not). A group's entries are not chained one by one (the group is), and need no seal
journal: they are durable when the group is.

The state of each partition (``manifest.PartitionState``) is the result of applying the
groups' entries in order; a refresh costs one failed file open when nothing changed, for
the whole topic. A topic checkpoint (``<topic>/checkpoints/<G>.json``) holds every
partition's state after the first ``G`` groups (written every ``checkpoint_every`` groups,
at most every ``MAX_CHECKPOINT_GROUPS``, not synced: the groups stay authoritative).

Topics created by earlier releases keep the per-partition layout (``partition``);
``topic.json`` says which a topic has (``file_topics``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from streamtide.errors import CorruptLogError, LogError, UnsupportedVersionError
from streamtide.log.manifest import PartitionState, checked, entry_hash, entry_name
from streamtide.log.partition_segments import delete_dropped
from streamtide.log.storage import LocalStorage

GROUP_VERSION = 1
#: The directories of a grouped topic's groups and checkpoints (never a partition number).
GROUPS_DIR = "manifest"
CHECKPOINTS_DIR = "checkpoints"
#: Groups between topic checkpoints at most: opening a topic reads at most this many.
MAX_CHECKPOINT_GROUPS = 64
_KEEP_CHECKPOINTS = 2

#: An entry of a group: the partition and the entry's fields.
GroupEntry = tuple[int, dict[str, Any]]


class TopicManifest:
    """The groups of one grouped topic and the state of each of its partitions they make.
    Not thread-safe: ``FileLog`` serialises calls."""

    def __init__(
        self, storage: LocalStorage, topic: str, partitions: int, checkpoint_every: int
    ) -> None:
        self.storage = storage
        self.topic = topic
        self.states = [PartitionState() for _ in range(partitions)]
        self.next_group = 0
        self.last_hash = ""
        #: shared files a truncation applied here dropped slices of (``FileLog`` deletes
        #: them once no partition holds a slice of them)
        self.dropped_shared: set[str] = set()
        self._groups = f"{topic}/{GROUPS_DIR}"
        self._checkpoints = f"{topic}/{CHECKPOINTS_DIR}"
        self._checkpoint_every = min(checkpoint_every, MAX_CHECKPOINT_GROUPS)
        self._checkpointed_at = 0
        self._load()
        self.refresh()
        self._check_no_gap()

    def refresh(self) -> None:
        """Apply the groups other writers created since the last refresh."""
        while True:
            rel = f"{self._groups}/{entry_name(self.next_group)}"
            try:
                data = self.storage.read_bytes(rel)
            except FileNotFoundError:
                break
            self._apply(data, self.storage.path(rel))
        self._maybe_checkpoint()

    def create(self, entries: Sequence[GroupEntry]) -> bool:
        """Create the next group of ``entries`` (planned on the states as they are now),
        durably, and apply it; False if another writer created that group first (then
        refresh and plan again)."""
        items = [list(e) for e in entries]
        group = {"v": GROUP_VERSION, "prev": self.last_hash, "entries": items}
        data = json.dumps(group, separators=(",", ":")).encode()
        rel = f"{self._groups}/{entry_name(self.next_group)}"
        if not self.storage.create_exclusive(rel, data):
            return False
        self._apply_entries(items, self.storage.path(rel))
        self.last_hash = entry_hash(data)
        self.next_group += 1
        self._maybe_checkpoint()
        return True

    def _apply(self, data: bytes, where: str) -> None:
        try:
            group = json.loads(data)
        except ValueError as e:
            raise CorruptLogError(f"corrupt manifest group {where}: {e}") from None
        if not isinstance(group, dict):
            raise CorruptLogError(f"corrupt manifest group {where}: not a JSON object")
        version = group.get("v")
        if not isinstance(version, int) or version > GROUP_VERSION:
            raise UnsupportedVersionError(
                f"manifest group {where} has format version {version!r}; this release reads up "
                f"to {GROUP_VERSION}"
            )
        if group.get("prev") != self.last_hash:
            raise CorruptLogError(
                f"corrupt manifest of topic {self.topic!r}: group {where} does not follow the "
                "group before it (a group was replaced, reordered or lost)"
            )
        entries = group.get("entries")
        if not isinstance(entries, list):
            raise CorruptLogError(f"corrupt manifest group {where}: it has no entries")
        self._apply_entries(entries, where)
        self.last_hash = entry_hash(data)
        self.next_group += 1

    def _apply_entries(self, entries: list[Any], where: str) -> None:
        for item in entries:
            try:
                partition, fields = item
                state = self.states[partition] if partition >= 0 else None
            except (TypeError, ValueError, IndexError):
                state = None
            if state is None or isinstance(partition, bool):
                raise CorruptLogError(
                    f"corrupt manifest group {where}: {item!r} is not an entry of a partition of "
                    f"topic {self.topic!r}"
                )
            at = f"{where} (partition {partition})"
            self._delete_segments(partition, state.apply_fields(checked(fields, at), at))

    def _delete_segments(self, partition: int, names: list[str]) -> None:
        segments = f"{self.topic}/{partition}/segments"
        delete_dropped(self.storage, segments, names, self.dropped_shared)

    def _check_no_gap(self) -> None:
        later = f"{self._groups}/{entry_name(self.next_group + 1)}"
        if self.storage.exists(later):
            self.refresh()  # the missing one may have been created just now
            if self.storage.exists(f"{self._groups}/{entry_name(self.next_group + 1)}"):
                missing = self.storage.path(f"{self._groups}/{entry_name(self.next_group)}")
                raise CorruptLogError(
                    f"manifest of topic {self.topic!r} has a gap: group {missing} is missing, "
                    "later groups exist"
                )

    # -- checkpoints -------------------------------------------------------------------------

    def _load(self) -> None:
        numbers = (_number(i.base_name) for i in self.storage.list_dir(self._checkpoints))
        for n in sorted((n for n in numbers if n is not None), reverse=True):
            rel = f"{self._checkpoints}/{entry_name(n)}"
            try:
                self._restore(self.storage.read_bytes(rel), self.storage.path(rel))
                return
            except (FileNotFoundError, LogError, UnsupportedVersionError):
                continue  # removed meanwhile, or damaged: fall back to an older one

    def _restore(self, data: bytes, where: str) -> None:
        try:
            raw = json.loads(data)
            if raw.get("v") != GROUP_VERSION:
                raise UnsupportedVersionError(f"topic checkpoint {where}: version {raw.get('v')}")
            states = [PartitionState() for _ in self.states]
            for key, fields in raw["partitions"].items():
                states[int(key)] = PartitionState.from_checkpoint_fields(
                    checked(fields, where), where
                )
            next_group, last_hash = int(raw["next_group"]), str(raw["last_hash"])
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise CorruptLogError(f"corrupt topic checkpoint {where}: {e}") from None
        self.states, self.next_group, self.last_hash = states, next_group, last_hash
        self._checkpointed_at = next_group

    def _maybe_checkpoint(self) -> None:
        if self.next_group - self._checkpointed_at < self._checkpoint_every:
            return
        body = {
            "v": GROUP_VERSION,
            "next_group": self.next_group,
            "last_hash": self.last_hash,
            "partitions": {
                str(p): st.checkpoint_fields() for p, st in enumerate(self.states) if st.next_entry
            },
        }
        try:
            rel = f"{self._checkpoints}/{entry_name(self.next_group)}"
            # not synced: the groups stay authoritative (durable), and a checkpoint lost or
            # left empty by a power loss only means opening from an older one
            self.storage.write_bytes_atomic(rel, json.dumps(body).encode(), durable=False)
            self._checkpointed_at = self.next_group
            infos = self.storage.list_dir(self._checkpoints)
            numbers = sorted(n for i in infos if (n := _number(i.base_name)) is not None)
            for n in numbers[:-_KEEP_CHECKPOINTS]:
                self.storage.delete_file(f"{self._checkpoints}/{entry_name(n)}")
        except OSError:
            pass  # checkpoints only speed up opening; the groups stay authoritative


def _number(name: str) -> int | None:
    stem, _, ext = name.partition(".")
    return int(stem) if ext == "json" and len(stem) == 20 and stem.isdigit() else None
