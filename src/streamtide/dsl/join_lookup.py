"""Looking a batch's keys up in a table, for the stream-table and stream-global-table joins.

A stream row joins the table as it stands when the row is processed. Within one batch of a
join the table cannot change: the task never puts rows of two source topics in one piece,
and where a table is written by a node under the same source as the join, the task's cut
analysis (``runtime.interleaving``) hands the join its rows one at a time. So each distinct
key is read from the store once per batch (``StoredLookup``), and the values are
deserialized for every row that joins, in one call for the batch: each row gets a value of
its own, as a record-at-a-time lookup does (a joiner that changes the table value in place
cannot affect another row).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtide.dsl.table_view import Getter, TableView
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator
from streamtide.serde import Serde, StringSerde, convert_each
from streamtide.state.timestamped import NO_TIMESTAMP, decode

_STR_OR_NONE = frozenset({str, type(None)})

#: A table's value of a key as stored: its bytes and its timestamp (None: no value)
Entry = tuple[bytes, int]

#: ``read(key_bytes) -> Entry | None``: how a lookup reads a key's value from its store
RawRead = Callable[[bytes], "Entry | None"]


class StoredLookup:
    """Reads each distinct key of a batch once (see the module docstring)."""

    def __init__(self, key_serde: Serde, value_serde: Serde, read: RawRead) -> None:
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.read = read
        self.string_keys = type(key_serde) is StringSerde

    def read_rows(
        self, operator: ColumnOperator, batch: ColumnBatch, keys: list[Any]
    ) -> tuple[list[int], list[Entry | None]]:
        """The stored table value of ``keys[p]``, the key of ``batch``'s row ``p`` (None: no
        key, no value), for every row whose key could be serialized: their positions and
        entries. A key the serde refuses fails its row."""
        found: dict[Any, Entry | None] = {}
        read, serialize, string_keys = self.read, self.key_serde.serialize, self.string_keys
        if string_keys and set(map(type, keys)) <= _STR_OR_NONE:
            # no key can fail: one read per distinct key, no other call per row
            def load(key: str) -> Entry | None:
                entry = found[key] = read(key.encode("utf-8"))
                return entry

            return list(range(len(keys))), [
                None if key is None else found[key] if key in found else load(key) for key in keys
            ]
        kept: list[int] = []
        raws: list[Entry | None] = []
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key = keys[p]
                    if key is None:
                        raw = None
                    elif string_keys and key.__class__ is str:
                        if key in found:
                            raw = found[key]
                        else:
                            raw = found[key] = read(key.encode("utf-8"))
                    else:
                        key_bytes = serialize(key)
                        if key_bytes in found:
                            raw = found[key_bytes]
                        else:  # a key its serde writes as None matches nothing
                            raw = found[key_bytes] = None if key_bytes is None else read(key_bytes)
                    kept.append(p)
                    raws.append(raw)
                start = n
            except Exception as error:
                start = operator.fail(batch, p, error)
        return kept, raws

    def values(
        self,
        operator: ColumnOperator,
        batch: ColumnBatch,
        positions: list[int],
        raws: list[Entry | None],
    ) -> tuple[list[int], list[Any]]:
        """Each row's own deserialized table value (None where ``raws`` has None); a
        stored value the serde refuses fails its row."""
        present = [raw[0] for raw in raws if raw is not None]
        errors: dict[int, Exception] = {}
        decoded = convert_each(
            self.value_serde.deserialize_many, self.value_serde.deserialize, present, errors
        )
        if len(present) == len(raws) and not errors:
            return positions, decoded
        kept: list[int] = []
        values: list[Any] = []
        index = 0
        for position, raw in zip(positions, raws):
            if raw is None:
                kept.append(position)
                values.append(None)
                continue
            error = errors.get(index)
            value = decoded[index]
            index += 1
            if error is not None:
                operator.fail(batch, position, error)
                continue
            kept.append(position)
            values.append(value)
        return kept, values


def timestamped_read(inner: Any) -> RawRead:
    """``read`` of a timestamped store's bytes store ``inner``."""
    get = inner.get

    def read(key_bytes: bytes) -> Entry | None:
        raw = get(key_bytes)
        return None if raw is None else decode(raw)

    return read


def plain_read(inner: Any) -> RawRead:
    """``read`` of a plain (not timestamped) bytes store ``inner``."""
    get = inner.get

    def read(key_bytes: bytes) -> Entry | None:
        raw = get(key_bytes)
        return None if raw is None else (raw, NO_TIMESTAMP)

    return read


def present(positions: list[int], values: list[Any]) -> tuple[list[int], list[Any]]:
    """The positions and values whose value is not None (an inner join's rows that join)."""
    kept = [j for j, value in enumerate(values) if value is not None]
    if len(kept) == len(values):
        return positions, values
    return [positions[j] for j in kept], [values[j] for j in kept]


def view_lookup(context: Any, view: TableView) -> tuple[StoredLookup | None, Getter | None]:
    """How an operator in a task reads the table ``view``: a ``StoredLookup`` of its store,
    or, for a table whose values are computed, its getter (one lookup per row)."""
    if view.store is None:
        return None, view.make(context)
    store = context.get_state_store(view.store)
    read = timestamped_read(store.inner)
    return StoredLookup(store.key_serde, store.value_serde.inner, read), None
