"""The record cache of table-producing operators: collapse updates per key until commit."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from streamtide.dsl.change import Change
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator
from streamtide.record import Record
from streamtide.window import Window, Windowed


def _cache_key(key: Any) -> Hashable:
    try:
        hash(key)
        return key
    except TypeError:
        return ("unhashable", type(key).__name__, repr(key))


class EmitCache:
    """Forwards table updates at once, or, with caching on, only the latest per key at commit.

    Caching is on when the task runs with the cache enabled (the engine's default; off in the
    test driver) and the operator's ``Materialized`` did not disable it. Flushed updates are
    emitted in the order their keys were last updated: handed to ``deliver`` as one list
    (a column operator emits them as a batch), by default forwarded one by one.

    A table update that carries its old value (``Change(new, old)``) keeps, while it waits,
    the old value of the key's first update since the last flush: the value that flush
    emitted, as Kafka's caching store sends it.

    An update marked ``created`` introduces a key that no earlier flush emitted (a new session
    window); if a tombstone for that key follows before the next flush, both vanish: a key
    that was never emitted needs no tombstone (Kafka's caching session store likewise forwards
    nothing when the new and the last flushed value are both null).
    """

    def __init__(
        self,
        context: ProcessorContext,
        caching_allowed: bool = True,
        deliver: Callable[[list[Record]], None] | None = None,
    ) -> None:
        self.context = context
        self.enabled = caching_allowed and bool(getattr(context, "cache_enabled", False))
        self._deliver = deliver or self._forward_each
        self._pending: dict[Hashable, Any] = {}  # a Record, or emit_window's parts
        self._created: set[Hashable] = set()
        if self.enabled:
            context.register_flush_listener(self.flush)

    def emit(self, record: Record, created: bool = False) -> None:
        if not self.enabled:
            self.context.forward(record)
            return
        pending = self._pending
        key = record.key
        if key.__class__ is Windowed:  # a plain tuple hashes without a Python-level call
            window = key.window
            key = (key.key, window.start, window.end)
        try:
            previous = pending.pop(key, None)  # the last update moves to the end of the order
        except TypeError:  # an unhashable key (a dict, a list): use a stand-in
            key = _cache_key(key)
            previous = pending.pop(key, None)
        if (
            previous is not None
            and record.value.__class__ is Change
            and previous.value.__class__ is Change
        ):
            # the old value of what the flush emits is what the last flush emitted
            record = record.with_value(Change(record.value.new, previous.value.old))
        if created:
            self._created.add(key)
        elif record.value is None and key in self._created:
            self._created.discard(key)  # never emitted: no update, no tombstone
            return
        pending[key] = record

    @property
    def pending(self) -> dict[Hashable, Any]:
        """The pending updates in emit order, until the next flush replaces them: an operator
        updating many windows puts ``emit_window``'s entries here itself, as ``(key, start,
        end) -> (key, start, end, value, timestamp, headers, created)`` (moving an updated key
        to the end), with no call per update."""
        return self._pending

    def emit_window(
        self,
        key: Any,
        start: int,
        end: int,
        value: Any,
        timestamp: int,
        headers: Any,
        created: bool = False,
    ) -> None:
        """``emit`` of ``Record(Windowed(key, Window(start, end)), value, timestamp,
        headers)``, building the record only if it is forwarded (at once, or at flush when it
        is still the key's latest update)."""
        if not self.enabled:
            self.context.forward(
                Record(Windowed(key, Window(start, end)), value, timestamp, headers)
            )
            return
        pending = self._pending
        ident: Hashable = (key, start, end)
        try:
            found = ident in pending  # (``in`` and ``del``: no method call on this hot path)
        except TypeError:
            ident = _cache_key(ident)
            found = ident in pending
        previous = None
        if found:
            previous = pending[ident]
            del pending[ident]  # the last update moves to the end of the emit order
        # the last element says whether the key was created since the last flush (emit keeps
        # that in ``_created``; here it travels with the pending update)
        if not created and previous is not None and previous[6]:
            if value is None:
                return  # never emitted: no update, no tombstone
            created = True
        pending[ident] = (key, start, end, value, timestamp, headers, created)

    def flush(self) -> None:
        self._created.clear()
        pending, self._pending = self._pending, {}
        records = []
        for record in pending.values():
            if record.__class__ is tuple:  # from emit_window
                key, start, end, value, timestamp, headers, _ = record
                record = Record(Windowed(key, Window(start, end)), value, timestamp, headers)
            records.append(record)
        if records:
            self._deliver(records)

    def _forward_each(self, records: list[Record]) -> None:
        forward = self.context.forward
        for record in records:
            forward(record)

    def __len__(self) -> int:
        return len(self._pending)


def emit_as_batch(operator: ColumnOperator) -> Callable[[list[Record]], None]:
    """A cache's ``deliver`` for a column operator: the flushed updates emitted as one batch
    of rows of no input row."""

    def deliver(records: list[Record]) -> None:
        context = operator.context
        operator.emit(
            ColumnBatch.from_records(
                context.partition,  # type: ignore[attr-defined]
                records,
                context.current_stream_time_ms(),
            )
        )

    return deliver
