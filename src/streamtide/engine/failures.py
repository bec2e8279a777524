"""Failures of work units, as the executor reports them and the driver judges them.

A work unit that raises does not fail its Spark task (which Spark would retry, logging a long
trace each time); it returns a failure report instead: the error's type, message and fields,
its cause, a short trace, and whether retrying can help. The driver rebuilds the error as its
own ``streamtide.errors`` type and retries the stage only for errors that may be transient.

Where an error came from decides (docs/engine.md, "Failures"). An error is final at once when
user code raised it (a ``UserCodeError``: the task marks what comes out of processors, DSL
functions, serdes, partitioners, timestamp extractors and punctuators, so the failing record
never reaches user code a second time), when it is *fatal* (corrupt data, bad configuration, a
record that cannot be deserialized or has a negative timestamp, a full suppression buffer that
must shut down, a record an error handler function answered ``FAIL`` for), or when an
exception of a type listed in ``StreamsConfig.fatal_exceptions`` is the error or anywhere in
its chain of causes (also outside user code: a custom store's error, a ``PermissionError``).
Everything else failed in the infrastructure (a lost work unit or executor, I/O, the broker,
RocksDB) and is retried.
"""

from __future__ import annotations

import traceback
from dataclasses import asdict, dataclass
from typing import Any

from streamtide import errors
from streamtide.errors import (
    BufferFullError,
    ConfigError,
    CorruptLogError,
    CorruptRecordError,
    FencedError,
    HandlerFailedError,
    InputTopicChangedError,
    InvalidTimestampError,
    SerdeError,
    StreamsProcessingError,
    StreamtideError,
    TopologyError,
    UnsupportedVersionError,
    UserCodeError,
)

#: Errors that no retry can heal.
FATAL_TYPES: tuple[type[BaseException], ...] = (
    BufferFullError,
    ConfigError,
    CorruptLogError,
    CorruptRecordError,
    FencedError,
    HandlerFailedError,
    InputTopicChangedError,
    InvalidTimestampError,
    TopologyError,
    UnsupportedVersionError,
    UserCodeError,
)
_TRACE_LINES = 25
_FIELDS = ("task_id", "node", "topic", "partition", "offset")


class RemoteTraceback(Exception):
    """The end of the trace of an error raised in a work unit (the cause of its rebuilt
    error on the driver)."""


@dataclass(frozen=True)
class FailureReport:
    """What a work unit reports instead of raising: enough for the driver to rebuild the error
    as its own type, show where it came from, and decide whether to retry."""

    #: the ``streamtide.errors`` type's name, or "" for an error of another type
    type: str
    #: ``"<type>: <text>"`` of the error as raised
    error: str
    message: str
    #: where it happened: task_id, node, topic, partition, offset (None where unknown)
    fields: dict[str, Any]
    cause: str | None
    #: no retry can heal it
    fatal: bool
    #: the last lines of its trace
    trace: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able form a work unit sends."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FailureReport:
        """Read back what ``to_dict`` wrote."""
        return cls(
            type=str(data["type"]),
            error=str(data["error"]),
            message=str(data["message"]),
            fields=dict(data["fields"]),
            cause=None if data["cause"] is None else str(data["cause"]),
            fatal=bool(data["fatal"]),
            trace=str(data["trace"]),
        )


def failure_report(exc: BaseException, fatal_exceptions: tuple[type, ...] = ()) -> FailureReport:
    """The report of ``exc`` raised in a work unit."""
    cause = exc.__cause__ or exc.__context__
    fatal = (
        isinstance(exc, FATAL_TYPES)
        or (
            isinstance(exc, StreamsProcessingError)
            and isinstance(cause, (SerdeError, BufferFullError))
        )
        or any(isinstance(e, fatal_exceptions) for e in _chain(exc))
    )
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return FailureReport(
        type=type(exc).__name__ if _is_ours(type(exc)) else "",
        error=f"{type(exc).__name__}: {exc}",
        message=getattr(exc, "message", None) or str(exc),
        fields={f: getattr(exc, f, None) for f in _FIELDS},
        cause=None if cause is None else f"{type(cause).__name__}: {cause}",
        fatal=fatal,
        trace="\n".join(trace.rstrip().splitlines()[-_TRACE_LINES:]),
    )


def rebuild(report: FailureReport) -> StreamtideError:
    """The driver-side error for a failure report: the same ``streamtide.errors`` type where
    it was one, else a ``StreamtideError`` naming the original type."""
    cls = getattr(errors, report.type, None) if report.type else None
    if isinstance(cls, type) and issubclass(cls, StreamsProcessingError):
        fields = {k: v for k, v in report.fields.items() if v is not None}
        return cls(report.message, **fields)
    if isinstance(cls, type) and issubclass(cls, StreamtideError):
        return cls(report.message)
    return StreamtideError(f"a work unit failed: {report.error}")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (explicit or implicit), each once."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _is_ours(cls: type) -> bool:
    return getattr(errors, cls.__name__, None) is cls
