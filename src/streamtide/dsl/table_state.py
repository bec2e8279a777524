"""The entries of a table's timestamped key-value store that one batch touches, read once and
written back once.

Table operators (``dsl.table_source``, ``dsl.ktable``, ``dsl.kgrouped_table``) and the
key-value stream aggregation (``dsl.aggregate_operator``) read a key's stored value and
timestamp on the batch's first row of that key, keep it in memory as the store holds it
(serialized, beside the value itself when the serde gives it back exactly: ``dsl.kept``),
and hand every read a fresh copy, as a store read record by record would. A row's new value
is serialized when the row is processed (a value that cannot be serialized fails that row,
as its ``put`` would) and each changed key's last value is written before the batch is
handed on, in the order the keys first changed: the store's write buffer (and so its
changelog) then holds what per-record puts would have left.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.kept import UNREAD, KeptState
from streamtide.processor.operator import ColumnOperator
from streamtide.state.timestamped import decode, encode

if TYPE_CHECKING:
    from streamtide.dsl.table_view import TableOrigin
    from streamtide.processor.api import ProcessorContext

#: A key's entry: its serialized key, its serialized value (None: absent), the value itself
#: when the serde gives it back exactly (else ``UNREAD``), and the value's timestamp.
Entry = tuple[bytes, "bytes | None", Any, int]


class KeptTable:
    """A batch's view of one timestamped key-value store (see the module docstring).

    ``entries`` (by key identity) and ``changed`` are open to an operator's own hot loop
    (``dsl.aggregate_operator``), which reads them directly and ``load``s a missing key."""

    def __init__(
        self,
        store: Any,
        initializer: Callable[[], Any] | Any = None,
        aggregator: Callable[[Any, Any, Any], Any] | None = None,
    ) -> None:
        self.store = store
        self.kept = KeptState(store.key_serde, store.value_serde.inner, initializer, aggregator)
        self._serialize = self.kept.value_serde.serialize
        self.entries: dict[Any, Entry] = {}
        #: the keys whose value changed in this batch, in the order they first did
        self.changed: dict[Any, None] = {}

    def load(self, ident: Any, key_bytes: bytes) -> Entry:
        """Read a key the batch has not read yet (``ident``: its identity) from the store."""
        stored = self.store.inner.get(key_bytes)
        if stored is None:
            entry: Entry = (key_bytes, None, UNREAD, 0)
        else:
            raw, timestamp = decode(stored)
            entry = (key_bytes, raw, UNREAD, timestamp)
        self.entries[ident] = entry
        return entry

    def entry(self, key: Any) -> tuple[Any, Entry]:
        """The key's identity and its entry (read from the store on its first use)."""
        ident, key_bytes = self.kept.ident(key)
        entry = self.entries.get(ident)
        if entry is None:
            entry = self.load(ident, key_bytes)
        return ident, entry

    def value(self, entry: Entry) -> Any:
        """A fresh copy of the entry's value (None: absent)."""
        raw = entry[1]
        if raw is None:
            return None
        return self.kept.read(raw, entry[2])

    def put(self, ident: Any, entry: Entry, value: Any, timestamp: int) -> None:
        """The key's new value (None deletes it) with its timestamp, serialized now."""
        raw = self._serialize(value)
        self.entries[ident] = (
            entry[0],
            raw,
            UNREAD if raw is None else self.kept.keep(value),
            timestamp,
        )
        self.changed[ident] = None

    def write_back(self) -> None:
        """Each changed key's last value to the store; forget the batch's entries."""
        entries = self.entries
        if self.changed:
            writes = []
            for ident in self.changed:
                key_bytes, raw, _, timestamp = entries[ident]
                writes.append((key_bytes, None if raw is None else encode(raw, timestamp)))
            self.store.inner.put_all(writes)
        entries.clear()
        self.changed.clear()


class TableOperator(ColumnOperator):
    """Base of the operators of table nodes: takes its origin's store and old-value setting
    when the task builds it (after the whole topology is known), and keeps the store's
    entries a batch touches in a ``KeptTable`` (``table``; None when not materialized)."""

    def __init__(self, origin: TableOrigin) -> None:
        self.store_name = origin.store_name
        self.send_old_values = origin.send_old_values

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.table: KeptTable | None = None
        if self.store_name is not None:
            self.table = KeptTable(context.get_state_store(self.store_name))
