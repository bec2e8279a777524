"""Opens, flushes and closes the state stores of one task."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamtide.errors import TopologyError
from streamtide.processor.api import StateStore

if TYPE_CHECKING:
    from streamtide.processor.topology import Topology
    from streamtide.runtime.context import TaskContext


class TaskStateManager:
    """Builds one instance of every store of a task and owns its lifecycle.

    Stores announce themselves through ``register`` when they are opened; the durable
    implementation of this class hooks changelogging, checkpoints and restore in there.
    """

    def __init__(self, topology: Topology, store_names: list[str]) -> None:
        self.topology = topology
        self.store_names = list(store_names)
        self.stores: dict[str, StateStore] = {}
        self.registered: dict[str, StateStore] = {}

    def open(self, context: TaskContext) -> None:
        for name in self.store_names:
            store = self.topology.store_builder(name).build()
            store.init(context)
            self.stores[name] = store

    def register(self, store: StateStore) -> None:
        self.registered[store.name] = store

    def get(self, name: str) -> StateStore:
        try:
            return self.stores[name]
        except KeyError:
            raise TopologyError(
                f"state store {name!r} does not belong to this task; "
                f"its stores: {sorted(self.stores) or 'none'}"
            ) from None

    def flush(self) -> None:
        for store in self.stores.values():
            store.flush()

    def close(self) -> None:
        for store in self.stores.values():
            if store.is_open:
                store.close()
