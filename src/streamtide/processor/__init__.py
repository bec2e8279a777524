"""The Processor API: processors, their context, punctuation, and the Topology."""

from streamtide.processor.api import (
    Cancellable,
    Processor,
    ProcessorContext,
    PunctuationType,
    StateStore,
    StoreBuilder,
)
from streamtide.processor.punctuation import PunctuationQueue, PunctuationSchedule
from streamtide.processor.topic_name import RecordContext, TopicNameExtractor
from streamtide.processor.topology import SubTopology, Topology

__all__ = [
    "Cancellable",
    "Processor",
    "ProcessorContext",
    "PunctuationQueue",
    "PunctuationSchedule",
    "PunctuationType",
    "RecordContext",
    "StateStore",
    "StoreBuilder",
    "SubTopology",
    "TopicNameExtractor",
    "Topology",
]
