"""Rows that failed while a task processed a piece, and the errors that stop a task.

Operators report a row whose rule raised (``ColumnOperator.fail``); the node graph keeps the
row away from every node that record-at-a-time processing would not have reached after the
failure (``runtime.graph``), and the task hands the reported rows to the processing exception
handler in input order once the piece is done (``StreamTask``); a row that derives from no
input row (a punctuator's or a cache flush's) goes to the handler on its own at once
(``Failures.unsourced``). An error that stops the task (a store's outside a row loop, or one
the handler did not skip) is located by ``Failures.stop`` (task, node, topic, partition) and
remembered, so nodes above pass it on instead of mistaking it for a failure of their own row.

Where an error came from decides whether a retry may help (docs/engine.md, "Failures"): a
row failure, and anything a Processor API processor raises in a callback, is user code's
(unless it is an error of the infrastructure that merely passed through user code,
``from_infrastructure``), and stops the application at once as a ``UserCodeError``; an error
that escapes an operator outside its row loop is the engine's, and the stage is retried.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamtide.errors import (
    BufferFullError,
    HandlerFailedError,
    StreamsProcessingError,
    UserCodeError,
    from_infrastructure,
)
from streamtide.handlers import ProcessingHandlerResponse
from streamtide.processor.column_batch import ColumnBatch
from streamtide.record import Record

if TYPE_CHECKING:
    from streamtide.runtime.record_errors import RecordErrors


@dataclass(slots=True)
class RowFailure:
    """Node ``node`` raised ``error`` for the row at ``position`` of ``batch`` (which derives
    from input row ``row``)."""

    row: int
    node: str
    batch: ColumnBatch
    position: int
    error: Exception

    def record(self) -> Record:
        """What the failing node was given."""
        return self.batch.record(self.position)


def processing_error(
    error: Exception,
    *,
    task_id: str,
    node: str | None,
    topic: str | None,
    partition: int,
    offset: int | None,
    final: bool = False,
    user_code: bool = False,
) -> StreamsProcessingError:
    """``error`` as the ``StreamsProcessingError`` that stops the task (a ``BufferFullError``
    stays one; ``final``: a handler function answered FAIL; ``user_code``: user code raised
    it, a ``UserCodeError``)."""
    if isinstance(error, StreamsProcessingError):
        message = str(error).split(" (", 1)[0]
    else:
        message = f"{type(error).__name__}: {error}"
    error_type: type[StreamsProcessingError] = (
        BufferFullError
        if isinstance(error, BufferFullError)
        else HandlerFailedError
        if final
        else UserCodeError
        if user_code
        else StreamsProcessingError
    )
    return error_type(
        f"processing failed: {message}",
        task_id=task_id,
        node=node,
        topic=topic,
        partition=partition if topic is not None else None,
        offset=offset,
    )


class Failures:
    """The row failures of the piece in progress, and the error stopping the task."""

    def __init__(
        self, task_id: str, partition: int, record_errors: RecordErrors | None = None
    ) -> None:
        self.task_id = task_id
        self.partition = partition
        self.record_errors = record_errors
        self.rows: list[RowFailure] = []
        #: the located error on its way out of the task (never a row failure)
        self.fatal: StreamsProcessingError | None = None

    def stop(
        self,
        error: Exception,
        node: str | None,
        topic: str | None,
        offset: int | None = None,
        *,
        user_code: bool = False,
        final: bool = False,
    ) -> StreamsProcessingError:
        """The located error for ``error`` raised in ``node`` (by user code: ``user_code``;
        after a handler function answered FAIL: ``final``); nodes above re-raise it."""
        if error is self.fatal:
            return error
        located = processing_error(
            error,
            task_id=self.task_id,
            node=node,
            topic=topic,
            partition=self.partition,
            offset=offset,
            final=final,
            user_code=user_code,
        )
        self.fatal = located
        return located

    def unsourced(self, error: Exception, node: str, batch: ColumnBatch, position: int) -> int:
        """A row that derives from no input row (forwarded by a punctuator or a cache flush)
        failed in ``node``: the processing exception handler decides about it alone, as
        about any record (CONTINUE: the position after it); otherwise the task stops."""
        user_code = not from_infrastructure(error)
        response = None
        if user_code and not isinstance(error, BufferFullError):
            record = batch.record(position)
            response = self.handle_without_input(error, node, record, record.timestamp)
            if response is ProcessingHandlerResponse.CONTINUE:
                return position + 1
        final = response is not None
        raise self.stop(error, node, batch.topic, user_code=user_code, final=final) from error

    def handle_without_input(
        self, error: Exception, node: str, record: Record | None, timestamp: int
    ) -> ProcessingHandlerResponse | None:
        """What the processing exception handler answers for an error without an input
        record (``RecordErrors.on_error_without_input``); a handler function that fails
        stops the task."""
        if self.record_errors is None:
            return None
        try:
            return self.record_errors.on_error_without_input(error, node, record, timestamp)
        except HandlerFailedError as failed:
            self.fatal = failed
            raise

    def take(self) -> list[RowFailure]:
        """The piece's failures in input order, leaving none. An input row has one: when
        several outputs of one input row failed at different nodes, the first reported."""
        failures, self.rows = self.rows, []
        first: dict[int, RowFailure] = {}
        for failure in failures:
            first.setdefault(failure.row, failure)
        return [first[row] for row in sorted(first)]
