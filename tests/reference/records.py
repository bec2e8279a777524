"""What flows between the reference interpreter's nodes: records and table changes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Rec:
    """A record: key, value, timestamp, headers and, when it came from a topic, where from.
    Table updates carry a ``Change`` as their value."""

    key: Any
    value: Any
    ts: int
    headers: tuple[tuple[str, bytes], ...] = ()
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None

    def but(self, **changes: Any) -> Rec:
        """A copy with some fields changed."""
        return replace(self, **changes)


@dataclass(frozen=True)
class Change:
    """A table update: the key's new value and, when known, its old one (None: unknown or
    absent; tables only send old values where a downstream operator needs them)."""

    new: Any
    old: Any = None
