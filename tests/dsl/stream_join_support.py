"""A TopologyTestDriver around one stream-stream join of ``topic1`` and ``topic2`` (integer
keys), shaped like Kafka's join tests so their inputs and expected outputs port one to one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from streamtide import (
    Consumed,
    JoinWindows,
    Produced,
    Serde,
    Serdes,
    StreamJoined,
    StreamsBuilder,
)
from streamtide.testing import TopologyTestDriver

KEYS = [0, 1, 2, 3]


def to_string_joiner(left: Any, right: Any) -> str:
    """Kafka's ``MockValueJoiner.TOSTRING_JOINER``: ``"left+right"``, a missing side "null"."""
    return f"{'null' if left is None else left}+{'null' if right is None else right}"


Pipe = Callable[..., None]


@contextmanager
def join_case(
    kind: str, windows: JoinWindows, right_values: Serde | None = None
) -> Iterator[tuple[Pipe, Pipe, Callable[..., None]]]:
    """``(pipe1, pipe2, check)``: ``pipeN(key, value, timestamp=0)`` pipes into topicN;
    ``check(*(key, value, timestamp))`` asserts the join's output since the last check."""
    right_values = right_values or Serdes.string()
    builder = StreamsBuilder()
    left = builder.stream("topic1", Consumed.with_(Serdes.integer(), Serdes.string()))
    right = builder.stream("topic2", Consumed.with_(Serdes.integer(), right_values))
    joined = StreamJoined.with_(Serdes.integer(), Serdes.string(), right_values)
    result = getattr(left, kind)(right, to_string_joiner, windows, joined)
    result.to("out", Produced.with_(Serdes.integer(), Serdes.string()))
    with TopologyTestDriver(builder.build()) as driver:
        topic1 = driver.create_input_topic("topic1", Serdes.integer(), Serdes.string())
        topic2 = driver.create_input_topic("topic2", Serdes.integer(), right_values)
        out = driver.create_output_topic("out", Serdes.integer(), Serdes.string())

        def pipe1(key: Any, value: Any, timestamp: int = 0) -> None:
            topic1.pipe_input(key, value, timestamp=timestamp)

        def pipe2(key: Any, value: Any, timestamp: int = 0) -> None:
            topic2.pipe_input(key, value, timestamp=timestamp)

        def check(*expected: tuple[Any, str, int]) -> None:
            got = [(r.key, r.value, r.timestamp) for r in out.read_records()]
            assert got == list(expected), f"got {got}"

        yield pipe1, pipe2, check
        check()


def pipe_keys(
    pipe: Pipe, prefix: str, timestamp: int = 0, *, count: int = len(KEYS), step: int = 0
) -> None:
    """Pipe ``prefix<key>`` for the first ``count`` keys, at ``timestamp`` (plus ``step`` more
    for each further key): the loops of Kafka's join tests."""
    for i, key in enumerate(KEYS[:count]):
        pipe(key, f"{prefix}{key}", timestamp + i * step)
