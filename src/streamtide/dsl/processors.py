"""The operators behind stateless DSL operations, on the column contract.

Each calls its user function once per row in its own loop (``call_rows``) and emits one batch:
a row the function raised for is reported and left out (``processor.operator``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtide.dsl.change import Change
from streamtide.processor import drops
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator, call_rows

#: Marks an aggregation without initializer (``reduce``): the first value is the aggregate.
NO_INITIALIZER: Any = object()


def count_initializer() -> int:
    """A count's initializer (named, so an aggregation can recognise a count)."""
    return 0


def count_aggregator(_key: Any, _value: Any, count: Any) -> Any:
    """A count's aggregator: one more."""
    return count + 1


def count_merger(_key: Any, left: Any, right: Any) -> Any:
    """A count's merger of two sessions: the sum."""
    return left + right


def _kept(positions: list[int] | None, results: list[Any], keep: bool) -> list[int]:
    """The positions whose result is true (``keep``) or false (not ``keep``)."""
    if positions is None:
        if keep:
            return [p for p, result in enumerate(results) if result]
        return [p for p, result in enumerate(results) if not result]
    if keep:
        return [p for p, result in zip(positions, results) if result]
    return [p for p, result in zip(positions, results) if not result]


class FilterOperator(ColumnOperator):
    """``filter`` (``keep``) and ``filter_not``: rows for which ``predicate(key, value)`` is
    true (false)."""

    def __init__(self, predicate: Callable[[Any, Any], bool], keep: bool) -> None:
        self.predicate = predicate
        self.keep = keep

    def process_batch(self, batch: ColumnBatch) -> None:
        positions, results = call_rows(self, batch, self.predicate, batch.keys, batch.values)
        self.emit(batch.take(_kept(positions, results, self.keep)))


