"""The processors behind stateless DSL operators."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtide.processor import drops
from streamtide.processor.api import Processor
from streamtide.record import Record

#: Marks an aggregation without initializer (``reduce``): the first value is the aggregate.
NO_INITIALIZER: Any = object()


def count_initializer() -> int:
    """A count's initializer (named, so a batch twin can recognise a count)."""
    return 0


def count_aggregator(_key: Any, _value: Any, count: Any) -> Any:
    """A count's aggregator: one more."""
    return count + 1


def count_merger(_key: Any, left: Any, right: Any) -> Any:
    """A count's merger of two sessions: the sum."""
    return left + right


class FilterProcessor(Processor):
    def __init__(self, predicate: Callable[[Any, Any], bool], keep: bool) -> None:
        self.predicate = predicate
        self.keep = keep

    def process(self, record: Record) -> None:
        if bool(self.predicate(record.key, record.value)) is self.keep:
            self.context.forward(record)


class MapProcessor(Processor):
    """``mapper(key, value) -> (key, value)``."""

    def __init__(self, mapper: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        result = self.mapper(record.key, record.value)
        try:
            key, value = result
        except (TypeError, ValueError):
            raise TypeError(f"map() must return a (key, value) pair, got {result!r}") from None
        self.context.forward(Record(key, value, record.timestamp, record.headers))


class MapValuesProcessor(Processor):
    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        self.context.forward(record.with_value(self.mapper(record.value)))


class FlatMapProcessor(Processor):
    """``mapper(key, value) -> iterable of (key, value)``."""

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        for key, value in self.mapper(record.key, record.value):
            self.context.forward(Record(key, value, record.timestamp, record.headers))


class FlatMapValuesProcessor(Processor):
    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        for value in self.mapper(record.value):
            self.context.forward(record.with_value(value))


class SelectKeyProcessor(Processor):
    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        self.context.forward(record.with_key(self.mapper(record.key, record.value)))


class PeekProcessor(Processor):
    """Calls ``action(key, value)`` and forwards the record unchanged (or not, for foreach)."""

    def __init__(self, action: Callable[[Any, Any], None], forward: bool) -> None:
        self.action = action
        self.forward = forward

    def process(self, record: Record) -> None:
        self.action(record.key, record.value)
        if self.forward:
            self.context.forward(record)


class PassThroughProcessor(Processor):
    def process(self, record: Record) -> None:
        self.context.forward(record)


class BranchProcessor(Processor):
    """Sends each record to the first branch whose predicate holds (or the default)."""

    def __init__(
        self, branches: list[tuple[Callable[[Any, Any], bool], str]], default: str | None
    ) -> None:
        self.branches = branches
        self.default = default

    def process(self, record: Record) -> None:
        for predicate, child in self.branches:
            if predicate(record.key, record.value):
                self.context.forward(record, child)
                return
        if self.default is not None:
            self.context.forward(record, self.default)


class DropNullKeyProcessor(Processor):
    """Drops records without key before a repartition (counted in ``dropped-records``)."""

    def process(self, record: Record) -> None:
        if record.key is None:
            drops.record_drop(self.context.metrics, drops.NULL_KEY_OR_VALUE)
            return
        self.context.forward(record)
