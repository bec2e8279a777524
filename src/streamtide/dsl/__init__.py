"""The Streams DSL: StreamsBuilder, KStream, KGroupedStream, KTable and their options."""

from streamtide.dsl.branched import BranchedKStream
from streamtide.dsl.builder import StreamsBuilder
from streamtide.dsl.deduplicate import Deduplicated
from streamtide.dsl.emit_strategy import EmitStrategy
from streamtide.dsl.global_table import GlobalKTable
from streamtide.dsl.join_windows import JoinWindows, StreamJoined
from streamtide.dsl.kgrouped import KGroupedStream
from streamtide.dsl.kgrouped_table import KGroupedTable
from streamtide.dsl.kstream import KStream
from streamtide.dsl.ktable import KTable
from streamtide.dsl.params import (
    Consumed,
    Grouped,
    Joined,
    Materialized,
    Named,
    Produced,
    Repartitioned,
    TableJoined,
)
from streamtide.dsl.printed import Printed
from streamtide.dsl.sliding_windowed import SlidingWindowedKStream
from streamtide.dsl.suppressed import BufferConfig, Suppressed
from streamtide.dsl.windowed import SessionMerger, SessionWindowedKStream, TimeWindowedKStream
from streamtide.dsl.windows import SessionWindows, SlidingWindows, TimeWindows

__all__ = [
    "BranchedKStream",
    "BufferConfig",
    "Consumed",
    "Deduplicated",
    "EmitStrategy",
    "GlobalKTable",
    "Grouped",
    "JoinWindows",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Materialized",
    "Named",
    "Printed",
    "Produced",
    "Repartitioned",
    "SessionMerger",
    "SessionWindowedKStream",
    "SessionWindows",
    "SlidingWindowedKStream",
    "SlidingWindows",
    "StreamJoined",
    "StreamsBuilder",
    "Suppressed",
    "TableJoined",
    "TimeWindowedKStream",
    "TimeWindows",
]
