"""The one adapter for the Processor API: a user ``Processor`` inside the column contract.

The adapter is the only record loop of a task. It hands the processor its rows one at a
time, each as a ``Record`` with the exact context record-at-a-time processing gives: the
stream time after that input record (``current_stream_time_ms``, which the node's stores see
too), its topic, partition and offset (``record_metadata``), and punctuations between
records (the task cuts its input where a punctuation falls due). What the processor forwards
(``context.forward(record)`` to every child, ``forward(record, child)`` to one) is collected
as columns, each row keeping the input row, offset and stream time of the record it was
forwarded for, and emitted to the children after the batch (after a punctuator or a flush
listener for what those forward).

Where collecting could differ from record-at-a-time processing, ``forward`` hands each
record on at once instead, and a failure below comes back out of ``forward`` as the child's
own exception, aborting ``process`` there exactly as it would record at a time:

- the node must hand rows on one at a time (``runtime.interleaving``: its children interact,
  or it shares a store with a node below it);
- the processing exception handler may continue after a failure: the processor's code after
  a ``forward`` whose record failed below must then not run for that record.

If the processor catches such an exception and returns normally, the record is not failed
(as record at a time). With collected forwards a processor cannot see its children's
failures: they are reported to the task, which stops (handler ``"fail"``) or skips the row.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from streamtide.errors import UserCodeError, from_infrastructure
from streamtide.processor.api import Processor
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator
from streamtide.record import Record, RecordMetadata
from streamtide.runtime.node_context import NodeContext

if TYPE_CHECKING:
    from streamtide.runtime.graph import Node
    from streamtide.runtime.stream_task import StreamTask

#: What a forward asked for: the record, the input position it was forwarded for (None in a
#: callback), the child it goes to (None: every child).
Forwarded = tuple[Record, "int | None", "str | None"]

_KEY, _VALUE = attrgetter("key"), attrgetter("value")
_TIMESTAMP, _HEADERS = attrgetter("timestamp"), attrgetter("headers")


@runtime_checkable
class BatchStore(Protocol):
    """A store that can serve a batch's reads and writes from memory (``begin_batch``, False
    when it cannot) and write them back once (``end_batch``)."""

    def begin_batch(self) -> bool: ...

    def end_batch(self) -> None: ...


class AdapterContext(NodeContext):
    """The ``ProcessorContext`` of a Processor API node: ``forward`` and the current row."""

    def __init__(self, task: StreamTask, node: Node, adapter: ProcessorAdapter) -> None:
        super().__init__(task, node)
        self._adapter = adapter
        #: the batch being processed and the row's position in it (None: no current record)
        self.batch: ColumnBatch | None = None
        self.position: int | None = None
        self.forwarded: list[Forwarded] = []
        #: the adapter's ``immediate`` (read on every ``forward``)
        self.immediate = False

    def forward(self, record: Record, child: str | None = None) -> None:
        if child is not None:
            self.node.child(child)  # a name that is no child fails the record here
        if self.immediate:
            self._adapter.hand_on(record, child)
        else:
            self.forwarded.append((record, self.position, child))

    def record_metadata(self) -> RecordMetadata | None:
        position = self.position
        if position is None:
            return None
        batch = self.batch
        offset = batch.offsets[position]  # type: ignore[union-attr]
        if offset is None:
            return None
        return RecordMetadata(batch.topic, batch.partition, offset)  # type: ignore[arg-type, union-attr]


class ProcessorAdapter(ColumnOperator):
    """Runs a user ``Processor`` record by record (see the module docstring)."""

    def __init__(self, processor: Processor, task: StreamTask, node: Node) -> None:
        self.processor = processor
        self._task = task
        self._node = node
        self._failures = node.failures
        self._context = AdapterContext(task, node, self)
        #: hand forwarded records on at once (see the module docstring)
        self.immediate = False
        self._batch_stores: list[BatchStore] | None = None

    @property
    def adapter_context(self) -> AdapterContext:
        return self._context

    def init(self, context: Any) -> None:
        self.context = self._context
        self.immediate = self._context.immediate = bool(self._node.children) and (
            self._node.depth_first or self._task.may_continue_after_failure
        )
        init = getattr(self.processor, "init", None)
        if init is not None:
            init(self._context)

    def close(self) -> None:
        close = getattr(self.processor, "close", None)
        if close is not None:
            close()

    def process_batch(self, batch: ColumnBatch) -> None:
        context = self._context
        task = self._task
        process = self.processor.process
        keys, values, timestamps, headers = (
            batch.keys,
            batch.values,
            batch.timestamps,
            batch.headers,
        )
        stream_times = batch.stream_times
        before = task.stream_time
        immediate = self.immediate
        failures = self._failures.rows
        context.batch = batch
        context.forwarded = []  # (nothing left over from a batch a failure ended)
        n = len(keys)
        start = 0
        # the node's key-value stores serve the batch from memory (``state.typed.BatchView``),
        # unless records go down one at a time: a node below may read them
        views = [] if immediate else [s for s in self._stores() if s.begin_batch()]
        try:
            while start < n:
                p, mark = start, len(failures)
                try:
                    if immediate:
                        for p in range(start, n):
                            context.position = p
                            task.stream_time = stream_times[p]
                            mark = len(failures)
                            process(Record(keys[p], values[p], timestamps[p], headers[p]))
                            del failures[mark:]  # failures below that the processor caught
                    else:
                        for p in range(start, n):
                            context.position = p
                            task.stream_time = stream_times[p]
                            process(Record(keys[p], values[p], timestamps[p], headers[p]))
                    start = n
                except Exception as error:
                    if error is self._failures.fatal:
                        raise
                    start = self._failed(batch, p, error, mark if immediate else None)
        finally:
            context.position = None
            context.batch = None
            task.stream_time = before
            for store in views:
                store.end_batch()
        self._emit_forwarded(batch)

    def _stores(self) -> list[BatchStore]:
        """The node's stores that can keep a batch in memory (``begin_batch``)."""
        stores = self._batch_stores
        if stores is None:
            found = (self._task.store(name) for name in sorted(self._node.stores))
            stores = self._batch_stores = [s for s in found if isinstance(s, BatchStore)]
        return stores

    def _failed(self, batch: ColumnBatch, p: int, error: Exception, mark: int | None) -> int:
        """The processor raised ``error`` for row ``p``. In immediate mode, when ``error`` is
        a failure below that came back through ``forward``, that failure (with the node that
        raised it) is the row's; failures below that the processor caught are dropped."""
        if mark is not None:
            failures = self._failures.rows
            below = failures[mark:]
            del failures[mark:]
            if below and below[-1].error is error:
                failures.append(below[-1])
                return batch.row_end(p)
        return self.fail(batch, p, error)

    def run_callback(self, action: Callable[[], Any]) -> None:
        """A punctuator, flush listener, ``init`` or ``close``: no current record; what it
        forwards is emitted afterwards as rows of no input row. What the processor raises is
        user code's: the task stops without retries (``UserCodeError``)."""
        context = self._context
        saved = context.batch, context.position, context.forwarded
        context.batch, context.position, context.forwarded = None, None, []
        try:
            action()
            forwarded = context.forwarded
        except Exception as error:
            if error is self._failures.fatal or from_infrastructure(error):
                raise
            raise self._failures.stop(error, self._node.name, None, user_code=True) from error
        finally:
            context.batch, context.position, context.forwarded = saved
        if forwarded:
            self._emit(self._unsourced([record for record, _, _ in forwarded]), forwarded)

    def hand_on(self, record: Record, child: str | None) -> None:
        """``forward`` in immediate mode: the record goes down now; a failure below comes
        back as the failing child's exception."""
        context = self._context
        position = context.position
        if position is None:
            batch = self._unsourced([record])
        else:
            batch = context.batch.derive(  # type: ignore[union-attr]
                [position], [record.key], [record.value], [record.timestamp], [record.headers]
            )
        failures = self._failures.rows
        mark = len(failures)
        self._node.emit(batch, child)
        if len(failures) > mark:
            raise failures[-1].error

    def _unsourced(self, records: list[Record]) -> ColumnBatch:
        return ColumnBatch.from_records(self._task.partition, records, self._task.stream_time)

    def _emit_forwarded(self, batch: ColumnBatch) -> None:
        forwarded = self._context.forwarded
        if not forwarded:
            return
        self._context.forwarded = []
        records, positions, _ = zip(*forwarded)
        out = batch.derive(
            list(positions),
            list(map(_KEY, records)),
            list(map(_VALUE, records)),
            list(map(_TIMESTAMP, records)),
            list(map(_HEADERS, records)),
        )
        self._emit(out, forwarded)

    def _emit(self, out: ColumnBatch, forwarded: list[Forwarded]) -> None:
        routes = [child for _, _, child in forwarded]
        if routes.count(None) != len(routes):
            self._node.emit_routed(out, routes)
        else:
            self._node.emit(out)


def adapt(processor: Any, task: StreamTask, node: Node) -> ColumnOperator:
    """The node's operator: ``processor`` itself when it is a built-in column operator, else
    the adapter around a Processor API processor."""
    if isinstance(processor, ColumnOperator):
        return processor
    if not callable(getattr(processor, "process", None)):
        raise UserCodeError(
            f"the supplier of processor {node.name!r} returned {processor!r}, which has no "
            "process(record) method",
            task_id=task.task_id,
            node=node.name,
        )
    return ProcessorAdapter(processor, task, node)
