"""What a task does with a record that failed: ask the configured handler, then skip it
(counted, and written to the dead-letter topic) or stop.

Handlers are ``"fail"``, ``"log_and_continue"`` or a function (``streamtide.handlers``). A
skipped record goes to the dead-letter topic as its raw input key and value bytes, with its
headers plus ``streamtide.exception`` (the exception's class), ``streamtide.error`` (its
message), ``streamtide.topic``, ``streamtide.partition``, ``streamtide.offset`` and
``streamtide.processor`` (where it came from).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from streamtide.errors import HandlerFailedError
from streamtide.handlers import ErrorHandlerContext, Handler, ProcessingHandlerResponse
from streamtide.log.api import LogRecord
from streamtide.processor import drops
from streamtide.processor.api import Metrics
from streamtide.runtime.collector import RecordCollector
from streamtide.runtime.columns import RawRecord

log = logging.getLogger(__name__)

CONTINUE = ProcessingHandlerResponse.CONTINUE
FAIL = ProcessingHandlerResponse.FAIL


class RecordErrors:
    """The error handlers of one task, with where skipped records go."""

    def __init__(
        self,
        task_id: str,
        partition: int,
        collector: RecordCollector,
        metrics: Metrics,
        *,
        processing: str | Handler = "fail",
        deserialization: str | Handler = "fail",
        dead_letter_topic: str | None = None,
        deserialization_dead_letter_topic: str,
    ) -> None:
        self.task_id = task_id
        self.partition = partition
        self.collector = collector
        self.metrics = metrics
        self.processing_handler = processing
        self.deserialization_handler = deserialization
        self.dead_letter_topic = dead_letter_topic
        self.deserialization_dead_letter_topic = deserialization_dead_letter_topic

    def on_processing_error(
        self, exc: Exception, node: str | None, record: Any, topic: str, raw: RawRecord
    ) -> ProcessingHandlerResponse | None:
        """Skip the record when the processing handler says so (CONTINUE); FAIL when a
        handler function said so; None when the handler is ``"fail"``."""
        handler = self.processing_handler
        if handler == "fail":
            return None
        context = self._context(node, topic, raw)
        if callable(handler):
            response = _ask(handler, context, record, exc, "processing_exception_handler")
            if response is FAIL:
                return FAIL
        drops.record_drop(self.metrics, drops.PROCESSING_ERROR)
        log.warning(
            "task %s: skipped the record at topic %r, partition %d, offset %s: processor %r "
            "raised %s: %s",
            self.task_id,
            topic,
            self.partition,
            raw.offset,
            node,
            type(exc).__name__,
            exc,
        )
        if self.dead_letter_topic is not None:
            self._send(self.dead_letter_topic, exc, node, topic, raw)
        return CONTINUE

    def on_error_without_input(
        self, exc: Exception, node: str, record: Any, timestamp: int
    ) -> ProcessingHandlerResponse | None:
        """A punctuator of ``node`` raised (``record`` None), or ``node`` raised for a record
        that derives from no input record (one a punctuator or a cache flush forwarded): the
        processing handler decides, as in Kafka Streams (KIP-1033), given a context without
        topic, partition or offset. CONTINUE drops the punctuation or the record (counted as
        a dropped record; nothing goes to a dead-letter topic: there are no input bytes); FAIL
        when a handler function said so; None for ``"fail"``."""
        handler = self.processing_handler
        if handler == "fail":
            return None
        if callable(handler):
            context = ErrorHandlerContext(node, self.task_id, None, None, None, timestamp)
            response = _ask(handler, context, record, exc, "processing_exception_handler")
            if response is FAIL:
                return FAIL
        drops.record_drop(self.metrics, drops.PROCESSING_ERROR)
        log.warning(
            "task %s: processor %r raised %s: %s (%s at %d); continuing",
            self.task_id,
            node,
            type(exc).__name__,
            exc,
            "in a punctuator" if record is None else "for a record of no input record",
            timestamp,
        )
        return CONTINUE

    def on_deserialization_error(
        self, exc: Exception, node: str, topic: str, raw: RawRecord
    ) -> ProcessingHandlerResponse | None:
        """Like ``on_processing_error`` for a record that cannot be deserialized; a skipped
        one always goes to the dead-letter topic."""
        handler = self.deserialization_handler
        if handler == "fail":
            return None
        if callable(handler):
            context = self._context(node, topic, raw)
            raw_record = _log_record(raw)
            response = _ask(handler, context, raw_record, exc, "deserialization_exception_handler")
            if response is FAIL:
                return FAIL
        self.metrics.increment("skipped-records")
        drops.record_drop(self.metrics, drops.DESERIALIZATION_ERROR, count_total=False)
        log.warning(
            "task %s: skipped the record at topic %r, partition %d, offset %s: %s",
            self.task_id,
            topic,
            self.partition,
            raw.offset,
            exc,
        )
        self._send(self.deserialization_dead_letter_topic, exc, node, topic, raw)
        return CONTINUE

    def _context(self, node: str | None, topic: str, raw: RawRecord) -> ErrorHandlerContext:
        return ErrorHandlerContext(
            processor_node_id=node,
            task_id=self.task_id,
            topic=topic,
            partition=self.partition,
            offset=raw.offset,
            timestamp=raw.timestamp,
            headers=tuple(raw.headers or ()),
        )

    def _send(
        self, dead_letters: str, exc: Exception, node: str | None, topic: str, raw: RawRecord
    ) -> None:
        exception = type(exc)
        headers = (
            *tuple(raw.headers or ()),
            ("streamtide.exception", f"{exception.__module__}.{exception.__qualname__}".encode()),
            ("streamtide.error", str(exc).encode()),
            ("streamtide.topic", topic.encode()),
            ("streamtide.partition", str(self.partition).encode()),
            ("streamtide.offset", str(raw.offset).encode()),
            ("streamtide.processor", str(node).encode()),
        )
        partitions = self.collector.partitions_for(dead_letters)
        self.collector.send(
            dead_letters,
            self.partition % partitions,
            raw.key,
            raw.value,
            raw.timestamp,
            headers,
        )


def _ask(
    handler: Handler, context: ErrorHandlerContext, record: Any, exc: Exception, setting: str
) -> ProcessingHandlerResponse:
    """The handler's answer; a handler that raises or answers something else stops the app."""
    failed = partial(
        HandlerFailedError,
        task_id=context.task_id,
        node=context.processor_node_id,
        topic=context.topic,
        partition=context.partition,
        offset=context.offset,
    )
    try:
        response = handler(context, record, exc)
    except Exception as raised:
        raise failed(
            f"{setting} raised {type(raised).__name__}: {raised} while handling "
            f"{type(exc).__name__}: {exc}"
        ) from raised
    if not isinstance(response, ProcessingHandlerResponse):
        raise failed(
            f"{setting} must return ProcessingHandlerResponse.CONTINUE or FAIL, "
            f"got {response!r} (handling {type(exc).__name__}: {exc})"
        ) from exc
    return response


def _log_record(raw: RawRecord) -> LogRecord:
    if isinstance(raw, LogRecord):
        return raw
    return LogRecord(raw.key, raw.value, raw.timestamp, tuple(raw.headers or ()), raw.offset)
