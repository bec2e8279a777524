"""``Change``: what flows between the nodes of a table, a key's new value and its old one.

A table update carries both values so that a downstream operator can undo what the old value
did (a re-grouping subtracts it from its old group; a filter forwards a tombstone only for a
key that passed before). The old value is None unless the table sends old values (Kafka's
``enableSendingOldValues``), which an operator that needs it switches on at build time.
Tables made by stream aggregations forward plain values; ``as_change`` reads those as a new
value without old one.

``ChangeSerde`` writes a change to a repartition topic (both values, each with the inner
serde); ``processors.ToStreamOperator`` turns changes back into plain values
(``KTable.to_stream``).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from streamtide.errors import SerdeError
from streamtide.serde import Serde

_LENGTH = struct.Struct(">i")


class Change(NamedTuple):
    """A table update: the key's ``new`` value and (when sent) its ``old`` one; None means
    absent (a tombstone for ``new``)."""

    new: Any
    old: Any = None


def as_change(value: Any) -> Change:
    """``value`` as a change: a change stays, a plain value is a new value without old one."""
    return value if isinstance(value, Change) else Change(value, None)


def new_value(value: Any) -> Any:
    """The new value of a change, or the plain value itself."""
    return value.new if isinstance(value, Change) else value


class ChangeSerde(Serde[Any]):
    """A change as bytes: for each of new and old a signed length (-1: None) and the bytes
    of ``inner``. Used by the repartition topic of ``KTable.group_by``."""

    def __init__(self, inner: Serde[Any] | None) -> None:
        self.inner = inner
        self.name = f"change of {inner.name if inner is not None else 'the default serde'}"

    @property
    def inner_serde_unset(self) -> bool:
        """True until the task gives it its default value serde (``resolve_serde``)."""
        return self.inner is None

    def with_inner(self, inner: Serde[Any]) -> ChangeSerde:
        return ChangeSerde(inner)

    def _to_bytes(self, change: Any) -> bytes:
        change = as_change(change)
        inner = self.inner
        assert inner is not None, "resolve_serde gives it the default value serde first"
        parts = []
        for value in (change.new, change.old):
            raw = None if value is None else inner.serialize(value)
            if raw is None:
                parts.append(_LENGTH.pack(-1))
            else:
                parts.append(_LENGTH.pack(len(raw)) + raw)
        return b"".join(parts)

    def _from_bytes(self, data: bytes) -> Change:
        inner = self.inner
        assert inner is not None, "resolve_serde gives it the default value serde first"
        values: list[Any] = []
        at = 0
        for _ in range(2):
            if len(data) < at + _LENGTH.size:
                raise SerdeError(f"a serialized change is truncated ({len(data)} bytes)")
            (length,) = _LENGTH.unpack_from(data, at)
            at += _LENGTH.size
            if length < 0:
                values.append(None)
                continue
            if len(data) < at + length:
                raise SerdeError(f"a serialized change is truncated ({len(data)} bytes)")
            values.append(inner.deserialize(data[at : at + length]))
            at += length
        return Change(values[0], values[1])

    def __repr__(self) -> str:
        return f"ChangeSerde({self.inner!r})"
