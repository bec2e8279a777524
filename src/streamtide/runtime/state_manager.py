"""Opens, flushes and closes the state stores of one task, and sends their changelogs.

``TaskStateManager`` keeps no durable bookkeeping: at every flush (the task's commit) it sends
each logged store's buffered writes to the store's changelog topic through the task's
``RecordCollector`` and then applies them to the local store. That is what the test driver
uses. ``runtime.durable_state.DurableTaskStateManager`` adds checkpoints, restore from the log,
deferred application of the changelog and snapshots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamtide.errors import TopologyError
from streamtide.processor.api import StateStore
from streamtide.state.changelogging import ChangeLoggingKeyValueBytesStore, ChangelogRecord

if TYPE_CHECKING:
    from streamtide.processor.topology import Topology
    from streamtide.runtime.collector import RecordCollector
    from streamtide.runtime.context import TaskContext


def partition_of(task_id: str) -> int:
    """The input partition a task id ``"<subtopology>_<partition>"`` names."""
    return int(task_id.rsplit("_", 1)[1])


class TaskStateManager:
    """Builds one instance of every store of a task and owns its lifecycle.

    Stores announce themselves through ``register`` when they are opened; logged stores
    (``ChangeLoggingKeyValueBytesStore``, whatever layout sits on top of them) are tracked in
    ``logged`` by name.
    """

    def __init__(self, topology: Topology, store_names: list[str]) -> None:
        self.topology = topology
        self.store_names = list(store_names)
        self.stores: dict[str, StateStore] = {}
        self.registered: dict[str, StateStore] = {}
        self.logged: dict[str, ChangeLoggingKeyValueBytesStore] = {}
        self.collector: RecordCollector | None = None
        self.context: TaskContext | None = None
        self.partition = 0

    def open(
        self,
        context: TaskContext,
        collector: RecordCollector | None = None,
        partition: int | None = None,
    ) -> None:
        """Open every store; ``collector`` receives changelog records (none: not sent)."""
        self.context = context
        self.collector = collector
        self.partition = partition_of(context.task_id) if partition is None else partition
        for name in self.store_names:
            store = self.topology.store_builder(name).build()
            store.init(context)
            self.stores[name] = store

    def register(self, store: StateStore) -> None:
        self.registered[store.name] = store
        if isinstance(store, ChangeLoggingKeyValueBytesStore):
            self.logged[store.name] = store

    def get(self, name: str) -> StateStore:
        try:
            return self.stores[name]
        except KeyError:
            raise TopologyError(
                f"state store {name!r} does not belong to this task; "
                f"its stores: {sorted(self.stores) or 'none'}"
            ) from None

    def changelog_topic(self, store_name: str) -> str:
        application_id = self.context.application_id if self.context else "streamtide-app"
        return self.topology.changelog_topic(store_name, application_id)

    def send_changelogs(self) -> dict[str, int]:
        """Send every logged store's buffered writes to its changelog (partition = task
        partition); the writes stay unapplied. Returns the record count per store."""
        sent: dict[str, int] = {}
        timestamp = max(self.context.current_stream_time_ms(), 0) if self.context else 0
        for name, store in self.logged.items():
            records = store.take_changelog()
            if records:
                self._send(self.changelog_topic(name), records, timestamp)
            sent[name] = len(records)
        return sent

    def _send(self, topic: str, records: list[ChangelogRecord], timestamp: int) -> None:
        collector = self.collector
        if collector is None:
            return
        partition = self.partition
        send_many = getattr(collector, "send_many", None)
        if send_many is not None:
            keys, values, headers = zip(*records)
            send_many(topic, partition, list(keys), list(values), [timestamp] * len(keys), headers)
            return
        for key, value, headers in records:
            collector.send(topic, partition, key, value, timestamp, headers)

    def flush(self) -> None:
        """Commit the stores: send the changelogs, apply them locally, flush."""
        self.send_changelogs()
        for store in self.logged.values():
            store.apply_sent()
        for store in self.stores.values():
            store.flush()

    def close(self) -> None:
        for store in self.stores.values():
            if store.is_open:
                store.close()
