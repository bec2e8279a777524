"""Source nodes: a topic's raw key and value columns deserialized, rows handed to children."""

from __future__ import annotations

from typing import Any

from streamtide.errors import SerdeError
from streamtide.runtime.graph import Node
from streamtide.runtime.row_failures import Failures
from streamtide.serde import Serde, convert_each


class SourceNode(Node):
    """The root of a piece's processing: the task deserializes its topics' columns with
    these serdes and hands each piece to ``emit``."""

    def __init__(
        self, name: str, key_serde: Serde[Any], value_serde: Serde[Any], failures: Failures
    ) -> None:
        super().__init__(name, (), failures)
        self.key_serde = key_serde
        self.value_serde = value_serde

    def deserialize_columns(
        self, keys: list[bytes | None], values: list[bytes | None]
    ) -> tuple[list[Any], list[Any], dict[int, SerdeError]]:
        """Deserialize whole key and value columns; rows that fail are reported by index
        (their entries in the returned columns are meaningless)."""
        errors: dict[int, Any] = {}  # SerdeErrors only: nothing else is caught
        key_serde, value_serde = self.key_serde, self.value_serde
        keys_out = convert_each(
            key_serde.deserialize_many, key_serde.deserialize, keys, errors, SerdeError
        )
        values_out = convert_each(
            value_serde.deserialize_many, value_serde.deserialize, values, errors, SerdeError
        )
        return keys_out, values_out, errors
