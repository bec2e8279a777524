"""Read-only views of a running application's stores (Kafka Streams' interactive queries).

``StreamsApp.store(name)`` returns one of the views below. A view holds no data: every call
asks the tasks of the store for their committed entries (``runtime.store_query``) and decodes
what they send with the store's serdes. A key is asked of the task of its partition first (its
bytes under the store's key serde, Kafka's default partitioner, as sinks route records), then,
if that task does not hold it, of the other tasks (a producer may have partitioned it
otherwise); ``all`` and ``range`` ask every task and merge their answers in key-byte order.
See docs/tables-and-joins.md, "Queryable state", for freshness and cost.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from streamtide.config import StreamsConfig
from streamtide.engine.continuous import ContinuousWorkers, SlotKey, WorkerLostError
from streamtide.engine.interop import list_executors, run_pinned
from streamtide.engine.worker import make_query
from streamtide.errors import InvalidStateStoreError
from streamtide.log.partitioner import partition_for_key
from streamtide.processor.topology import Topology
from streamtide.runtime.messages import Query, QueryAnswered, decode
from streamtide.runtime.store_query import QueryOp, StoreQuery, decode_bytes, encode_bytes
from streamtide.serde import Serde
from streamtide.state.encoding import MAX_LONG, MIN_LONG
from streamtide.state.queryable import QueryableKind, queryable_kind
from streamtide.state.session_store import SessionStoreBuilder
from streamtide.state.stores import KeyValueStoreBuilder
from streamtide.state.versioned import VersionedKeyValueStoreBuilder, VersionedRecord
from streamtide.state.window_store import WindowStoreBuilder
from streamtide.task_id import TaskId
from streamtide.window import Window, Windowed

#: The builders of the stores ``queryable_kind`` names a kind for.
_QUERYABLE_BUILDERS = (
    KeyValueStoreBuilder,
    VersionedKeyValueStoreBuilder,
    WindowStoreBuilder,
    SessionStoreBuilder,
)

#: ``ask(store, op, args, task_ids) -> {task: answer}``: runs one query where the tasks live.
Ask = Callable[[str, QueryOp, list[Any], list[str]], dict[str, Any]]


@dataclass(frozen=True)
class StoreRoute:
    """Where a store's entries live and how its keys and values are serialized."""

    name: str
    kind: QueryableKind
    subtopology: int
    partitions: int
    key_serde: Serde[Any]
    value_serde: Serde[Any]

    @property
    def task_ids(self) -> list[str]:
        return [str(TaskId(self.subtopology, p)) for p in range(self.partitions)]

    def key_bytes(self, key: Any) -> bytes:
        if key is None:
            raise InvalidStateStoreError(f"store {self.name!r}: a query key must not be None")
        return self.key_serde.serialize(key)  # type: ignore[return-value]

    def task_of(self, key_bytes: bytes) -> str:
        """The task holding ``key_bytes`` (the partition a sink would send the key to)."""
        return str(TaskId(self.subtopology, partition_for_key(key_bytes, self.partitions)))


def store_route(
    topology: Topology, config: StreamsConfig, name: str, partitions: dict[int, int]
) -> StoreRoute:
    """The route of store ``name``; ``partitions``: each sub-topology's task count.
    ``InvalidStateStoreError`` names what is wrong with an unknown or unqueryable store."""
    builders = topology.store_builders
    if name not in builders:
        if name in topology.global_stores:
            raise InvalidStateStoreError(
                f"store {name!r} is a global table's store, which cannot be queried; "
                "query a table built with StreamsBuilder.table instead"
            )
        queryable = sorted(n for n, b in builders.items() if queryable_kind(b) is not None)
        raise InvalidStateStoreError(
            f"unknown state store {name!r}; stores that can be queried: "
            f"{', '.join(queryable) or 'none'}"
        )
    builder = builders[name]
    kind = queryable_kind(builder)
    if kind is None:
        why = (
            "it has no changelog (logging disabled), so its committed state is unknown"
            if not builder.logging_enabled
            else "it is an internal store of a join or deduplication"
        )
        raise InvalidStateStoreError(f"store {name!r} cannot be queried: {why}")
    assert isinstance(builder, _QUERYABLE_BUILDERS)  # the only builders with a kind
    subtopology = next(s.id for s in topology.subtopologies() if name in s.stores)
    return StoreRoute(
        name,
        kind,
        subtopology,
        partitions[subtopology],
        builder.key_serde or config.default_key_serde,
        builder.value_serde or config.default_value_serde,
    )


