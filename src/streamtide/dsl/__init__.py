"""The Streams DSL: StreamsBuilder, KStream, KGroupedStream, KTable and their options."""

from streamtide.dsl.branched import BranchedKStream
from streamtide.dsl.builder import StreamsBuilder
from streamtide.dsl.kgrouped import KGroupedStream
from streamtide.dsl.kstream import KStream
from streamtide.dsl.ktable import KTable
from streamtide.dsl.params import (
    Consumed,
    Grouped,
    Materialized,
    Named,
    Produced,
    Repartitioned,
)

__all__ = [
    "BranchedKStream",
    "Consumed",
    "Grouped",
    "KGroupedStream",
    "KStream",
    "KTable",
    "Materialized",
    "Named",
    "Produced",
    "Repartitioned",
    "StreamsBuilder",
]
