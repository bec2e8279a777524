"""Source nodes: a topic's raw key and value columns deserialized, rows handed to children."""

from __future__ import annotations

from typing import Any

from streamtide.errors import SerdeError
from streamtide.runtime.graph import Node
from streamtide.runtime.row_failures import Failures
from streamtide.serde import Serde


class SourceNode(Node):
    """The root of a piece's processing: the task deserializes its topics' columns with
    these serdes and hands each piece to ``emit``."""

    def __init__(self, name: str, key_serde: Serde, value_serde: Serde, failures: Failures) -> None:
        super().__init__(name, (), failures)
        self.key_serde = key_serde
        self.value_serde = value_serde

    def deserialize_columns(
        self, keys: list[bytes | None], values: list[bytes | None]
    ) -> tuple[list[Any], list[Any], dict[int, SerdeError]]:
        """Deserialize whole key and value columns; rows that fail are reported by index
        (their entries in the returned columns are meaningless)."""
        errors: dict[int, SerdeError] = {}
        return (
            _column(self.key_serde, keys, errors),
            _column(self.value_serde, values, errors),
            errors,
        )


def _column(serde: Serde, items: list[bytes | None], errors: dict[int, SerdeError]) -> list[Any]:
    """``serde.deserialize_many(items)``, or value by value noting each failure in ``errors``
    (the first failure of a row is the one reported)."""
    try:
        return serde.deserialize_many(items)
    except SerdeError:
        pass
    out: list[Any] = []
    deserialize = serde.deserialize
    for index, data in enumerate(items):
        try:
            out.append(deserialize(data))
        except SerdeError as exc:
            errors.setdefault(index, exc)
            out.append(None)
    return out
