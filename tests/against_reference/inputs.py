"""Random inputs for the comparisons, and the two checks every property test makes.

Inputs have key skew (``a`` most often), disorder, late records (seconds to tens of seconds
behind), resends (the same record again), optionally None keys and None values; engine runs
cut them into batches with restarts and wiped state between, on 1 or 4 partitions.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from tests.against_reference.harness import (
    EngineRun,
    Event,
    assert_same_as_driver,
    assert_same_as_engine,
    on_driver,
    on_engine,
    reference_on_driver,
    reference_on_engine,
)
from tests.reference import Plan

S = 1000
BASE = 100 * S
KEYS = ["a", "a", "a", "b", "c", "d"]

#: ``REFERENCE_EXAMPLES=<factor>`` multiplies the example counts (a deeper run by hand)
FACTOR = int(os.environ.get("REFERENCE_EXAMPLES", "1"))
_COMMON: dict[str, Any] = {
    "deadline": None,
    "derandomize": True,  # the same examples on every run
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
#: record-at-a-time comparisons: cheap, many examples
DRIVER = settings(max_examples=25 * FACTOR, **_COMMON)
#: engine comparisons (RocksDB, file log, restarts): fewer examples, and no shrinking (each
#: run costs; a failure shows the example as generated)
ENGINE = settings(max_examples=6 * FACTOR, phases=[Phase.explicit, Phase.generate], **_COMMON)


ValueFn = Callable[[Any, int], Any]


def numbered(draw: Any, i: int) -> Any:
    return {"n": draw(st.integers(0, 9)), "i": i}


@st.composite
def events(
    draw: Any,
    topics: tuple[str, ...] = ("in",),
    max_count: int = 30,
    none_keys: bool = True,
    none_values: bool = False,
    value: ValueFn = numbered,
    keys: list[str] = KEYS,
    tombstones: tuple[str, ...] = (),
) -> list[Event]:
    """Records in arrival order; ``tombstones``: topics (tables) whose values may be None.
    Half the inputs put timestamps on a coarse grid, so that records meet the boundaries
    (window ends, grace, intervals, gaps) and each other's timestamps exactly."""
    grid = draw(st.booleans())
    steps = st.integers(0, 4).map(lambda n: n * 500) if grid else st.integers(0, 3 * S)
    lateness = (0, 0, 0, 500, 1 * S, 2 * S, 5 * S) if grid else (0, 0, 0, 0, 1500, 6 * S, 25 * S)
    count = draw(st.integers(1, max_count))
    now, found = BASE, []
    for i in range(count):
        now += draw(steps)
        topic = draw(st.sampled_from(topics))
        key = draw(st.sampled_from(keys + ([None] if none_keys else [])))
        body = value(draw, i)
        if (none_values or topic in tombstones) and draw(st.integers(0, 7)) == 0:
            body = None
        ts = max(0, now - draw(st.sampled_from(lateness)))
        partition = draw(st.integers(0, 3)) if key is None else None
        found.append(Event(topic, key, body, ts, partition))
        if draw(st.integers(0, 6)) == 0:  # a resend: the same record again
            found.append(found[-1])
    return found


@st.composite
def engine_runs(
    draw: Any, inputs: Any, partitions: tuple[int, ...] = (1, 4), caching: bool | None = None
) -> EngineRun:
    """``inputs`` cut into batches, with restarts and wipes between; ``caching`` None: the
    record cache on or off, drawn."""
    found = draw(inputs)
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(found) - 1)), max_size=3))))
    batches = [found[a:b] for a, b in zip([0, *cuts], [*cuts, len(found)]) if found[a:b]]
    later = st.lists(st.integers(1, max(1, len(batches) - 1)), max_size=2)
    restarts = frozenset(draw(later)) if len(batches) > 1 else frozenset()
    wipes = frozenset(draw(later)) if len(batches) > 1 else frozenset()
    cache = draw(st.booleans()) if caching is None else caching
    return EngineRun(batches, draw(st.sampled_from(partitions)), restarts, wipes, cache)


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A directory for a log and state, in memory when the machine offers one (the file log
    syncs every segment; on tmpfs that costs nothing)."""
    base = "/dev/shm" if Path("/dev/shm").is_dir() else None
    path = Path(tempfile.mkdtemp(prefix="streamtide-ref-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def check_driver(
    plan: Plan | Callable[[], Plan],
    found: list[Event],
    wall_clock: int = 0,
    commits: list[int] | None = None,
) -> None:
    """The test driver, record at a time, does exactly what the reference does
    (``commits``: with the record cache on, committing after these record counts)."""
    make = plan if callable(plan) else (lambda: plan)
    topics = set(make().input_topics())
    found = [e for e in found if e.topic is None or e.topic in topics]
    expected = reference_on_driver(make(), found, wall_clock, commits)
    with scratch() as state_dir:
        actual = on_driver(make(), found, wall_clock, state_dir, commits)
    assert_same_as_driver(expected, actual)


def check_engine(plan: Plan | Callable[[], Plan], run: EngineRun) -> None:
    """The engine's batch loop, with restarts and wiped state, does what the reference does."""
    make = plan if callable(plan) else (lambda: plan)
    topics = set(make().input_topics())
    run = replace(
        run,
        batches=[
            [
                replace(e, partition=None if e.partition is None else e.partition % run.partitions)
                for e in b
                if e.topic in topics
            ]
            for b in run.batches
        ],
    )
    with scratch() as root:
        actual, rounds = on_engine(make(), run, root)
    assert_same_as_engine(reference_on_engine(make(), run, rounds), actual)


def on_driver_and_engine(
    label: str, plan: Callable[[], Plan], inputs: Any, **engine: Any
) -> tuple[Callable[..., None], Callable[..., None]]:
    """The two property tests of ``plan``, to bind to ``test_*`` names: on the test driver
    (record at a time) and on the engine (``engine_runs(inputs, **engine)``). Their examples
    come from a seed fixed by ``label``."""

    @seed(zlib.crc32(label.encode()))
    @DRIVER
    @given(found=inputs)
    def on_the_test_driver(found: list[Event]) -> None:
        check_driver(plan, found)

    @seed(zlib.crc32(label.encode()) + 1)
    @ENGINE
    @given(run=engine_runs(inputs, **engine))
    def on_the_engine(run: EngineRun) -> None:
        check_engine(plan, run)

    return on_the_test_driver, on_the_engine
