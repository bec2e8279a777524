"""Streamtide: Kafka Streams for Python, run on Apache Spark.

Everything a user needs is importable from here; other modules are internals that may change.
"""

from typing import TYPE_CHECKING

from streamtide.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from streamtide.config import StreamsConfig
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
    from streamtide.dsl.process_values import KeyChangedError
    from streamtide.dsl.suppressed import BufferConfig, Suppressed
    from streamtide.dsl.windowed import SessionMerger
    from streamtide.dsl.windows import SessionWindows, SlidingWindows, TimeWindows
    from streamtide.engine.app import StreamsApp
    from streamtide.errors import (
        BufferFullError,
        ConfigError,
        HandlerFailedError,
        InvalidStateStoreError,
        LogError,
        SerdeError,
        StoreError,
        StreamsProcessingError,
        StreamtideError,
        TopologyError,
        UnknownTopicError,
        UnsupportedVersionError,
        UserCodeError,
    )
    from streamtide.handlers import ErrorHandlerContext, ProcessingHandlerResponse
    from streamtide.processor.api import (
        Cancellable,
        Processor,
        ProcessorContext,
        PunctuationType,
        StateStore,
    )
    from streamtide.processor.topic_name import RecordContext, TopicNameExtractor
    from streamtide.processor.topology import Topology
    from streamtide.record import Record, RecordMetadata
    from streamtide.serde import Serde, Serdes
    from streamtide.state.api import KeyValueStore
    from streamtide.state.stores import Stores
    from streamtide.state.versioned import VersionedRecord
    from streamtide.timestamp_extractor import ConsumerRecord, TimestampExtractor
    from streamtide.window import Window, Windowed

#: Each exported name and the module that defines it (imported when first asked for).
_EXPORTS = {
    "BufferConfig": "streamtide.dsl.suppressed",
    "BufferFullError": "streamtide.errors",
    "Cancellable": "streamtide.processor.api",
    "ConfigError": "streamtide.errors",
    "Consumed": "streamtide.dsl.params",
    "ConsumerRecord": "streamtide.timestamp_extractor",
    "Deduplicated": "streamtide.dsl.deduplicate",
    "EmitStrategy": "streamtide.dsl.emit_strategy",
    "ErrorHandlerContext": "streamtide.handlers",
    "GlobalKTable": "streamtide.dsl.global_table",
    "Grouped": "streamtide.dsl.params",
    "HandlerFailedError": "streamtide.errors",
    "InvalidStateStoreError": "streamtide.errors",
    "JoinWindows": "streamtide.dsl.join_windows",
    "Joined": "streamtide.dsl.params",
    "KGroupedStream": "streamtide.dsl.kgrouped",
    "KGroupedTable": "streamtide.dsl.kgrouped_table",
    "KStream": "streamtide.dsl.kstream",
    "KTable": "streamtide.dsl.ktable",
    "KeyChangedError": "streamtide.dsl.process_values",
    "KeyValueStore": "streamtide.state.api",
    "LogError": "streamtide.errors",
    "Materialized": "streamtide.dsl.params",
    "Named": "streamtide.dsl.params",
    "Printed": "streamtide.dsl.printed",
    "ProcessingHandlerResponse": "streamtide.handlers",
    "Processor": "streamtide.processor.api",
    "ProcessorContext": "streamtide.processor.api",
    "Produced": "streamtide.dsl.params",
    "PunctuationType": "streamtide.processor.api",
    "Record": "streamtide.record",
    "RecordContext": "streamtide.processor.topic_name",
    "RecordMetadata": "streamtide.record",
    "Repartitioned": "streamtide.dsl.params",
    "Serde": "streamtide.serde",
    "SerdeError": "streamtide.errors",
    "Serdes": "streamtide.serde",
    "SessionMerger": "streamtide.dsl.windowed",
    "SessionWindows": "streamtide.dsl.windows",
    "SlidingWindows": "streamtide.dsl.windows",
    "StateStore": "streamtide.processor.api",
    "StoreError": "streamtide.errors",
    "Stores": "streamtide.state.stores",
    "StreamJoined": "streamtide.dsl.join_windows",
    "StreamsApp": "streamtide.engine.app",
    "StreamsBuilder": "streamtide.dsl.builder",
    "StreamsConfig": "streamtide.config",
    "StreamsProcessingError": "streamtide.errors",
    "StreamtideError": "streamtide.errors",
    "Suppressed": "streamtide.dsl.suppressed",
    "TableJoined": "streamtide.dsl.params",
    "TimeWindows": "streamtide.dsl.windows",
    "TimestampExtractor": "streamtide.timestamp_extractor",
    "TopicNameExtractor": "streamtide.processor.topic_name",
    "Topology": "streamtide.processor.topology",
    "TopologyError": "streamtide.errors",
    "UnknownTopicError": "streamtide.errors",
    "UnsupportedVersionError": "streamtide.errors",
    "UserCodeError": "streamtide.errors",
    "VersionedRecord": "streamtide.state.versioned",
    "Window": "streamtide.window",
    "Windowed": "streamtide.window",
}

__version__ = "0.1.0"

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

__all__ = [
    "BufferConfig",
    "BufferFullError",
    "Cancellable",
    "ConfigError",
    "Consumed",
    "ConsumerRecord",
    "Deduplicated",
    "EmitStrategy",
    "ErrorHandlerContext",
    "GlobalKTable",
    "Grouped",
    "HandlerFailedError",
    "InvalidStateStoreError",
    "JoinWindows",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "KeyChangedError",
    "KeyValueStore",
    "LogError",
    "Materialized",
    "Named",
    "Printed",
    "ProcessingHandlerResponse",
    "Processor",
    "ProcessorContext",
    "Produced",
    "PunctuationType",
    "Record",
    "RecordContext",
    "RecordMetadata",
    "Repartitioned",
    "Serde",
    "SerdeError",
    "Serdes",
    "SessionMerger",
    "SessionWindows",
    "SlidingWindows",
    "StateStore",
    "StoreError",
    "Stores",
    "StreamJoined",
    "StreamsApp",
    "StreamsBuilder",
    "StreamsConfig",
    "StreamsProcessingError",
    "StreamtideError",
    "Suppressed",
    "TableJoined",
    "TimeWindows",
    "TimestampExtractor",
    "TopicNameExtractor",
    "Topology",
    "TopologyError",
    "UnknownTopicError",
    "UnsupportedVersionError",
    "UserCodeError",
    "VersionedRecord",
    "Window",
    "Windowed",
]
