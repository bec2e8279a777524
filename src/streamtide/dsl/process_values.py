"""``KStream.process_values``: a Processor API node that may change values but not keys
(Kafka Streams' ``processValues``, KIP-820).

Because the key stays, the records stay in their partition: no repartition follows, unlike
``process``. Kafka enforces this with a record type without a key setter; here the user's
processor gets ordinary ``Record`` objects and a context whose ``forward`` checks that a
record forwarded while an input record is processed has that record's key (equal by ``==``).
A forward with another key raises ``KeyChangedError`` naming both keys: that input record
fails (the processing exception handler decides what happens next) and nothing it forwarded
with the wrong key goes on. Punctuators and flush listeners run without an input record:
what they forward is not checked (as in Kafka, where they can only forward records kept from
earlier input, they must forward keys this task has processed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtide.errors import StreamtideError
from streamtide.processor.api import (
    Cancellable,
    Metrics,
    Processor,
    ProcessorContext,
    ProcessorSupplier,
    PunctuationType,
)
from streamtide.record import Record, RecordMetadata
from streamtide.time import Duration

_NO_RECORD = object()


class KeyChangedError(StreamtideError, ValueError):
    """A ``process_values`` processor forwarded a record with a key other than its input's."""


class FixedKeyContext(ProcessorContext):
    """The task's context for a ``process_values`` processor: everything as usual, but
    ``forward`` refuses a changed key while an input record is processed."""

    def __init__(self, inner: ProcessorContext, node: str) -> None:
        self._inner = inner
        self._node = node
        #: the key of the input record being processed (``_NO_RECORD``: none)
        self.input_key: Any = _NO_RECORD

    @property
    def task_id(self) -> str:
        return self._inner.task_id

    @property
    def application_id(self) -> str:
        return self._inner.application_id

    @property
    def metrics(self) -> Metrics:
        return self._inner.metrics

    def forward(self, record: Record, child: str | None = None) -> None:
        key = self.input_key
        if key is not _NO_RECORD and record.key is not key and record.key != key:
            raise KeyChangedError(
                f"process_values processor {self._node!r} forwarded key {record.key!r} for an "
                f"input record with key {key!r}: process_values may change values only; "
                f"use process() to change keys (the stream is then repartitioned)"
            )
        self._inner.forward(record, child)

    def schedule(
        self,
        interval: Duration,
        punctuation_type: PunctuationType,
        punctuator: Callable[[int], None],
        align: str = "epoch",
    ) -> Cancellable:
        return self._inner.schedule(interval, punctuation_type, punctuator, align)

    def get_state_store(self, name: str) -> Any:
        return self._inner.get_state_store(name)

    def current_stream_time_ms(self) -> int:
        return self._inner.current_stream_time_ms()

    def current_system_time_ms(self) -> int:
        return self._inner.current_system_time_ms()

    def record_metadata(self) -> RecordMetadata | None:
        return self._inner.record_metadata()

    def register_flush_listener(self, listener: Callable[[], None]) -> None:
        self._inner.register_flush_listener(listener)


class FixedKeyProcessor(Processor):
    """Runs the user's processor with a ``FixedKeyContext``."""

    def __init__(self, processor: Processor, node: str) -> None:
        self.processor = processor
        self.node = node
        self.fixed: FixedKeyContext | None = None

    def init(self, context: ProcessorContext) -> None:
        self.fixed = FixedKeyContext(context, self.node)
        init = getattr(self.processor, "init", None)
        if init is not None:
            init(self.fixed)

    def process(self, record: Record) -> None:
        fixed = self.fixed
        fixed.input_key = record.key  # type: ignore[union-attr]
        try:
            self.processor.process(record)
        finally:
            fixed.input_key = _NO_RECORD  # type: ignore[union-attr]

    def close(self) -> None:
        close = getattr(self.processor, "close", None)
        if close is not None:
            close()


def fixed_key_supplier(supplier: ProcessorSupplier, node: str) -> Callable[[], Processor]:
    """A supplier of the user's processors, each run with a ``FixedKeyContext``."""
    return lambda: FixedKeyProcessor(supplier(), node)
