"""Error handlers of records (Kafka's KIP-1033): the context they see and what they answer.

``processing_exception_handler`` and ``deserialization_exception_handler`` are ``"fail"``,
``"log_and_continue"`` or a function ``(error_context, record, exception) ->
ProcessingHandlerResponse``; a plain module-level function survives shipping to executors.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The named handlers (a function is the third form).
HANDLER_NAMES = ("fail", "log_and_continue")


class ProcessingHandlerResponse(enum.Enum):
    """What a handler decides about a record that failed: skip it, or stop the application."""

    CONTINUE = "continue"
    FAIL = "fail"


@dataclass(frozen=True)
class ErrorHandlerContext:
    """Where a record failed: the processor (for deserialization: the source node), the task,
    and the input record's topic, partition, offset, timestamp and headers. For a punctuator
    that raised there is no record: topic, partition and offset are None and the timestamp
    is the punctuation's."""

    processor_node_id: str | None
    task_id: str
    topic: str | None
    partition: int | None
    offset: int | None
    timestamp: int
    headers: tuple[tuple[str, bytes], ...] = ()


#: A handler function: ``(error_context, record, exception) -> ProcessingHandlerResponse``.
Handler = Callable[[ErrorHandlerContext, Any, Exception], ProcessingHandlerResponse]


def is_handler(value: Any) -> bool:
    """Whether ``value`` is a valid handler setting: a handler name or a function."""
    return (isinstance(value, str) and value in HANDLER_NAMES) or (
        callable(value) and not isinstance(value, type)
    )