class MapOperator(ColumnOperator):
    """``mapper(key, value) -> (key, value)``."""

    def __init__(self, mapper: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        self.mapper = mapper

    def process_batch(self, batch: ColumnBatch) -> None:
        positions, results = call_rows(self, batch, self.mapper, batch.keys, batch.values)
        try:
            keys = [key for key, _ in results]
            values = [value for _, value in results]
        except (TypeError, ValueError):  # some result is no pair: find and report it
            positions, keys, values = self._pairs(batch, positions, results)
        out = batch if positions is None else batch.take(positions)
        self.emit(out.with_keys_values(keys, values))

    def _pairs(
        self, batch: ColumnBatch, positions: list[int] | None, results: list[Any]
    ) -> tuple[list[int], list[Any], list[Any]]:
        kept: list[int] = []
        keys: list[Any] = []
        values: list[Any] = []
        skip_to = 0
        for position, result in zip(positions or range(len(results)), results):
            if position < skip_to:
                continue
            try:
                key, value = result
            except (TypeError, ValueError):
                error = TypeError(f"map() must return a (key, value) pair, got {result!r}")
                skip_to = self.fail(batch, position, error)
                continue
            kept.append(position)
            keys.append(key)
            values.append(value)
        return kept, keys, values


class MapValuesOperator(ColumnOperator):
    """``mapper(value) -> value``; keys stay."""

    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self.mapper = mapper

    def process_batch(self, batch: ColumnBatch) -> None:
        positions, values = call_rows(self, batch, self.mapper, batch.values)
        out = batch if positions is None else batch.take(positions)
        self.emit(out.with_values(values))


class SelectKeyOperator(ColumnOperator):
    """``mapper(key, value) -> key``."""

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def process_batch(self, batch: ColumnBatch) -> None:
        positions, keys = call_rows(self, batch, self.mapper, batch.keys, batch.values)
        out = batch if positions is None else batch.take(positions)
        self.emit(out.with_keys(keys))


class _FlatOperator(ColumnOperator):
    """Zero or more rows per row, from an iterable the mapper returns."""

    def _expand(
        self, batch: ColumnBatch, positions: list[int] | None, results: list[Any], pairs: bool
    ) -> None:
        """Emit the items of each result; an iterable that raises while it is read fails
        its row after the items it gave (they were forwarded, record at a time)."""
        out_positions: list[int] = []
        keys: list[Any] = []
        values: list[Any] = []
        batch_keys = batch.keys
        skip_to = 0
        for position, items in zip(positions or range(len(results)), results):
            if position < skip_to:
                continue
            try:
                for item in items:
                    if pairs:
                        key, value = item
                    else:
                        key, value = batch_keys[position], item
                    out_positions.append(position)
                    keys.append(key)
                    values.append(value)
            except Exception as error:
                skip_to = self.fail(batch, position, error)
        self.emit(batch.derive(out_positions, keys, values))


class FlatMapOperator(_FlatOperator):
    """``mapper(key, value) -> iterable of (key, value)``."""

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def process_batch(self, batch: ColumnBatch) -> None:
        positions, results = call_rows(self, batch, self.mapper, batch.keys, batch.values)
        self._expand(batch, positions, results, pairs=True)


class FlatMapValuesOperator(_FlatOperator):
    """``mapper(value) -> iterable of values``; keys stay."""

    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self.mapper = mapper

    def process_batch(self, batch: ColumnBatch) -> None:
        positions, results = call_rows(self, batch, self.mapper, batch.values)
        self._expand(batch, positions, results, pairs=False)


class PeekOperator(ColumnOperator):
    """Calls ``action(key, value)`` per row and passes the rows on (``peek``), or not
    (``foreach``)."""

    def __init__(self, action: Callable[[Any, Any], None], forward: bool) -> None:
        self.action = action
        self.forward = forward

    def process_batch(self, batch: ColumnBatch) -> None:
        positions, _ = call_rows(self, batch, self.action, batch.keys, batch.values)
        if self.forward:
            self.emit(batch if positions is None else batch.take(positions))


class PassThroughOperator(ColumnOperator):
    """Hands its rows on unchanged (``merge``, the branches of ``split``)."""

    def process_batch(self, batch: ColumnBatch) -> None:
        self.emit(batch)


class BranchOperator(ColumnOperator):
    """Sends each row to the first branch whose predicate holds (or to the default)."""

    def __init__(
        self, branches: list[tuple[Callable[[Any, Any], bool], str]], default: str | None
    ) -> None:
        self.branches = branches
        self.default = default

    def process_batch(self, batch: ColumnBatch) -> None:
        routes: list[str | None] = [self.default] * len(batch.rows)
        remaining = batch
        left = list(range(len(batch.rows)))  # positions in ``batch`` still unmatched
        failed: set[int] = set()
        for predicate, child in self.branches:
            if not left:
                break
            positions, results = call_rows(
                self, remaining, predicate, remaining.keys, remaining.values
            )
            if positions is not None:  # rows whose predicate raised: routed nowhere
                ok = set(positions)
                failed.update(left[j] for j in range(len(left)) if j not in ok)
            unmatched = []
            for j, result in zip(positions if positions is not None else range(len(left)), results):
                if result:
                    routes[left[j]] = child
                else:
                    unmatched.append(j)
            left = [left[j] for j in unmatched]
            remaining = remaining.take(unmatched)
        keep = [p for p, route in enumerate(routes) if route is not None and p not in failed]
        self.emit(batch.take(keep), [routes[p] for p in keep])


class DropNullKeyOperator(ColumnOperator):
    """Drops rows without key before a repartition (counted in ``dropped-records``)."""

    def process_batch(self, batch: ColumnBatch) -> None:
        keep = [p for p, key in enumerate(batch.keys) if key is not None]
        dropped = len(batch.rows) - len(keep)
        if dropped:
            drops.record_drops(self.context.metrics, drops.NULL_KEY_OR_VALUE, dropped)
        self.emit(batch.take(keep))


class ToStreamOperator(ColumnOperator):
    """Each table update as a plain row: the new value (None for a tombstone)."""

    def process_batch(self, batch: ColumnBatch) -> None:
        self.emit(
            batch.with_values(
                [value.new if value.__class__ is Change else value for value in batch.values]
            )
        )
