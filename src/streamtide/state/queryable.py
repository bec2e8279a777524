"""Which stores can be queried from outside their task, and a read-only view of one task's
committed entries (the engine's interactive queries, docs/tables-and-joins.md).

A logged store keeps a batch's writes in buffers above its local store until they are
committed (``state.changelogging``), so the local store below those buffers holds committed
data only. ``committed_view`` lays a store's layout (key-value, versioned, window or session)
over that local store with bytes serdes: the caller gets serialized keys and values and
decodes them with the store's own serdes wherever it likes (the driver, for queries on the
engine).
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Callable
from typing import Any

from streamtide.errors import StoreError
from streamtide.serde import Serdes
from streamtide.state.changelogging import ChangeLoggingKeyValueBytesStore
from streamtide.state.join_stores import JoinWindowStoreBuilder
from streamtide.state.layout import SerdeLayoutStore
from streamtide.state.segments import SegmentedLayoutStore, Segments
from streamtide.state.session_store import SessionStoreBuilder
from streamtide.state.stores import KeyValueStoreBuilder
from streamtide.state.versioned import VersionedKeyValueStoreBuilder
from streamtide.state.window_store import WindowStoreBuilder


class QueryableKind(enum.Enum):
    """The read-only store types a query can ask for (Kafka's ``QueryableStoreTypes``)."""

    KEY_VALUE = "key_value"
    WINDOW = "window"
    SESSION = "session"
    VERSIONED = "versioned_key_value"


def queryable_kind(builder: Any) -> QueryableKind | None:
    """The query type of a store built by ``builder``; None when it cannot be queried:
    stores without a changelog (their local copy may hold writes never committed) and the
    internal layouts of joins and deduplication."""
    if not getattr(builder, "logging_enabled", False):
        return None
    if isinstance(builder, KeyValueStoreBuilder):
        return QueryableKind.KEY_VALUE
    if isinstance(builder, VersionedKeyValueStoreBuilder):
        return QueryableKind.VERSIONED
    if isinstance(builder, JoinWindowStoreBuilder):
        return None
    if isinstance(builder, WindowStoreBuilder):
        return QueryableKind.WINDOW
    if isinstance(builder, SessionStoreBuilder):
        return QueryableKind.SESSION
    return None


def committed_view(store: Any, stream_time: Callable[[], int]) -> Any:
    """A copy of the open layout ``store`` that reads only its committed entries, with bytes
    keys and (plain) bytes values. ``stream_time`` is the task's committed stream time, which
    decides which windows and sessions have expired. Never write through the view."""
    if not isinstance(store, SerdeLayoutStore):
        raise StoreError(f"store {store.name!r} is not a key-value, window or session store")
    logged = store.inner
    if not isinstance(logged, ChangeLoggingKeyValueBytesStore):
        raise StoreError(f"store {store.name!r} has no changelog: its committed state is unknown")
    view = copy.copy(store)
    view.inner = logged.inner
    view.key_serde = Serdes.bytes()
    view.value_serde = view._stored_values(Serdes.bytes())
    if isinstance(view, SegmentedLayoutStore):
        view._segments = Segments(
            view.inner,
            view.retention_ms,
            stream_time,
            horizon_ms=view._segment_horizon_ms(),
        )
    return view
