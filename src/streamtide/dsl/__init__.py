"""The Streams DSL: StreamsBuilder, KStream, KGroupedStream, KTable and their options."""

from typing import TYPE_CHECKING

from streamtide.lazy_exports import lazy_exports

if TYPE_CHECKING:
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

#: Each exported name and the module that defines it (imported when first asked for).
_EXPORTS = {
    "BranchedKStream": "streamtide.dsl.branched",
    "StreamsBuilder": "streamtide.dsl.builder",
    "Deduplicated": "streamtide.dsl.deduplicate",
    "EmitStrategy": "streamtide.dsl.emit_strategy",
    "GlobalKTable": "streamtide.dsl.global_table",
    "JoinWindows": "streamtide.dsl.join_windows",
    "StreamJoined": "streamtide.dsl.join_windows",
    "KGroupedStream": "streamtide.dsl.kgrouped",
    "KGroupedTable": "streamtide.dsl.kgrouped_table",
    "KStream": "streamtide.dsl.kstream",
    "KTable": "streamtide.dsl.ktable",
    "Consumed": "streamtide.dsl.params",
    "Grouped": "streamtide.dsl.params",
    "Joined": "streamtide.dsl.params",
    "Materialized": "streamtide.dsl.params",
    "Named": "streamtide.dsl.params",
    "Produced": "streamtide.dsl.params",
    "Repartitioned": "streamtide.dsl.params",
    "TableJoined": "streamtide.dsl.params",
    "Printed": "streamtide.dsl.printed",
    "SlidingWindowedKStream": "streamtide.dsl.sliding_windowed",
    "BufferConfig": "streamtide.dsl.suppressed",
    "Suppressed": "streamtide.dsl.suppressed",
    "SessionMerger": "streamtide.dsl.windowed",
    "SessionWindowedKStream": "streamtide.dsl.windowed",
    "TimeWindowedKStream": "streamtide.dsl.windowed",
    "SessionWindows": "streamtide.dsl.windows",
    "SlidingWindows": "streamtide.dsl.windows",
    "TimeWindows": "streamtide.dsl.windows",
}

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

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
