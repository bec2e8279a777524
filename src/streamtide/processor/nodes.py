"""Node definitions of a topology: sources, processors and sinks (what, not how they run)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamtide.processor.api import NodeSupplier
from streamtide.serde import Serde
from streamtide.timestamp_extractor import TimestampExtractor

#: ``partitioner(key, value, key_bytes, num_partitions) -> partition or None`` (None: default)
Partitioner = Callable[[Any, Any, "bytes | None", int], "int | None"]


@dataclass
class NodeDef:
    name: str
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)


@dataclass
class SourceNodeDef(NodeDef):
    topics: list[str] = field(default_factory=list)
    #: read every topic whose name matches (``topics`` are those matched so far)
    pattern: re.Pattern[str] | None = None
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    timestamp_extractor: TimestampExtractor | None = None


@dataclass
class ProcessorNodeDef(NodeDef):
    supplier: NodeSupplier | None = None
    stores: list[str] = field(default_factory=list)


@dataclass
class SinkNodeDef(NodeDef):
    """A sink writes to ``topic``, or, with ``topic_extractor``, to the topic it names for
    each record (``topic`` is then empty: the sink writes no topic known when building)."""

    topic: str = ""
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    partitioner: Partitioner | None = None
    topic_extractor: Callable[[Any, Any, Any], str] | None = None
