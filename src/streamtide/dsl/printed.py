"""``Printed`` and its operator: ``KStream.print`` writes each record as a line of text.

The line is Kafka Streams' ``[label]: key, value`` (``None`` printed as ``null``); the label
defaults to the print node's name. On the Spark engine a print runs on the executors: lines
go to the stdout of the executor's worker process, and ``to_file`` writes to a file on the
executor's filesystem (appending, since every batch opens it anew).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import IO, Any

from streamtide.dsl.params import ensure_callable
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator, call_rows


def _text(item: Any) -> str:
    return "null" if item is None else str(item)


def _key_value(key: Any, value: Any) -> str:
    return f"{_text(key)}, {_text(value)}"


@dataclass(frozen=True)
class Printed:
    """Where and how ``KStream.print`` writes: ``Printed.to_sys_out().with_label("clicks")``."""

    path: str | None = None
    label: str | None = None
    mapper: Callable[[Any, Any], str] = _key_value
    name: str | None = None

    @classmethod
    def to_sys_out(cls) -> Printed:
        """Print to standard output (of the executor's worker on the engine)."""
        return cls()

    @classmethod
    def to_file(cls, path: str) -> Printed:
        """Append to the file ``path`` (on the executor's filesystem on the engine)."""
        if not isinstance(path, str) or not path:
            raise ValueError(f"to_file needs a non-empty path, got {path!r}")
        return cls(path=path)

    def with_label(self, label: str) -> Printed:
        """Print ``[label]: ...`` instead of the node name."""
        return replace(self, label=str(label))

    def with_key_value_mapper(self, mapper: Callable[[Any, Any], str]) -> Printed:
        """Print ``mapper(key, value)`` after the label instead of ``key, value``."""
        return replace(self, mapper=ensure_callable(mapper, "key value mapper"))

    def with_name(self, name: str) -> Printed:
        return replace(self, name=name)


class PrintOperator(ColumnOperator):
    """Writes one ``[label]: key, value`` line per row (a terminal node); a batch's lines are
    written at once."""

    def __init__(self, printed: Printed, label: str) -> None:
        self.printed = printed
        self.label = label
        self._file: IO[str] | None = None

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        if self.printed.path is not None:
            self._file = open(self.printed.path, "a", encoding="utf-8")  # noqa: SIM115

    def process_batch(self, batch: ColumnBatch) -> None:
        _, texts = call_rows(self, batch, self.printed.mapper, batch.keys, batch.values)
        prefix = f"[{self.label}]: "
        (self._file or sys.stdout).write("".join(f"{prefix}{text}\n" for text in texts))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        else:
            sys.stdout.flush()
