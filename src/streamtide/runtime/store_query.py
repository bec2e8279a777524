"""Answering a query of one store from its tasks' committed state, where the tasks live.

The driver sends a ``StoreQuery`` (over the control channel to a long-running work unit, or
as a small pinned Spark job in micro-batch execution); the executor answers it here for each
task named, from the task's committed entries only (``state.queryable.committed_view``).
Keys and values travel serialized (base64 in JSON): the executor never needs the user's
types, and the driver decodes them with the store's serdes.
"""

from __future__ import annotations

import base64
import enum
from dataclasses import dataclass, field
from typing import Any

from streamtide.errors import StoreError
from streamtide.processor.topology import Topology
from streamtide.runtime.committed import TaskCommittedState
from streamtide.state.encoding import MAX_LONG, MIN_LONG
from streamtide.state.queryable import QueryableKind, committed_view, queryable_kind


class QueryOp(enum.Enum):
    """What a query asks of each task's store."""

    GET = "get"  # key -> value or None; versioned: key, as_of (None: latest) ->
    #              [valid_from, valid_to, value] or None
    RANGE = "range"  # from_key, to_key (inclusive, None: open) -> [(key, value)] by key
    ALL = "all"  # -> [(key, value)] by key
    COUNT = "count"  # -> approximate number of entries
    FETCH = "fetch"  # window: key, time_from, time_to -> [(start, value)]; session: key ->
    #                  [(start, end, value)]


def encode_bytes(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def decode_bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


@dataclass(frozen=True)
class StoreQuery:
    """One query of ``store`` on some of its tasks: ``tasks`` maps each task id to the
    committed state the driver holds for it (what the answer must reflect)."""

    store: str
    op: QueryOp
    args: list[Any] = field(default_factory=list)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.store, "op": self.op.value, "args": self.args, "tasks": self.tasks}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StoreQuery:
        return cls(str(data["store"]), QueryOp(data["op"]), list(data["args"]), dict(data["tasks"]))


def answer_on(store: Any, kind: QueryableKind, query: StoreQuery, stream_time: int) -> Any:
    """``query`` answered from one open store of a task whose committed stream time is
    ``stream_time`` (JSON-able, keys and values base64)."""
    view = committed_view(store, lambda: stream_time)
    op, args = query.op, query.args
    if op is QueryOp.COUNT:
        return view.approximate_num_entries()
    if kind is QueryableKind.KEY_VALUE:
        if op is QueryOp.GET:
            return encode_bytes(view.get(decode_bytes(args[0])))
        if op in (QueryOp.RANGE, QueryOp.ALL):
            bounds = (None, None) if op is QueryOp.ALL else (decode_bytes(a) for a in args)
            return [[encode_bytes(k), encode_bytes(v)] for k, v in view.range(*bounds)]
    elif op is QueryOp.GET and kind is QueryableKind.VERSIONED:
        key, as_of = decode_bytes(args[0]), args[1]
        found = view.get_latest_raw(key) if as_of is None else view.get_as_of_raw(key, as_of)
        if found is None:
            return None
        return [found.timestamp, found.valid_to, encode_bytes(found.value)]
    elif op is QueryOp.FETCH and kind is QueryableKind.WINDOW:
        key, time_from, time_to = decode_bytes(args[0]), int(args[1]), int(args[2])
        found = view.fetch(key, time_from, time_to)
        return [[windowed.window.start, encode_bytes(value)] for windowed, value in found]
    elif op is QueryOp.FETCH and kind is QueryableKind.SESSION:
        found = view.find_sessions(decode_bytes(args[0]), MIN_LONG, MAX_LONG)
        return [[w.window.start, w.window.end, encode_bytes(value)] for w, value in found]
    raise StoreError(f"store {query.store!r} ({kind.value} store) does not answer {op.value!r}")


def query_kind(topology: Topology, store: str) -> QueryableKind:
    """The query type of ``store``; ``StoreError`` when the topology cannot answer one."""
    kind = queryable_kind(topology.store_builder(store))
    if kind is None:
        raise StoreError(f"store {store!r} cannot be queried")
    return kind


def committed_stream_time(state: dict[str, Any]) -> int:
    return TaskCommittedState.from_dict(state).stream_time
