"""Source nodes: a topic's raw key and value columns deserialized, rows handed to children.

Values that nothing reads stay bytes. A count reads its input values only to test them for
None (``ColumnOperator.reads_values``); when every child of a source is such an operator, and
the source reads the topology's own repartition topics with the serdes that wrote them, and
for those serdes a value is None exactly when its bytes are (``serde.null_shows_in_bytes``),
the source hands the bytes on instead of deserializing them: the same tests give the same
answers, and these bytes cannot fail to deserialize (the topology's sinks wrote them). A
failing row still gives the error handler its deserialized value (``ColumnBatch.record``).
"""

from __future__ import annotations

from typing import Any

from streamtide.errors import SerdeError
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.nodes import SinkNodeDef, SourceNodeDef
from streamtide.processor.topology import Topology
from streamtide.runtime.graph import Node
from streamtide.runtime.row_failures import Failures
from streamtide.serde import Serde, convert_each, null_shows_in_bytes, resolve_serde


class SourceNode(Node):
    """The root of a piece's processing: the task deserializes its topics' columns with
    these serdes and hands each piece to ``emit``."""

    def __init__(
        self,
        name: str,
        key_serde: Serde[Any],
        value_serde: Serde[Any],
        failures: Failures,
        own_values: bool = False,
    ) -> None:
        super().__init__(name, (), failures)
        self.key_serde = key_serde
        self.value_serde = value_serde
        #: the values were written by the topology's sinks with ``value_serde``, and no
        #: timestamp extractor reads them (``own_values``)
        self._own_values = own_values and null_shows_in_bytes(value_serde)
        self._values_encoded: bool | None = None

    def values_stay_encoded(self) -> bool:
        """Whether values are handed on as their bytes (see the module docstring); decided
        on first use, once the children's operators are attached."""
        decided = self._values_encoded
        if decided is None:
            decided = self._values_encoded = (
                self._own_values
                and bool(self.children)
                and all(
                    child.operator is not None and not child.operator.reads_values
                    for child in self.children
                )
            )
        return decided

    def deserialize_columns(
        self, keys: list[bytes | None], values: list[bytes | None]
    ) -> tuple[list[Any], list[Any], dict[int, SerdeError]]:
        """Deserialize whole key and value columns; rows that fail are reported by index
        (their entries in the returned columns are meaningless). Values that stay bytes
        (``values_stay_encoded``) are returned as they are."""
        errors: dict[int, Any] = {}  # SerdeErrors only: nothing else is caught
        key_serde, value_serde = self.key_serde, self.value_serde
        keys_out = convert_each(
            key_serde.deserialize_many, key_serde.deserialize, keys, errors, SerdeError
        )
        if self.values_stay_encoded():
            return keys_out, values, errors
        values_out = convert_each(
            value_serde.deserialize_many, value_serde.deserialize, values, errors, SerdeError
        )
        return keys_out, values_out, errors

    def emit(self, batch: ColumnBatch, child: str | list[str | None] | None = None) -> None:
        if self._values_encoded:
            batch.encoded_values = self.value_serde
        super().emit(batch, child)


def own_values(
    topology: Topology,
    definition: SourceNodeDef,
    value_serde: Serde[Any],
    default_value_serde: Serde[Any],
    extracted: bool,
) -> bool:
    """Whether a source reads values only the topology's own sinks wrote, with its own value
    serde, and no timestamp extractor reads them (``extracted``): it reads only internal
    topics, and every sink to them has a value serde of the same kind (a sink that chooses
    its topics per record could write to any: then none is taken for sure)."""
    topics = definition.topics
    if extracted or definition.pattern is not None or not topics:
        return False
    if not set(topics) <= topology.internal_topics:
        return False
    kind = (type(value_serde), getattr(value_serde, "name", None))
    for node in topology.nodes.values():
        if not isinstance(node, SinkNodeDef):
            continue
        if node.topic_extractor is not None:  # it may name any topic
            return False
        if node.topic in topics:
            serde = resolve_serde(node.value_serde, default_value_serde)
            if (type(serde), getattr(serde, "name", None)) != kind:
                return False
    return True
