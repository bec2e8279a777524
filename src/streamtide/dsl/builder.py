"""``StreamsBuilder``: the entry point of the DSL; it builds a ``Topology`` as you go."""

from __future__ import annotations

import re
from functools import partial
from typing import TYPE_CHECKING

from streamtide.dsl.params import Consumed, Materialized
from streamtide.errors import TopologyError
from streamtide.processor.api import StoreBuilder
from streamtide.processor.topology import Topology

if TYPE_CHECKING:
    from streamtide.dsl.global_table import GlobalKTable
    from streamtide.dsl.kstream import KStream
    from streamtide.dsl.ktable import KTable


class StreamsBuilder:
    """Creates streams from topics and names the nodes operators add (Kafka's naming)."""

    def __init__(self) -> None:
        self.topology = Topology()
        self._index = 0

    def new_name(self, prefix: str) -> str:
        """A unique node or store name such as ``KSTREAM-FILTER-0000000001``."""
        name = f"{prefix}{self._index:010d}"
        self._index += 1
        return name

    def stream(
        self, topics: str | list[str] | re.Pattern[str], consumed: Consumed | None = None
    ) -> KStream:
        """A stream of the records of one topic, several topics, or every topic whose whole
        name matches a compiled pattern (``re.compile("clicks-.*")``; topics created later
        are read from the next batch on)."""
        from streamtide.dsl.kstream import KStream

        consumed = consumed or Consumed()
        name = consumed.name or self.new_name("KSTREAM-SOURCE-")
        add_source = partial(
            self.topology.add_source,
            name,
            key_serde=consumed.key_serde,
            value_serde=consumed.value_serde,
            timestamp_extractor=consumed.timestamp_extractor,
        )
        if isinstance(topics, re.Pattern):
            add_source(pattern=topics)
            return KStream(self, name, consumed.key_serde, consumed.value_serde)
        topic_list = [topics] if isinstance(topics, str) else list(topics)
        if not topic_list:
            raise TopologyError("stream() needs at least one topic")
        add_source(*topic_list)
        return KStream(self, name, consumed.key_serde, consumed.value_serde)

    def table(
        self,
        topic: str,
        consumed: Consumed | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """A table of the latest value per key of ``topic`` (None values delete keys); the
        topic is also the changelog of its store (``dsl/table_source.py``)."""
        from streamtide.dsl.table_source import table

        return table(self, topic, consumed, materialized)

    def global_table(
        self, topic: str, consumed: Consumed | None = None, materialized: Materialized | None = None
    ) -> GlobalKTable:
        """A table of all of ``topic`` (every partition) in every task; join streams with it
        by any key (``KStream.join(global_table, key_selector, joiner)``)."""
        from streamtide.dsl.global_table import global_table

        return global_table(self, topic, consumed, materialized)

    def add_state_store(self, builder: StoreBuilder) -> StreamsBuilder:
        """Register a store that processors added with ``KStream.process`` can use."""
        self.topology.add_state_store(builder)
        return self

    def build(self) -> Topology:
        """The finished topology (validated: sources exist, every store is connected)."""
        self.topology.subtopologies()
        return self.topology
