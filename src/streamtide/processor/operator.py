"""The operator contract: every built-in operator takes a batch of columns and hands columns on.

A task processes its input a piece at a time (``runtime.stream_task``). The source node hands
each piece to its children as one ``ColumnBatch``; each node's operator processes the whole
batch in its own loop and hands what it produced to its children with ``emit``. There is no
per-row dispatch, context object, ``Record`` or ``forward`` between built-in operators: a user
function (predicate, mapper, joiner, aggregator, selector, partitioner) is called once per row
inside the operator's loop. User ``Processor`` classes run through one adapter
(``runtime.adapter``), the only record loop left.

Writing an operator (subclass ``ColumnOperator``):

- ``init(context)``: keep the context, open stores (``context.get_state_store(name)``; every
  store must be connected to the node in the topology, see "What an operator declares"),
  register a flush listener for a record cache, schedule punctuators.
- ``process_batch(batch)``: process the rows in order and ``self.emit(out)`` once (or once per
  child) at the end. Outputs of one input row stay next to each other, in the order the rule
  makes them; build output batches with ``batch.take``, ``with_values``, ``with_keys``,
  ``with_keys_values`` or ``derive``, so every row keeps its input row, offset and stream time.
- **Stream time at a row** is ``batch.stream_times[p]``: the task's stream time right after
  the input record the row derives from, as record-at-a-time processing would have seen it.
  ``context.current_stream_time_ms()`` is the stream time after the piece's last row while a
  batch is processed (and the task's in punctuators and at commit), so per-row rules must read
  the column, and calls into stores whose answers depend on stream time (window and session
  stores expire by it) must pass the row's time where the store takes one.
- **A user function that fails for a row**: wrap the row loop so that any exception names its
  row, report it with ``start = self.fail(batch, p, error)`` and continue the loop at
  ``start`` (``fail`` returns the first position of the next input row, skipping the failed
  row's other outputs-to-be, as record-at-a-time processing stops handling a record at its
  first exception). Emit nothing more for that row; what the operator emitted for it before
  the failure stays (as in Kafka Streams). The idiom::

      start = 0
      while start < n:
          p = start
          try:
              for p in range(start, n):
                  ...                     # the rule for row p
              start = n
          except Exception as error:
              start = self.fail(batch, p, error)

  The task hands reported rows to the processing exception handler in input order once the
  piece is done (``"fail"`` and ``FAIL`` stop the task with the lowest failing row, exactly
  the error record-at-a-time processing would have stopped at; ``CONTINUE`` skips the row
  from the failing node on: later children of every node above it no longer see it). An
  exception that escapes ``process_batch`` outside such a loop (a store's, say) is not given
  to the handler: it stops the task, as Kafka Streams' own store exceptions do.
- **State: read once, write once.** A stateful operator reads what the batch touches once
  (each distinct key's entries, one range per key), decides row by row in memory, and writes
  its changes back before ``process_batch`` returns, so the store is current between batches
  (for punctuators, for queries, for the next piece). The store then holds exactly what the
  rule applied record by record would have left: changelogs and restores are unchanged.
- **Drops and metrics**: count in a local variable and add once per batch
  (``context.metrics.increment(name, count)``, ``drops.record_drops``).
- **Punctuators and caches** emit through ``self.emit`` too: their rows derive from no input
  row (``ColumnBatch.unsourced``); a row of theirs that fails goes to the processing exception
  handler on its own, at once (CONTINUE skips just that row: ``fail`` returns the next
  position).
- **Where a failure came from**: what ``fail`` is given is taken for user code's (final, no
  retry), unless it is an error of the infrastructure (``errors.from_infrastructure``: a
  damaged store, the log); an exception that escapes ``process_batch`` is the engine's and the
  stage is retried.
- ``close()``: release what ``init`` acquired.

Tools for operators: ``call_rows`` (below) calls a user function once per row with the
failure handling above; ``ColumnBatch.take``/``derive``/``EmittedRows`` build outputs;
``dsl.cache.EmitCache`` with ``dsl.cache.emit_as_batch`` is the record cache of a
table-producing operator (flushed at commit as one batch); ``dsl.kept.KeptState`` keeps keys
by identity and values serialized for read-once, write-once state; the window and session
stores take explicit stream times for batch work (``SessionStore.fetch_serialized(key, now)``,
``write_all_at``, ``TimestampedWindowStore.get_stored``). The operators in
``dsl.dedup_operator``, ``dsl.aggregate_operator``, ``dsl.time_window_operator`` and
``dsl.session_operator`` are worked examples.

What an operator declares, for the task's static cut analysis (``runtime.interleaving``): the
stores it uses, by connecting them to its node in the topology (``Topology.add_state_store``,
``connect_processor_and_state_stores``; the DSL does this), and its children and sink topics
through the graph. From those the task decides where breadth-first processing of a batch
could differ from record-at-a-time processing (two nodes under one source sharing a store,
paths that converge, two sinks writing one topic) and hands rows one at a time there: the same
operators, smaller batches. An operator never needs to know whether it gets one row or many.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamtide.processor.api import ProcessorContext
    from streamtide.processor.column_batch import ColumnBatch


class ColumnOperator(ABC):
    """A built-in operator: processes a ``ColumnBatch`` and emits batches to its children.

    ``emit`` and ``fail`` are bound to the operator's node by the task that runs it (see the
    module docstring for the contract).
    """

    context: ProcessorContext
    #: The node's name, set by the task.
    name: str = ""
    #: False when the operator reads its input values only to test them for None (a count):
    #: a source whose children all are such may hand them on undecoded
    #: (``runtime.source.SourceNode``).
    reads_values: bool = True

    def init(self, context: ProcessorContext) -> None:
        """Called once before the first batch; keep the context, open stores, schedule."""
        self.context = context

    @abstractmethod
    def process_batch(self, batch: ColumnBatch) -> None:
        """Process every row of ``batch`` in order; ``emit`` the results."""

    def close(self) -> None:
        """Called when the task closes; release what ``init`` acquired."""

    def run_callback(self, action: Any) -> None:
        """Run a punctuator, a flush listener, ``init`` or ``close`` of this node (the
        Processor API adapter collects what the callback forwards; operators emit directly)."""
        action()

    # ---- bound by the task (runtime.graph.Node.bind) ------------------------------------

    def emit(self, batch: ColumnBatch, child: str | list[str | None] | None = None) -> None:
        """Hand ``batch`` to every child, or only to the child named ``child``; a list gives
        each row's child (None: every child), as a split routes its rows."""
        raise RuntimeError(f"operator {self.name!r} is not part of a running task")

    def fail(self, batch: ColumnBatch, position: int, error: Exception) -> int:
        """Report that the rule failed for the row at ``position``; return the position to
        continue at (the next input row's first)."""
        raise error


