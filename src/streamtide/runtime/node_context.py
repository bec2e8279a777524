"""The context each node of a task gets: stores, schedules, metrics, clocks, flush listeners.

One ``NodeContext`` per node, bound to it: the stores it may open are those connected to it
in the topology (plus global stores), its schedules are named after it, and its flush
listeners run as its callbacks. Built-in operators get it in ``init``; the Processor API
adapter gives user processors a subclass that adds ``forward`` and the record being
processed (``runtime.adapter``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.errors import TopologyError
from streamtide.processor.api import Cancellable, ProcessorContext, PunctuationType
from streamtide.processor.punctuation import (
    PunctuationSchedule,
    schedule_key,
    start_time,
    validate_interval,
)
from streamtide.record import Record, RecordMetadata
from streamtide.runtime.store_context import DelegatingStoreContext
from streamtide.time import Duration

if TYPE_CHECKING:
    from streamtide.runtime.graph import Node
    from streamtide.runtime.stream_task import StreamTask


class NodeContext(DelegatingStoreContext, ProcessorContext):
    """What a node of a running task sees (see the module docstring)."""

    _task: StreamTask

    def __init__(self, task: StreamTask, node: Node) -> None:
        self._task = task
        self.node = node
        self._schedule_count = 0

    # ---- ProcessorContext (task_id, application_id, metrics: DelegatingStoreContext) ----

    def forward(self, record: Record, child: str | None = None) -> None:
        raise TopologyError(
            f"node {self.node.name!r} is a built-in operator: it emits column batches "
            "(ColumnOperator.emit), not records"
        )

    def record_metadata(self) -> RecordMetadata | None:
        return None

    def schedule(
        self,
        interval: Duration,
        punctuation_type: PunctuationType,
        punctuator: Callable[[int], None],
        align: str = "epoch",
    ) -> Cancellable:
        ms = validate_interval(interval)
        if not isinstance(punctuation_type, PunctuationType):
            raise TypeError(f"punctuation type must be a PunctuationType, got {punctuation_type!r}")
        name = self.node.name
        if not callable(punctuator):
            raise TypeError(f"node {name!r}: punctuator must be callable, got {punctuator!r}")
        key = schedule_key(name, self._schedule_count, punctuation_type, ms)
        self._schedule_count += 1
        restored = self._task.restored_schedule_time(key)
        time = (
            restored
            if restored is not None
            else start_time(punctuation_type, ms, align, self.current_system_time_ms())
        )
        schedule = PunctuationSchedule(key, name, punctuation_type, ms, punctuator, time)
        self._task.add_schedule(schedule)
        return schedule

    def get_state_store(self, name: str) -> Any:
        node = self.node
        task = self._task
        if name not in node.stores and name not in task.global_stores:
            raise TopologyError(
                f"processor {node.name!r} has no access to state store {name!r}; connect it "
                f"when adding the processor (stores it can use: {sorted(node.stores) or 'none'})"
            )
        return task.store(name)

    def current_stream_time_ms(self) -> int:
        return self._task.stream_time

    def current_system_time_ms(self) -> int:
        return self._task.clock.now_ms()

    def register_flush_listener(self, listener: Callable[[], None]) -> None:
        self._task.add_flush_listener(self.node, listener)

    # ---- what stores and the DSL's caches ask -------------------------------------------

    @property
    def cache_enabled(self) -> bool:
        return self._task.cache_enabled

    @property
    def partition(self) -> int:
        return self._task.partition
