"""Reading a store of an application run by ``LocalDriver``: the engine's own store queries
(``app.store(name)``), answered in this process from each task's committed state, as a
micro-batch query job does on an executor."""

from __future__ import annotations

from typing import Any

from streamtide.engine.queryable import store_route, store_view
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.store_query import QueryOp, StoreQuery, decode_bytes
from streamtide.runtime.task_host import TaskHost
from streamtide.runtime.work_unit import client_state_dir
from tests.engine.local_driver import CLIENT, LocalDriver


def engine_route_and_ask(driver: LocalDriver, name: str) -> tuple[Any, Any]:
    """The route of store ``name`` and the function asking its tasks, answered here."""
    partitions = {stage.subtopology: stage.partitions for stage in driver.stages}
    route = store_route(driver.topology, driver.config, name, partitions)

    def ask(store: str, op: QueryOp, args: list[Any], tasks: list[str]) -> dict[str, Any]:
        query = StoreQuery(store, op, args, {t: driver.states.get(t, {}) for t in tasks})
        state_dir = client_state_dir(driver.config, CLIENT)
        host = TaskHost(driver.topology, driver.config, driver.log, make_task_stores, state_dir)
        try:
            return host.query(query)
        finally:
            host.close()

    return route, ask


def engine_store_view(driver: LocalDriver, name: str) -> Any:
    """What ``app.store(name)`` gives, for an application run by ``driver``."""
    return store_view(*engine_route_and_ask(driver, name))


def engine_store(driver: LocalDriver, name: str, keys: list[str]) -> dict[Any, Any]:
    """Store ``name`` as of the last committed batch: key-value stores per partition
    (``{partition: {key: value}}``, partitions with entries; a processor's store need not be
    keyed like its input), window and session stores for ``keys`` (by key and window)."""
    route, ask = engine_route_and_ask(driver, name)
    view: Any = store_view(route, ask)
    kind = route.kind.value
    if kind == "key_value":
        by_task = {}
        for task in route.task_ids:
            answer = ask(name, QueryOp.ALL, [], [task])[task]
            entries = {
                route.key_serde.deserialize(decode_bytes(k)): route.value_serde.deserialize(
                    decode_bytes(v)
                )
                for k, v in answer
            }
            if entries:
                by_task[int(task.split("_")[1])] = entries
        return by_task
    found: dict[Any, Any] = {}
    for key in keys:
        if kind == "session":
            for windowed, value in view.fetch(key):
                found[(key, windowed.window.start, windowed.window.end)] = value
        else:
            for start, value in view.fetch(key):
                found[(key, start)] = value
    return found
