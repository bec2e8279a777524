"""The file log's topics: their metadata files and the cached handles of their partitions.

``<topic>/topic.json`` names a topic and its partition count and is created exclusively; each
topic gets a random id, so a topic deleted and re-created (by any process) is told from the
old one. It also names the topic's manifest layout: ``"manifest": "grouped"`` for topics this
release creates (their entries in groups of the topic: ``file_topic_manifest``), none for
topics of earlier releases (an entry file per partition and entry: ``partition``); each keeps
its layout for its life. ``FileTopics`` is the base of ``FileLog``: it owns the storage root,
the caches and their lock, and checks topic names and partition numbers; ``FileLog`` adds
reading, writing, sealing and upkeep.

Topic metadata is cached per handle. Writes re-read it first (``_partition(verify=True)``),
so they never land in a topic that another process deleted or re-created.
``list_topics``/``has_topic``/``describe_topic`` always read the disk.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping

from streamtide.log.api import TOPIC_RE, Log, TopicDescription, check_new_topic
from streamtide.log.errors import (
    CorruptLogError,
    LogClosedError,
    LogError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from streamtide.log.file_topic_manifest import CHECKPOINTS_DIR, GROUPS_DIR, TopicManifest
from streamtide.log.partition import SUBDIRS, Partition
from streamtide.log.partition_grouped import GroupedPartition
from streamtide.log.seal_journal import SealJournal
from streamtide.log.shared_segments import SharedSegments
from streamtide.log.storage import TMP_PREFIX, LocalStorage

_TOPIC_FILE = "topic.json"
#: ``topic.json``'s value for the grouped layout (``file_topic_manifest``).
GROUPED = "grouped"
#: Entry 0 of every partition manifest of a grouped topic: a version earlier releases refuse
#: to read, so that they do not take the topic for empty.
_GROUPED_MARKER = b'{"v":4,"kind":"grouped","note":"entries are in the topic\'s manifest groups"}'


class FileTopics(Log):
    """Topics and partition handles under a local root (the base of ``FileLog``).
    ``grouped_manifests=False`` creates topics in the per-partition layout of earlier
    releases (for logs that those releases share); existing topics keep theirs."""

    def __init__(
        self,
        root: str,
        *,
        fsync: bool = True,
        checkpoint_every: int = 256,
        grouped_manifests: bool = True,
    ) -> None:
        if checkpoint_every < 1:
            raise ValueError("checkpoint_every must be at least 1")
        self._storage = LocalStorage(root, fsync=fsync)
        self._shared = SharedSegments(self._storage)
        self._journal = SealJournal(self._storage)
        self._checkpoint_every = checkpoint_every
        self._grouped_manifests = grouped_manifests
        self._lock = threading.RLock()
        self._partition_counts: dict[str, int] = {}
        self._topic_ids: dict[str, str | None] = {}
        self._manifests: dict[str, TopicManifest | None] = {}  # None: per-partition layout
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._closed = False

    @property
    def root(self) -> str:
        """The absolute root directory."""
        return self._storage.root

    @property
    def url(self) -> str:
        return f"file://{self.root}"

    # -- topics ------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        *,
        exist_ok: bool = False,
        configs: Mapping[str, str] | None = None,
    ) -> TopicDescription:
        """See ``Log.create_topic``; ``configs`` (Kafka topic settings) do not apply here."""
        self._check_open()
        check_new_topic(name, partitions)
        meta = f"{name}/{_TOPIC_FILE}"
        with self._lock:
            created = False
            grouped = self._grouped_manifests
            if not self._storage.exists(meta):
                self._make_dirs(name, partitions, grouped)
                data = {
                    "v": 1,
                    "name": name,
                    "partitions": partitions,
                    "id": uuid.uuid4().hex,  # tells a re-created topic from the old one
                    "created_ms": _now_ms(),
                }
                if grouped:
                    data["manifest"] = GROUPED
                created = self._storage.create_exclusive(meta, json.dumps(data).encode())
            if not created:
                existing = self._read_partition_count(name)
                if not exist_ok:
                    raise TopicExistsError(f"topic {name!r} already exists in {self.url}")
                if existing != partitions:
                    raise LogError(
                        f"topic {name!r} exists with {existing} partitions, not {partitions}"
                    )
            self._read_partition_count(name)
            return TopicDescription(name, partitions)

    def _make_dirs(self, name: str, partitions: int, grouped: bool) -> None:
        if not grouped:
            for p in range(partitions):
                for sub in SUBDIRS:
                    self._storage.make_dir(f"{name}/{p}/{sub}")
            return
        self._storage.make_dir(f"{name}/{GROUPS_DIR}")
        self._storage.make_dir(f"{name}/{CHECKPOINTS_DIR}")
        for p in range(partitions):
            self._storage.make_dir(f"{name}/{p}/segments")
            self._storage.make_dir(f"{name}/{p}/manifest")
            self._storage.create_lazily(f"{name}/{p}/manifest/{0:020d}.json", _GROUPED_MARKER)

    def delete_topic(self, name: str) -> None:
        self._check_open()
        with self._lock:
            self._read_partition_count(name)
            trash = f"{TMP_PREFIX}deleted-{uuid.uuid4().hex}"
            try:
                self._storage.move(name, trash)  # atomic: readers see all or nothing
            except FileNotFoundError:
                raise self._unknown(name) from None
            finally:
                self._forget(name)
            self._storage.delete_dir(trash)

    def list_topics(self) -> list[str]:
        self._check_open()
        return sorted(
            info.base_name
            for info in self._storage.list_dir("")
            if TOPIC_RE.match(info.base_name)
            and self._storage.exists(f"{info.base_name}/{_TOPIC_FILE}")
        )

    def has_topic(self, name: str) -> bool:
        self._check_open()
        return (
            isinstance(name, str)
            and bool(TOPIC_RE.match(name))
            and self._storage.exists(f"{name}/{_TOPIC_FILE}")
        )

    def describe_topic(self, name: str) -> TopicDescription:
        self._check_open()
        with self._lock:
            return TopicDescription(name, self._read_partition_count(name))

    def partitions(self, name: str) -> int:
        return self.describe_topic(name).partitions

    def topic_id(self, name: str) -> str | None:
        self._check_open()
        with self._lock:
            self._read_partition_count(name)  # always reads the disk: re-creation shows
            return self._topic_ids.get(name)

    # -- internals ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"the log at {self.url} is closed")

    def _unknown(self, topic: object) -> UnknownTopicError:
        return UnknownTopicError(f"topic {topic!r} does not exist in {self.url}")

    def _read_partition_count(self, topic: str) -> int:
        if not isinstance(topic, str) or not TOPIC_RE.match(topic):
            raise self._unknown(topic)
        try:
            raw = json.loads(self._storage.read_bytes(f"{topic}/{_TOPIC_FILE}"))
            count = int(raw["partitions"])
            topic_id = raw.get("id")
            layout = raw.get("manifest")
            if layout not in (None, GROUPED):
                raise ValueError(f"unknown manifest layout {layout!r}")
        except FileNotFoundError:
            self._forget(topic)
            raise self._unknown(topic) from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            where = self._storage.path(f"{topic}/{_TOPIC_FILE}")
            raise CorruptLogError(f"metadata of topic {topic!r} ({where}) is corrupt: {e}") from e
        if topic in self._topic_ids and self._topic_ids[topic] != topic_id:
            self._forget(topic)  # deleted and re-created by another process: drop stale state
        self._partition_counts[topic] = count
        self._topic_ids[topic] = topic_id
        if layout is None:
            self._manifests[topic] = None
        elif self._manifests.get(topic) is None:
            self._manifests[topic] = TopicManifest(
                self._storage, topic, count, self._checkpoint_every
            )
        return count

    def _partition(self, topic: str, partition: int, *, verify: bool = False) -> Partition:
        """The cached partition (caller holds the lock); checks topic and number. ``verify``
        re-reads the topic metadata first, so that writes never go to the manifest of a topic
        that another process deleted (or deleted and re-created) since it was cached."""
        self._check_open()
        if verify:
            self._read_partition_count(topic)
        cached = self._partitions.get((topic, partition))
        if cached is not None and type(partition) is int:
            return cached
        count = self._partition_counts.get(topic)
        if count is None:
            count = self._read_partition_count(topic)
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise UnknownPartitionError(f"partition must be an int, got {partition!r}")
        if not 0 <= partition < count:
            raise UnknownPartitionError(
                f"topic {topic!r} has partitions 0..{count - 1}; there is no partition {partition}"
            )
        manifest = self._manifests.get(topic)
        if manifest is not None:
            part: Partition = GroupedPartition(
                self._storage, topic, partition, manifest, self._shared, self._topic_ids.get(topic)
            )
        else:
            part = Partition(
                self._storage,
                topic,
                partition,
                self._checkpoint_every,
                self._shared,
                self._journal,
                self._topic_ids.get(topic),
            )
        self._partitions[(topic, partition)] = part
        return part

    def _forget(self, topic: str) -> None:
        self._partition_counts.pop(topic, None)
        self._topic_ids.pop(topic, None)
        self._manifests.pop(topic, None)
        for key in [k for k in self._partitions if k[0] == topic]:
            del self._partitions[key]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
