"""Batch variants of processors: a registry from a processor class to the factory of its twin
for batch processing (same results, state read once per key and batch).

A task that processes in batches asks ``batch_variant(processor)`` for every node; processors
without a registered twin run as they are. The DSL registers its twins when it is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtide.processor.api import Processor

_VARIANTS: dict[type, Callable[[Any], Processor]] = {}


def register_batch_variant(processor_type: type, make: Callable[[Any], Processor]) -> None:
    """Use ``make(processor)`` in place of instances of exactly ``processor_type``."""
    _VARIANTS[processor_type] = make


def batch_variant(processor: Any) -> Processor | None:
    """The batch twin of ``processor``, or None when its class has none."""
    make = _VARIANTS.get(type(processor))
    return None if make is None else make(processor)