def call_rows(
    operator: ColumnOperator,
    batch: ColumnBatch,
    function: Callable[..., Any],
    *columns: list[Any],
) -> tuple[list[int] | None, list[Any]]:
    """``function(*row)`` for every row of ``columns`` (columns of ``batch``), in order: the
    positions of the rows it did not raise for (None: every row) and its results for them.

    A row it raises for is reported (``operator.fail``) and calling goes on at the next input
    row. This is the loop of most stateless operators: one call of the user function per row
    and no other call of Python's per row.
    """
    n = len(batch.rows)
    results: list[Any] = []
    try:
        results.extend(map(function, *columns))
    except Exception as error:
        failed, failure = len(results), error
    else:
        if len(results) == n:
            return None, results
        failed, failure = len(results), StopIteration()  # raised inside map: it stopped
    positions = list(range(failed))
    while True:
        start = operator.fail(batch, failed, failure)
        if start >= n:
            return positions, results
        done = len(results)
        try:
            results.extend(map(function, *(column[start:] for column in columns)))
        except Exception as error:
            failed, failure = start + len(results) - done, error
        else:
            if len(results) - done == n - start:
                positions.extend(range(start, n))
                return positions, results
            failed, failure = start + len(results) - done, StopIteration()
        positions.extend(range(start, failed))
