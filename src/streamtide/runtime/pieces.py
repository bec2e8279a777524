"""How a task cuts its input into pieces and runs each through its graph.

``StreamTask.process`` orders a batch's rows (runs of one source topic at a time) and hands
each run to ``PieceRunner.run``, which cuts it only where exact semantics need a cut:

- a stream-time punctuation falling due ends a piece at the row that makes it due (stream
  times after every row are known up front, so the row is found by bisection), and the task
  punctuates before the next piece: it fires between exactly the records it would fire
  between record by record;
- a row the task cannot process (negative timestamp, key or value it cannot deserialize) is
  handled between pieces, in its turn, and does not move stream time;
- while wall-clock schedules exist, pieces stay small enough to take about 50 ms each, so the
  wall clock is checked at least every ~100 ms of processing (SEMANTICS section 2);
- ``StreamTask.max_piece_rows`` bounds every piece (1: each row goes through the whole graph
  on its own, which tests compare with whole pieces).

A piece goes to its source node as one ``ColumnBatch``; the rows that failed in it go to the
processing exception handler in input order once it is done (``_settle``).
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from streamtide.errors import (
    BufferFullError,
    HandlerFailedError,
    InvalidTimestampError,
    SerdeError,
    StreamsProcessingError,
    from_infrastructure,
)
from streamtide.handlers import ProcessingHandlerResponse
from streamtide.processor import drops
from streamtide.processor.column_batch import ColumnBatch
from streamtide.runtime.columns import InputColumns, RawRecord
from streamtide.runtime.row_failures import RowFailure, processing_error
from streamtide.runtime.source import SourceNode
from streamtide.time import UNKNOWN_TIME

if TYPE_CHECKING:
    from streamtide.runtime.stream_task import StreamTask

log = logging.getLogger(__name__)

#: While wall-clock schedules exist, a piece aims to take at most this long (seconds).
_WALL_PIECE_SECONDS = 0.05


class _RowView:
    """One row of ``InputColumns`` seen as a raw record (for the error paths)."""

    def __init__(self, columns: InputColumns, row: int) -> None:
        self.key = columns.keys[row]
        self.value = columns.values[row]
        self.timestamp = columns.timestamps[row]
        self.headers = columns.headers[row]
        self.offset = columns.offsets[row]


@dataclass
class SourceInput:
    """One source topic's share of a batch: raw columns, deserialized keys and values, and
    the rows that could not be deserialized."""

    topic: str
    source: SourceNode
    columns: InputColumns
    keys: list[Any]
    values: list[Any]
    errors: dict[int, SerdeError]


class PieceRunner:
    """Runs one task's runs of rows piece by piece (see the module docstring)."""

    def __init__(self, task: StreamTask) -> None:
        self.task = task
        self.wall_piece_rows = 16  # adapts so that a piece takes about _WALL_PIECE_SECONDS

    def run(self, source: SourceInput, rows: list[int] | None) -> int:
        """Process consecutive rows of one topic (``rows``: their indices; None: all of the
        topic's rows in order), piece by piece; how many went through."""
        all_timestamps = source.columns.timestamps
        timestamps = all_timestamps if rows is None else [all_timestamps[r] for r in rows]
        n = len(timestamps)
        errors = source.errors
        bad: list[int] = []
        effective = timestamps
        if errors or min(timestamps) < 0:  # rows handled between pieces, in their turn
            bad = [
                p
                for p in range(n)
                if timestamps[p] < 0 or (p if rows is None else rows[p]) in errors
            ]
            effective = list(timestamps)
            for p in bad:
                effective[p] = UNKNOWN_TIME  # stream time does not move for them
        stream_times = list(accumulate(effective, max, initial=self.task.stream_time))
        del stream_times[0]
        bad.append(n)
        done = 0
        start = 0
        for stop in bad:
            while start < stop:
                end = self._piece_end(start, stop, stream_times)
                due = self._stream_due()
                fire = False
                if due is not None:
                    at = bisect_left(stream_times, due, start, end)
                    if at < end:
                        end, fire = at + 1, True
                started = time.perf_counter()
                done += self._run_piece(source, rows, start, end, stream_times)
                if fire:
                    self.task.punctuate_stream_time()
                if self.task.wall_queue:
                    self._adapt_wall_pieces(end - start, time.perf_counter() - started)
                    self.task.punctuate_wall_clock()
                start = end
            if stop < n:
                self._skip(source, stop if rows is None else rows[stop])
                start = stop + 1
        return done

    def _piece_end(self, start: int, stop: int, stream_times: list[int]) -> int:
        """Where a piece starting at ``start`` ends at the latest (``stop``: the next row the
        task handles itself)."""
        end = stop
        if self.task.max_piece_rows is not None:
            end = min(end, start + self.task.max_piece_rows)
        if self.task.wall_queue:
            end = min(end, start + self.wall_piece_rows)
        return end

    def _adapt_wall_pieces(self, rows: int, seconds: float) -> None:
        """Size the next pieces so that each takes about ``_WALL_PIECE_SECONDS``."""
        if seconds > _WALL_PIECE_SECONDS:
            self.wall_piece_rows = max(1, self.wall_piece_rows // 2)
        elif seconds < _WALL_PIECE_SECONDS / 2 and rows >= self.wall_piece_rows:
            self.wall_piece_rows = min(self.wall_piece_rows * 2, 1 << 20)

    def _stream_due(self) -> int | None:
        """When the stream-time queue next needs a check (None: never)."""
        if not self.task.stream_queue:
            return None
        return self.task.stream_queue.next_check_time()

    def _run_piece(
        self,
        source: SourceInput,
        rows: list[int] | None,
        start: int,
        end: int,
        stream_times: list[int],
    ) -> int:
        """Hand positions ``[start, end)`` of a run to the source node as one batch; settle
        the rows that failed; how many went through."""
        columns = source.columns
        if rows is None:
            whole = start == 0 and end == len(columns.timestamps)
            piece_rows = list(range(start, end))
            keys = source.keys if whole else source.keys[start:end]
            values = source.values if whole else source.values[start:end]
            timestamps = columns.timestamps if whole else columns.timestamps[start:end]
            headers = columns.headers if whole else columns.headers[start:end]
            offsets = columns.offsets if whole else columns.offsets[start:end]
        else:
            piece_rows = rows[start:end]
            keys = [source.keys[r] for r in piece_rows]
            values = [source.values[r] for r in piece_rows]
            timestamps = [columns.timestamps[r] for r in piece_rows]
            headers = [columns.headers[r] for r in piece_rows]
            offsets = [columns.offsets[r] for r in piece_rows]
        times = stream_times[start:end]
        batch = ColumnBatch(
            source.topic,
            self.task.partition,
            columns,
            piece_rows,
            keys,
            values,
            timestamps,
            headers,
            offsets,
            times,
        )
        self.task.stream_time = times[-1]
        self.task.failures.rows.clear()
        source.source.emit(batch)
        failed = self.task.failures.take()
        if failed:
            self._settle(source, failed)
        return len(piece_rows) - len(failed)

    def _settle(self, source: SourceInput, failed: list[RowFailure]) -> None:
        """Hand the piece's failed rows to the processing exception handler, in input order:
        skip each it lets go; stop at the first it does not (or at a full buffer, or at a
        failure of the infrastructure, which is not the row's fault and is retried)."""
        topic = source.topic
        for failure in failed:
            raw = _RowView(source.columns, failure.row)
            error = failure.error
            response = None
            user_code = not from_infrastructure(error)
            if user_code and not isinstance(error, BufferFullError):
                response = self.task.record_errors.on_processing_error(
                    error, failure.node, failure.record(), topic, raw
                )
                if response is ProcessingHandlerResponse.CONTINUE:
                    continue
            raise processing_error(
                error,
                task_id=self.task.task_id,
                node=failure.node,
                topic=topic,
                partition=self.task.partition,
                offset=raw.offset,
                final=response is not None,
                user_code=user_code,
            ) from error

    def _skip(self, source: SourceInput, row: int) -> None:
        """A row the task cannot process: a negative timestamp or a serde failure."""
        raw = _RowView(source.columns, row)
        if raw.timestamp < 0:
            self._drop_negative(source.topic, raw)
        else:
            self._on_deserialization_error(source.topic, raw, source.errors[row])

    def _drop_negative(self, topic: str, raw: RawRecord) -> None:
        if self.task.invalid_timestamp_handler == "fail":
            raise InvalidTimestampError(
                f"the record has a negative timestamp {raw.timestamp} (set "
                "invalid_timestamp_handler='log_and_skip' to skip such records)",
                task_id=self.task.task_id,
                topic=topic,
                partition=self.task.partition,
                offset=raw.offset,
            )
        drops.record_drop(self.task.metrics, drops.INVALID_TIMESTAMP)
        log.warning(
            "task %s: dropped a record with negative timestamp %d (topic %s, partition %d, "
            "offset %s)",
            self.task.task_id,
            raw.timestamp,
            topic,
            self.task.partition,
            raw.offset,
        )

    def _on_deserialization_error(self, topic: str, raw: RawRecord, exc: SerdeError) -> None:
        where = f"topic {topic!r}, partition {self.task.partition}, offset {raw.offset}"
        source = self.task.source_name(topic)
        response = self.task.record_errors.on_deserialization_error(exc, source, topic, raw)
        if response is not ProcessingHandlerResponse.CONTINUE:
            error_type = StreamsProcessingError if response is None else HandlerFailedError
            raise error_type(
                f"cannot deserialize the record at {where}: {exc}",
                task_id=self.task.task_id,
                topic=topic,
                partition=self.task.partition,
                offset=raw.offset,
            ) from exc