class _StoreView:
    """What every view shares: its route and the way to ask the tasks."""

    def __init__(self, route: StoreRoute, ask: Ask) -> None:
        self._route = route
        self._ask = ask

    @property
    def name(self) -> str:
        return self._route.name

    def _value(self, raw: str | None) -> Any:
        return self._route.value_serde.deserialize(decode_bytes(raw))

    def _key(self, raw: bytes) -> Any:
        return self._route.key_serde.deserialize(raw)

    def _ask_key(self, key: Any, op: QueryOp, *more: Any) -> Any:
        """The answer for ``key`` of the task the partitioner names, or, if that task does
        not hold it, of the first other task (in partition order) that does."""
        raw = self._route.key_bytes(key)
        args = [encode_bytes(raw), *more]
        first = self._route.task_of(raw)
        answer = self._ask(self.name, op, args, [first])[first]
        others = [t for t in self._route.task_ids if t != first]
        if _holds(answer) or not others:
            return answer
        answers = self._ask(self.name, op, args, others)
        return next((answers[t] for t in others if _holds(answers[t])), answer)

    def approximate_num_entries(self) -> int:
        """About how many entries the store holds over all its tasks (RocksDB's estimate)."""
        answers = self._ask(self.name, QueryOp.COUNT, [], self._route.task_ids)
        return sum(int(n) for n in answers.values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _holds(answer: Any) -> bool:
    """Whether a task's answer to a key query found the key (a value, or some windows)."""
    return answer is not None and answer != []


class ReadOnlyKeyValueStore(_StoreView):
    """A key-value store (a table, a count, an aggregate) as of its last committed batch."""

    def get(self, key: Any) -> Any:
        """The committed value of ``key``, or None."""
        return self._value(self._ask_key(key, QueryOp.GET))

    def range(self, from_key: Any, to_key: Any) -> list[tuple[Any, Any]]:
        """Entries with ``from_key <= key <= to_key`` in serialized-key order (None: open)."""
        args = [
            None if k is None else encode_bytes(self._route.key_bytes(k))
            for k in (from_key, to_key)
        ]
        return self._merged(QueryOp.RANGE, args)

    def all(self) -> list[tuple[Any, Any]]:
        """Every entry in serialized-key order."""
        return self._merged(QueryOp.ALL, [])

    def _merged(self, op: QueryOp, args: list[Any]) -> list[tuple[Any, Any]]:
        answers = self._ask(self.name, op, args, self._route.task_ids)
        runs: list[Iterable[tuple[bytes, str]]] = [
            ((decode_bytes(k), v) for k, v in entries)  # type: ignore[misc]
            for entries in answers.values()
        ]
        return [(self._key(k), self._value(v)) for k, v in heapq.merge(*runs)]


class ReadOnlyWindowStore(_StoreView):
    """The store of a time-windowed aggregation, as of its last committed batch."""

    def fetch(
        self, key: Any, time_from: int = MIN_LONG, time_to: int = MAX_LONG
    ) -> list[tuple[int, Any]]:
        """``[(window_start, value)]`` of ``key``'s live windows starting in
        ``[time_from, time_to]``, by start."""
        found = self._ask_key(key, QueryOp.FETCH, int(time_from), int(time_to))
        return [(int(start), self._value(value)) for start, value in found]


class ReadOnlySessionStore(_StoreView):
    """The store of a session-windowed aggregation, as of its last committed batch."""

    def fetch(self, key: Any) -> list[tuple[Windowed[Any], Any]]:
        """``[(Windowed(key, Window(start, end)), value)]`` of ``key``'s live sessions, by
        end, then start."""
        found = self._ask_key(key, QueryOp.FETCH)
        return [
            (Windowed(key, Window(int(start), int(end))), self._value(value))
            for start, end, value in found
        ]


class ReadOnlyVersionedKeyValueStore(_StoreView):
    """A versioned table's store (KIP-889), as of its last committed batch."""

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord[Any] | None:
        """The latest committed version of ``key``, or with ``as_of`` the version valid at
        that time (KIP-960); None when there is none (or it is older than the store's
        history retention)."""
        found = self._ask_key(key, QueryOp.GET, None if as_of is None else int(as_of))
        if found is None:
            return None
        valid_from, valid_to, value = found
        return VersionedRecord(self._value(value), int(valid_from), valid_to)


_VIEWS: dict[QueryableKind, type[_StoreView]] = {
    QueryableKind.VERSIONED: ReadOnlyVersionedKeyValueStore,
    QueryableKind.KEY_VALUE: ReadOnlyKeyValueStore,
    QueryableKind.WINDOW: ReadOnlyWindowStore,
    QueryableKind.SESSION: ReadOnlySessionStore,
}


def store_view(route: StoreRoute, ask: Ask) -> _StoreView:
    """The read-only view of ``route``'s store kind."""
    return _VIEWS[route.kind](route, ask)


# ---- where the tasks live: the two execution modes ----------------------------------------


def _answers(reply: Any, store: str, tasks: Iterable[str]) -> dict[str, Any]:
    if not isinstance(reply, QueryAnswered) or reply.error is not None:
        raise InvalidStateStoreError(
            f"store {store!r} could not be queried on task(s) {', '.join(sorted(tasks))}: "
            f"{reply.error if isinstance(reply, QueryAnswered) else reply}"
        )
    return dict(reply.answers or {})


def ask_work_units(
    workers: ContinuousWorkers, ran_in: dict[str, SlotKey], query: StoreQuery
) -> dict[str, Any]:
    """Continuous execution: send ``query`` to the long-running work units that last ran its
    tasks (one ``query`` message per slot; they answer from the tasks they hold open)."""
    by_slot: dict[SlotKey, dict[str, Any]] = {}
    for task, state in query.tasks.items():
        slot = ran_in.get(task)
        if slot is None:
            raise InvalidStateStoreError(
                f"store {query.store!r}: task {task} has not run in this application yet; "
                "query it after the first batch"
            )
        by_slot.setdefault(slot, {})[task] = state
    try:
        replies = workers.request(
            {slot: Query(replace(query, tasks=tasks)) for slot, tasks in by_slot.items()}
        )
    except WorkerLostError as exc:
        raise InvalidStateStoreError(
            f"store {query.store!r}: a work unit holding its tasks is gone ({exc}); the next "
            "batch relaunches it, retry then"
        ) from exc
    answers: dict[str, Any] = {}
    for slot, reply in replies.items():
        answers.update(_answers(reply, query.store, by_slot[slot]))
    return answers


def ask_pinned_jobs(
    sc: Any, blob: bytes, owners: dict[str, str], query: StoreQuery
) -> dict[str, Any]:
    """Micro-batch execution: one Spark job with one task pinned to each executor that owns
    some of the query's tasks; it opens their stores there (brought to the committed
    changelog end), reads and closes them. A task whose owner is gone is read on another
    executor, restoring what that one lacks from the changelog."""
    executors = list_executors(sc)
    alive = {e.id: e for e in executors}
    fallback = executors[0]
    by_executor: dict[str, dict[str, Any]] = {}
    for task, state in query.tasks.items():
        executor = alive.get(owners.get(task, ""), fallback)
        by_executor.setdefault(executor.id, {})[task] = state
    payloads = [
        (json.dumps({"client": ex, "query": replace(query, tasks=tasks).to_dict()}), alive[ex])
        for ex, tasks in by_executor.items()
    ]
    try:
        outputs = run_pinned(sc, payloads, make_query(blob))
    except Exception as exc:  # the query's Spark job failed (an executor died)
        first = next((line for line in str(exc).splitlines() if line.strip()), repr(exc))
        raise InvalidStateStoreError(
            f"store {query.store!r}: the query job failed: {first}"
        ) from exc
    answers: dict[str, Any] = {}
    for tasks, output in zip(by_executor.values(), outputs):
        answers.update(_answers(decode(json.loads(output)), query.store, tasks))
    return answers
