"""``StoreQueries``: interactive queries of a running application's stores.

A query runs between two batches (under the batch lock, so it sees exactly the last committed
batch and never a batch's messages), where its tasks live: on the long-running work units
that last ran them (continuous execution) or in a Spark job pinned to the executor that last
committed them (micro-batch execution). See docs/tables-and-joins.md, "Queryable state"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtide.engine.batch_loop import BatchLoop
from streamtide.engine.driver_state import DriverState
from streamtide.engine.queryable import (
    ReadOnlyKeyValueStore,
    ReadOnlySessionStore,
    ReadOnlyVersionedKeyValueStore,
    ReadOnlyWindowStore,
    ask_pinned_jobs,
    store_route,
    store_view,
)
from streamtide.engine.stage_runner import StageRunner
from streamtide.errors import InvalidStateStoreError
from streamtide.runtime.committed import TaskCommittedState
from streamtide.runtime.store_query import QueryOp, StoreQuery

#: Any of the read-only views ``store`` returns.
StoreView = (
    ReadOnlyKeyValueStore
    | ReadOnlyWindowStore
    | ReadOnlySessionStore
    | ReadOnlyVersionedKeyValueStore
)


class StoreQueries:
    """Answers queries of the application's stores (see the module docstring).
    ``lifecycle()`` says ``(started, stopped)``."""

    def __init__(
        self,
        state: DriverState,
        loop: BatchLoop,
        runner: StageRunner,
        lifecycle: Callable[[], tuple[bool, bool]],
    ) -> None:
        self.state = state
        self.loop = loop
        self.runner = runner
        self._lifecycle = lifecycle

    def store(self, name: str) -> StoreView:
        """A read-only view of store ``name`` over all its tasks (``StreamsApp.store``)."""
        self.check_queryable()
        state = self.state
        partitions = {stage.subtopology: stage.partitions for stage in state.stages}
        route = store_route(state.topology, state.config, name, partitions)
        return store_view(route, self._ask)  # type: ignore[return-value]

    def check_queryable(self) -> None:
        app = self.state.application_id
        error = self.loop.error
        started, stopped = self._lifecycle()
        if error is not None:
            raise InvalidStateStoreError(
                f"application {app!r} stopped after an error, its stores cannot be queried: {error}"
            )
        if stopped:
            raise InvalidStateStoreError(
                f"application {app!r} was stopped; its stores can be queried only while it runs"
            )
        if not started:
            raise InvalidStateStoreError(
                f"application {app!r} is not running; start it (app.start() or "
                "app.run_until_caught_up()) before querying its stores"
            )

    def _ask(self, store: str, op: QueryOp, args: list[Any], tasks: list[str]) -> dict[str, Any]:
        """Run one query on ``tasks`` where they live, between two batches."""
        self.loop.await_first_batch()
        with self.loop.lock:
            self.check_queryable()
            states = self.state.task_states
            query = StoreQuery(
                store,
                op,
                args,
                {t: (states.get(t) or TaskCommittedState()).to_dict() for t in tasks},
            )
            runner = self.runner
            if runner.routes is not None:
                return runner.routes.ask(query)
            assert runner.blob is not None
            return ask_pinned_jobs(runner.sc, runner.blob, self.state.owners, query)
