"""Streamtide: Kafka Streams for Python, run on Apache Spark.

Everything a user needs is importable from here; other modules are internals that may change.
"""

from streamtide.config import StreamsConfig
from streamtide.dsl import (
    BufferConfig,
    Consumed,
    Deduplicated,
    EmitStrategy,
    GlobalKTable,
    Grouped,
    Joined,
    JoinWindows,
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    Materialized,
    Named,
    Printed,
    Produced,
    Repartitioned,
    SessionMerger,
    SessionWindows,
    SlidingWindows,
    StreamJoined,
    StreamsBuilder,
    Suppressed,
    TableJoined,
    TimeWindows,
)
from streamtide.dsl.process_values import KeyChangedError
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
from streamtide.processor import (
    Cancellable,
    Processor,
    ProcessorContext,
    PunctuationType,
    RecordContext,
    StateStore,
    TopicNameExtractor,
    Topology,
)
from streamtide.record import Record, RecordMetadata
from streamtide.serde import Serde, Serdes
from streamtide.state import KeyValueStore, Stores, VersionedRecord
from streamtide.timestamp_extractor import ConsumerRecord, TimestampExtractor
from streamtide.window import Window, Windowed

__version__ = "0.1.0"


def __getattr__(name: str):  # the engine pulls in Spark: import it only when asked for
    if name == "StreamsApp":
        from streamtide.engine.app import StreamsApp

        return StreamsApp
    raise AttributeError(f"module 'streamtide' has no attribute {name!r}")


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
