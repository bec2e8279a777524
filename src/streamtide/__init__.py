"""Streamtide: Kafka Streams for Python, run on Apache Spark.

Everything a user needs is importable from here; other modules are internals that may change.
"""

from streamtide.config import StreamsConfig
from streamtide.dsl import (
    Consumed,
    Grouped,
    KGroupedStream,
    KStream,
    KTable,
    Materialized,
    Named,
    Produced,
    Repartitioned,
    StreamsBuilder,
)
from streamtide.errors import (
    ConfigError,
    LogError,
    SerdeError,
    StoreError,
    StreamsProcessingError,
    StreamtideError,
    TopologyError,
    UnknownTopicError,
    UnsupportedVersionError,
)
from streamtide.processor import (
    Cancellable,
    Processor,
    ProcessorContext,
    PunctuationType,
    StateStore,
    Topology,
)
from streamtide.record import Record, RecordMetadata
from streamtide.serde import Serde, Serdes
from streamtide.state import KeyValueStore, Stores
from streamtide.window import Window, Windowed

__version__ = "0.1.0"

__all__ = [
    "Cancellable",
    "ConfigError",
    "Consumed",
    "Grouped",
    "KGroupedStream",
    "KStream",
    "KTable",
    "KeyValueStore",
    "LogError",
    "Materialized",
    "Named",
    "Processor",
    "ProcessorContext",
    "Produced",
    "PunctuationType",
    "Record",
    "RecordMetadata",
    "Repartitioned",
    "Serde",
    "SerdeError",
    "Serdes",
    "StateStore",
    "StoreError",
    "Stores",
    "StreamsBuilder",
    "StreamsConfig",
    "StreamsProcessingError",
    "StreamtideError",
    "Topology",
    "TopologyError",
    "UnknownTopicError",
    "UnsupportedVersionError",
    "Window",
    "Windowed",
]
