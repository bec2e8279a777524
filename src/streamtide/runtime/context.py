"""The ``ProcessorContext`` a task hands to its processors and stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.errors import TopologyError
from streamtide.processor.api import Cancellable, ProcessorContext, PunctuationType, StateStore
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.punctuation import (
    PunctuationSchedule,
    schedule_key,
    start_time,
    validate_interval,
)
from streamtide.record import Record, RecordMetadata
from streamtide.runtime.nodes import SinkNode
from streamtide.runtime.store_context import DelegatingStoreContext
from streamtide.time import Duration

if TYPE_CHECKING:
    from streamtide.runtime.stream_task import StreamTask


class TaskContext(DelegatingStoreContext, ProcessorContext):
    """Context of one task; ``current_node`` follows the record through the graph."""

    def __init__(self, task: StreamTask) -> None:
        self._task = task
        self.current_node: Any = None
        self._source: tuple[str, int, int | None] | None = None
        self._schedule_counts: dict[str, int] = {}
        self._flush_listeners: list[tuple[Any, Callable[[], None]]] = []

    # ---- ProcessorContext (task_id, application_id, metrics: DelegatingStoreContext) ----

    def forward(self, record: Record, child: str | None = None) -> None:
        node = self.current_node
        if child is None:
            targets = node.children
        else:
            target = node.children_by_name.get(child)
            if target is None:
                raise TopologyError(
                    f"node {node.name!r} has no child named {child!r}; "
                    f"children: {sorted(node.children_by_name) or 'none'}"
                )
            targets = (target,)
        task = self._task
        for target in targets:
            if target.__class__ is SinkNode:  # a sink needs no context: send it directly
                try:
                    target.send(record)
                except Exception:
                    task.note_failure(target, record)
                    raise
            else:
                task.dispatch(target, record)

    def forward_columns(self, batch: ColumnBatch) -> None:
        """``forward`` of every row of ``batch``, in the column lane (the current node's one
        child takes the whole batch; see ``StreamTask``)."""
        self._task.process_columns(self.current_node.children[0], batch)

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
        if not callable(punctuator):
            raise TypeError(
                f"node {self._node_name()!r}: punctuator must be callable, got {punctuator!r}"
            )
        node = self._node_name()
        sequence = self._schedule_counts.get(node, 0)
        self._schedule_counts[node] = sequence + 1
        key = schedule_key(node, sequence, punctuation_type, ms)
        restored = self._task.restored_schedule_time(key)
        time = (
            restored
            if restored is not None
            else start_time(punctuation_type, ms, align, self.current_system_time_ms())
        )
        schedule = PunctuationSchedule(key, node, punctuation_type, ms, punctuator, time)
        self._task.add_schedule(schedule)
        return schedule

    def get_state_store(self, name: str) -> Any:
        node = self.current_node
        if node is not None and name not in node.stores and name not in self._task.global_stores:
            raise TopologyError(
                f"processor {node.name!r} has no access to state store {name!r}; connect it "
                f"when adding the processor (stores it can use: {sorted(node.stores) or 'none'})"
            )
        return self._task.store(name)

    def current_stream_time_ms(self) -> int:
        return self._task.stream_time

    def current_system_time_ms(self) -> int:
        return self._task.clock.now_ms()

    def record_metadata(self) -> RecordMetadata | None:
        source = self._source
        if source is None or source[2] is None:
            return None
        return RecordMetadata(*source)  # type: ignore[arg-type]

    def set_source(self, topic: str, partition: int, offset: int | None) -> None:
        """Where the record being processed comes from (metadata is built only if asked)."""
        self._source = (topic, partition, offset)

    def clear_source(self) -> None:
        self._source = None

    def register_flush_listener(self, listener: Callable[[], None]) -> None:
        self._flush_listeners.append((self.current_node, listener))

    # ---- StateStoreContext --------------------------------------------------------------

    @property
    def cache_enabled(self) -> bool:
        return self._task.cache_enabled

    def register(self, store: StateStore) -> None:
        self._task.register_store(store)

    # ---- internal ------------------------------------------------------------------------

    def flush_listeners(self) -> list[tuple[Any, Callable[[], None]]]:
        return self._flush_listeners

    def _node_name(self) -> str:
        return self.current_node.name if self.current_node is not None else "<task>"
