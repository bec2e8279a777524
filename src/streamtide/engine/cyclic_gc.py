"""Pausing Python's cyclic garbage collector for one batch of the driver.

A batch of a large application allocates a few dicts per task (ranges, specs, reports,
records), while the driver keeps hundreds of thousands of objects alive between batches (task
states, the last batches' progress, reports, metrics children). Each time enough new objects
pile up the collector walks a generation, and every so often all of them: at 3,072 tasks
these passes took a large share of a batch. Paused for the batch, garbage is still freed by
reference counting; objects in cycles wait for the collector's next pass after it, which
now happens once per batch or so instead of many times within it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic collector (if it runs) for the block."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
