"""The running graph of one task: a ``Node`` per topology node, and how batches move.

A node owns its operator (``processor.operator.ColumnOperator``; sources have none) and hands
batches to its children (``emit``). Breadth-first processing of a batch (each child takes the
whole batch, its subtree runs, then the next child) gives what record-at-a-time processing
gives as long as the children's subtrees do not interact; where they do, the static analysis
(``runtime.interleaving``) marks the node ``depth_first`` and it hands its rows on one at a
time, each to every child before the next: the same operators on smaller batches.

Failures follow record-at-a-time processing: an exception for a record propagates up through
every ``forward`` to the task, so children after the one that failed never see the record,
while earlier ones did. Here an operator reports the row (``fail``); when a child's subtree
reported rows, the node removes them before handing the batch to its next child, and the
node above does the same, up to the source.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streamtide.errors import TopologyError
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator
from streamtide.runtime.row_failures import Failures, RowFailure


class Node:
    """One node of a task's graph (see the module docstring)."""

    def __init__(self, name: str, stores: Sequence[str], failures: Failures) -> None:
        self.name = name
        self.operator: ColumnOperator | None = None
        self.stores = frozenset(stores)
        self.failures = failures
        self.children: list[Node] = []
        self.children_by_name: dict[str, Node] = {}
        #: hand rows on one at a time (``runtime.interleaving``)
        self.depth_first = False

    def attach(self, operator: ColumnOperator) -> None:
        """Make ``operator`` this node's, with ``emit`` and ``fail`` bound to the node."""
        self.operator = operator
        operator.name = self.name
        operator.emit = self.emit  # type: ignore[method-assign]
        operator.fail = self.fail  # type: ignore[method-assign]

    def add_child(self, node: Node) -> None:
        self.children.append(node)
        self.children_by_name[node.name] = node

    def child(self, name: str) -> Node:
        """The child named ``name``; a clear error for a name that is not one."""
        target = self.children_by_name.get(name)
        if target is None:
            raise TopologyError(
                f"node {self.name!r} has no child named {name!r}; "
                f"children: {sorted(self.children_by_name) or 'none'}"
            )
        return target

    # ---- running ---------------------------------------------------------------------------

    def run(self, batch: ColumnBatch) -> None:
        """Let the operator process ``batch``; an exception it did not report for a row
        stops the task, located at this node."""
        try:
            self.operator.process_batch(batch)  # type: ignore[union-attr]
        except Exception as error:
            if error is self.failures.fatal:
                raise
            raise self.failures.stop(error, self.name, batch.topic) from error

    def call(self, action: Callable[[], Any]) -> None:
        """Run a callback of this node (punctuator, flush listener, init, close); an
        exception stops the task, located at this node."""
        try:
            if self.operator is None:
                action()
            else:
                self.operator.run_callback(action)
        except Exception as error:
            if error is self.failures.fatal:
                raise
            raise self.failures.stop(error, self.name, None) from error

    def emit(self, batch: ColumnBatch, child: str | list[str | None] | None = None) -> None:
        """Hand ``batch`` to every child, or to the child named ``child``; a list routes each
        row (``emit_routed``)."""
        if not batch.rows:
            return
        if child.__class__ is list:
            self.emit_routed(batch, child)
            return
        targets = self.children if child is None else (self.child(child),)  # type: ignore[arg-type]
        if not targets:
            return
        if self.depth_first and len(batch.rows) > 1:
            self._emit_rows(targets, batch)
        elif len(targets) == 1:
            targets[0].run(batch)
        else:
            self._fan_out(targets, batch)

    def emit_routed(self, batch: ColumnBatch, routes: list[str | None]) -> None:
        """Hand each row to the child ``routes[p]`` names, or to every child when None
        (what a Processor API node's ``forward(record, child)`` calls asked for)."""
        if not any(route is not None for route in routes):
            self.emit(batch)
            return
        failures = self.failures.rows
        if self.depth_first:
            rows = batch.rows
            failed: set[int] = set()
            for p in range(len(rows)):
                if failed and rows[p] in failed:
                    continue  # the row failed below: its later outputs never come
                mark = len(failures)
                self.emit(batch.single(p), routes[p])
                if len(failures) > mark:
                    failed.update(failure.row for failure in failures[mark:])
            return
        for target in self.children:
            name = target.name
            part = batch.take([p for p, route in enumerate(routes) if route in (None, name)])
            if not part.rows:
                continue
            mark = len(failures)
            target.run(part)
            if len(failures) > mark:
                failed = {failure.row for failure in failures[mark:]}
                keep = [p for p, row in enumerate(batch.rows) if row not in failed]
                batch = batch.take(keep)
                routes = [routes[p] for p in keep]

    def _fan_out(self, targets: Sequence[Node], batch: ColumnBatch) -> None:
        failures = self.failures.rows
        last = len(targets) - 1
        for index, target in enumerate(targets):
            mark = len(failures)
            target.run(batch)
            if index < last and len(failures) > mark:
                batch = batch.without_rows({failure.row for failure in failures[mark:]})
                if not batch.rows:
                    return

    def _emit_rows(self, targets: Sequence[Node], batch: ColumnBatch) -> None:
        """Each row to every target before the next row (depth-first)."""
        failures = self.failures.rows
        rows = batch.rows
        failed: set[int] = set()
        for p in range(len(rows)):
            if failed and rows[p] in failed:
                continue  # the row failed below: its later outputs never come
            one = batch.single(p)
            for target in targets:
                mark = len(failures)
                target.run(one)
                if len(failures) > mark:
                    failed.update(failure.row for failure in failures[mark:])
                    break

    def fail(self, batch: ColumnBatch, position: int, error: Exception) -> int:
        """Report that this node's rule raised ``error`` for the row at ``position``; the
        position to continue at (see ``ColumnOperator.fail``). A row that derives from no
        input row (a punctuator's, a flushed cache's) goes to the processing exception
        handler at once (``Failures.unsourced``). The rule is user code (a DSL function, a
        serde, a processor): what it raised stops the application without retries unless
        it came from the infrastructure."""
        if error is self.failures.fatal:
            raise error
        row = batch.rows[position]
        if row < 0:
            return self.failures.unsourced(error, self.name, batch, position)
        self.failures.rows.append(RowFailure(row, self.name, batch, position, error))
        return batch.row_end(position)
