"""A reference interpreter of Streamtide's semantics (SEMANTICS, Kafka Streams), written
plainly and record at a time, to check the engine against. It never imports the engine's
operators, runtime or stores; see README.md."""

from tests.reference.plan import (
    JoinWindowSpec,
    Plan,
    SessionWindowSpec,
    SlidingWindowSpec,
    SuppressSpec,
    TimeWindowSpec,
)
from tests.reference.runner import Output, ReferenceRun

__all__ = [
    "JoinWindowSpec",
    "Output",
    "Plan",
    "ReferenceRun",
    "SessionWindowSpec",
    "SlidingWindowSpec",
    "SuppressSpec",
    "TimeWindowSpec",
]
