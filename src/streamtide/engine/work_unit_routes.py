"""``WorkUnitRoutes``: continuous execution as the driver's batches see it.

The long-running work units (``engine.continuous``) keep their tasks open between batches.
The routes remember which slot holds which tasks (so that tasks that move are released where
they were before they open elsewhere: RocksDB admits one process per store) and which slot
last ran each task (where the outcome of its held run is sent, and where queries go)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtide.assignment import Assignment
from streamtide.engine.continuous import ContinuousWorkers, SlotKey
from streamtide.engine.interop import ExecutorInfo
from streamtide.engine.placement import slot_units
from streamtide.engine.plan import Stage
from streamtide.engine.queryable import ask_work_units
from streamtide.runtime.messages import Release, RunUnits, Settle, UnitsRan
from streamtide.runtime.store_query import StoreQuery

#: One work unit to run: ``(stage, its spec as a dict, executor, slot)``.
Unit = tuple[int, dict[str, Any], ExecutorInfo, int]


class WorkUnitRoutes:
    """The long-running work units of one driver, and what runs where."""

    def __init__(
        self, workers: ContinuousWorkers, on_launched: Callable[[], None] = lambda: None
    ) -> None:
        self.workers = workers
        #: called before work units launched since the last run get their first run
        #: (``BatchCommitter.units_launched``)
        self._on_launched = on_launched
        self._launches_seen = 0
        self._layout: dict[SlotKey, set[str]] = {}
        #: the slot that last ran each task (to tell it the outcome, to ask it queries)
        self.ran_in: dict[str, SlotKey] = {}

    @property
    def waited_s(self) -> float:
        """Seconds the driver has waited for these work units (to start and to reply)."""
        return self.workers.waited_s

    def run(
        self,
        units: list[Unit],
        executors: list[ExecutorInfo],
        assignment: Assignment,
        stages: list[Stage],
    ) -> list[dict[str, Any]]:
        """Run work-unit specs on the long-running work units of their slots (one message
        per slot) and return the reports in the order of ``units``."""
        workers = self.workers
        layout: dict[SlotKey, set[str]] = {}
        for stage in stages:
            for executor, slot, actives, standbys in slot_units(assignment, executors, stage):
                layout.setdefault(SlotKey(executor.id, slot), set()).update(actives, standbys)
        if layout != self._layout:
            # tasks that move close where they were before they open elsewhere (RocksDB
            # admits one process per store)
            connected = {key for key, slot in workers.slots().items() if slot["connected"]}
            workers.request({key: Release(tuple(sorted(layout.get(key, ())))) for key in connected})
            self._layout = layout
        by_slot: dict[SlotKey, list[int]] = {}
        executor_of: dict[SlotKey, ExecutorInfo] = {}
        for index, (_, _, executor, slot) in enumerate(units):
            key = SlotKey(executor.id, slot)
            executor_of[key] = executor
            by_slot.setdefault(key, []).append(index)
        workers.ensure(executor_of)
        if workers.launched != self._launches_seen:
            self._on_launched()
            self._launches_seen = workers.launched
        replies = workers.request(
            {key: RunUnits(tuple(units[i][1] for i in indexes)) for key, indexes in by_slot.items()}
        )
        reports: list[dict[str, Any]] = [{} for _ in units]
        for key, indexes in by_slot.items():
            reply = replies[key]
            assert isinstance(reply, UnitsRan)
            for index, report in zip(indexes, reply.reports):
                reports[index] = report
                for task in report.get("tasks", ()):
                    self.ran_in[task["task"]] = key
            # what the slot spent settling since its last run counts once, with its first unit
            reports[indexes[0]]["settle_ms"] = reply.settle_ms
        return reports

    def settle(self, winners: dict[str, str]) -> None:
        """Tell each long-running work unit which of its held runs the sealed stage took
        (``{task: winning writer id}``)."""
        by_slot: dict[SlotKey, dict[str, str]] = {}
        for task, writer in winners.items():
            key = self.ran_in.get(task)
            if key is not None:
                by_slot.setdefault(key, {})[task] = writer
        for key, tasks in by_slot.items():
            self.workers.notify(key, Settle(tasks))

    def ask(self, query: StoreQuery) -> dict[str, Any]:
        """Answer ``query`` on the work units that last ran its tasks."""
        return ask_work_units(self.workers, self.ran_in, query)

    def retire_executors(self, executors: set[str], timeout: float) -> None:
        self.workers.retire_executors(executors, timeout)

    def close(self) -> None:
        self.workers.close()
