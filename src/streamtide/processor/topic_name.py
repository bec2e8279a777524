"""Choosing a sink's topic per record (Kafka Streams' ``TopicNameExtractor``).

``KStream.to(extractor)`` and ``Topology.add_sink(name, extractor, ...)`` take either an
object with ``extract(key, value, record_context) -> str`` or a plain function of the same
three arguments. ``record_context`` describes the input record the row derives from (its
topic, partition, offset, timestamp and headers), as Kafka's ``RecordContext`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from streamtide.errors import TopologyError


@dataclass(frozen=True)
class RecordContext:
    """Where the record being written came from (None for a record that derives from no
    input record, such as one a punctuator forwarded)."""

    topic: str | None
    partition: int
    offset: int | None
    timestamp: int
    headers: Any


@runtime_checkable
class TopicNameExtractor(Protocol):
    """Names the topic a record goes to."""

    def extract(self, key: Any, value: Any, record_context: RecordContext) -> str: ...


#: What ``to``/``add_sink`` accept in place of a topic name.
TopicChooser = TopicNameExtractor | Callable[[Any, Any, RecordContext], str]


def extractor_function(chooser: Any, sink: str) -> Callable[[Any, Any, RecordContext], str]:
    """The ``(key, value, record_context) -> topic`` function of ``chooser``."""
    if isinstance(chooser, TopicNameExtractor):
        return chooser.extract
    if callable(chooser):
        return chooser
    raise TopologyError(
        f"sink {sink!r} needs a topic name or a TopicNameExtractor, got {chooser!r}"
    )


def describe_chooser(function: Callable[..., Any]) -> str:
    """How a topology description names a sink's extractor."""
    owner = getattr(function, "__self__", None)
    target = type(owner) if owner is not None else function
    return getattr(target, "__qualname__", None) or repr(target)
