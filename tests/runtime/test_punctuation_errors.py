"""Exceptions of punctuators go to the processing exception handler (KIP-1033), as do those
of records a punctuator forwarded; other user code that raises outside a record (``init``, a
processor supplier, a timestamp extractor) stops the task as a ``UserCodeError``. Failures of
the infrastructure never reach the handler."""

from __future__ import annotations

from typing import Any

import pytest

from streamtide import (
    Consumed,
    ErrorHandlerContext,
    HandlerFailedError,
    ProcessingHandlerResponse,
    Processor,
    Produced,
    PunctuationType,
    Record,
    Serdes,
    StreamsBuilder,
    StreamsConfig,
    StreamsProcessingError,
    UserCodeError,
)
from streamtide.errors import StoreDamagedError
from streamtide.testing import TopologyTestDriver

STRING = Serdes.string()
CONTINUE = ProcessingHandlerResponse.CONTINUE
FAIL = ProcessingHandlerResponse.FAIL


class Ticker(Processor):
    """Forwards its records; every 10 ms of stream time a punctuator forwards ``tick-<t>``
    (or what ``tick`` makes of ``t``) and then raises ``raising`` (None: nothing)."""

    def __init__(self, raising: Exception | None, tick: Any = None) -> None:
        self.raising = raising
        self.tick = tick or (lambda t: f"tick-{t}")

    def init(self, context: Any) -> None:
        super().init(context)
        context.schedule(10, PunctuationType.STREAM_TIME, self.punctuate)

    def process(self, record: Record) -> None:
        self.context.forward(record)

    def punctuate(self, timestamp: int) -> None:
        self.context.forward(Record("tick", self.tick(timestamp), timestamp))
        if self.raising is not None:
            raise self.raising


def explode(value: str) -> str:
    if value.startswith("BOOM"):
        raise ValueError(f"cannot take {value!r}")
    return value


def driver(raising: Exception | None, tick: Any = None, **settings: Any) -> TopologyTestDriver:
    """``in`` -> ``Ticker`` ("ticker") -> fails on BOOM ("explode") -> ``out``."""
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .process(lambda: Ticker(raising, tick), named="ticker")
        .map_values(explode, "explode")
        .to("out", Produced.with_(STRING, STRING))
    )
    config = StreamsConfig(application_id="punctuation-errors", **settings)
    return TopologyTestDriver(builder.build(), config)


def pipe(test_driver: TopologyTestDriver, *timestamps: int) -> None:
    topic = test_driver.create_input_topic("in", STRING, STRING)
    for n, timestamp in enumerate(timestamps):
        topic.pipe_input(f"k{n}", f"v{n}", timestamp=timestamp)


def out(test_driver: TopologyTestDriver) -> list[Any]:
    return test_driver.create_output_topic("out", STRING, STRING).read_values()


def test_with_continue_a_punctuator_that_raises_is_dropped_and_processing_goes_on() -> None:
    """StreamTaskTest.punctuateShouldNotThrowStreamsExceptionWhenProcessingExceptionHandler-
    RepliesWithContinue: what it forwarded before raising goes on."""
    kaboom = RuntimeError("KABOOM!")
    with driver(kaboom, processing_exception_handler="log_and_continue") as test_driver:
        pipe(test_driver, 0, 10, 15, 20)
        assert out(test_driver) == ["v0", "tick-0", "v1", "tick-10", "v2", "v3", "tick-20"]
        assert test_driver.metrics()["dropped-records.processing_error"] == 3


def test_a_handler_function_is_asked_with_no_record_and_a_context_without_one() -> None:
    seen: list[tuple[ErrorHandlerContext, Any, Exception]] = []

    def handler(context: ErrorHandlerContext, record: Any, exc: Exception) -> Any:
        seen.append((context, record, exc))
        return CONTINUE

    kaboom = RuntimeError("KABOOM!")
    with driver(kaboom, processing_exception_handler=handler) as test_driver:
        pipe(test_driver, 0, 10)
        assert [value for value in out(test_driver)] == ["v0", "tick-0", "v1", "tick-10"]
    assert [(c.timestamp, r) for c, r, _ in seen] == [(0, None), (10, None)]
    assert seen[0][0] == ErrorHandlerContext("ticker", "0_0", None, None, None, 0)
    assert all(exc is kaboom for _, _, exc in seen)


def test_with_fail_a_punctuator_that_raises_stops_the_task() -> None:
    """StreamTaskTest.punctuateShouldThrowStreamsExceptionWhenProcessingExceptionHandler-
    RepliesWithFail, and the ``"fail"`` handler: final, naming the node; the cause is what the
    punctuator raised."""
    kaboom = RuntimeError("KABOOM!")
    with driver(kaboom, processing_exception_handler=lambda c, r, e: FAIL) as test_driver:
        with pytest.raises(HandlerFailedError) as raised:
            pipe(test_driver, 0)
        assert raised.value.__cause__ is kaboom
        assert (raised.value.node, raised.value.task_id) == ("ticker", "0_0")
        assert raised.value.topic is None and raised.value.offset is None
    with driver(kaboom) as test_driver:
        with pytest.raises(UserCodeError, match="RuntimeError: KABOOM!") as raised:
            pipe(test_driver, 0)
        assert raised.value.__cause__ is kaboom and raised.value.node == "ticker"


def test_a_handler_that_answers_nothing_or_raises_stops_the_task() -> None:
    """StreamTaskTest.punctuateShouldThrowStreamsExceptionWhenProcessingExceptionHandler-
    ReturnsNull and ...ThrowFailedProcessingExceptionWhenProcessingExceptionHandlerThrows-
    AnException."""
    kaboom = RuntimeError("KABOOM!")
    nothing = driver(kaboom, processing_exception_handler=lambda c, r, e: None)
    with nothing as test_driver, pytest.raises(HandlerFailedError, match=r"must return .* None"):
        pipe(test_driver, 0)

    def crashing(context: ErrorHandlerContext, record: Any, exc: Exception) -> Any:
        raise KeyError("KABOOM from the handler")

    with driver(kaboom, processing_exception_handler=crashing) as test_driver:
        with pytest.raises(HandlerFailedError, match="raised KeyError") as raised:
            pipe(test_driver, 0)
        assert isinstance(raised.value.__cause__, KeyError)
        assert raised.value.node == "ticker"


def test_a_record_a_punctuator_forwarded_that_fails_below_is_handled_there_once() -> None:
    """StreamTaskTest.punctuateShouldNotHandleFailProcessingExceptionAndThrowStreamsException:
    the failure of a forwarded record is the handler's at the node that failed, with that
    record, and not again at the punctuator. With CONTINUE only that record is skipped."""
    seen: list[tuple[ErrorHandlerContext, Any]] = []

    def handler(context: ErrorHandlerContext, record: Any, exc: Exception) -> Any:
        seen.append((context, record))
        return FAIL

    with driver(None, tick=lambda t: f"BOOM-{t}", processing_exception_handler=handler) as td:
        with pytest.raises(HandlerFailedError) as raised:
            pipe(td, 0)
        assert raised.value.node == "explode" and isinstance(raised.value.__cause__, ValueError)
    ((context, record),) = seen
    assert context == ErrorHandlerContext("explode", "0_0", None, None, None, 0)
    assert (record.key, record.value) == ("tick", "BOOM-0")

    ticks = lambda t: f"BOOM-{t}" if t == 10 else f"tick-{t}"  # noqa: E731
    with driver(None, tick=ticks, processing_exception_handler="log_and_continue") as td:
        pipe(td, 0, 10, 20)
        assert out(td) == ["v0", "tick-0", "v1", "v2", "tick-20"]
        assert td.metrics()["dropped-records.processing_error"] == 1
    with driver(None, tick=ticks) as td:
        with pytest.raises(UserCodeError) as raised:
            pipe(td, 0, 10, 20)
        assert raised.value.node == "explode" and raised.value.offset is None


def test_an_infrastructure_failure_in_a_punctuator_is_never_the_handlers() -> None:
    damaged = StoreDamagedError("store 's': reading its local RocksDB files failed")
    with driver(damaged, processing_exception_handler="log_and_continue") as test_driver:
        with pytest.raises(StreamsProcessingError) as raised:
            pipe(test_driver, 0)
        assert not isinstance(raised.value, UserCodeError)
        assert raised.value.__cause__ is damaged
        assert test_driver.metrics().get("dropped-records.processing_error") is None


class FailsInInit(Processor):
    def init(self, context: Any) -> None:
        raise ConnectionError("the user's database is down")

    def process(self, record: Record) -> None:
        pass


def broken_supplier() -> Processor:
    raise LookupError("no such processor")


def broken_extractor(record: Any, partition_time: int) -> int:
    raise ValueError("no timestamp in the value")


@pytest.mark.parametrize("where", ["init", "supplier", "timestamp extractor"])
def test_user_code_that_raises_outside_a_record_is_a_user_code_error(where: str) -> None:
    builder = StreamsBuilder()
    consumed = Consumed.with_(STRING, STRING)
    if where == "timestamp extractor":
        consumed = consumed.with_timestamp_extractor(broken_extractor)
    stream = builder.stream("in", consumed)
    if where == "init":
        stream.process(FailsInInit, named="user")
    elif where == "supplier":
        stream.process(broken_supplier, named="user")
    config = StreamsConfig(application_id="user-code")
    with pytest.raises(UserCodeError) as raised, TopologyTestDriver(builder.build(), config) as td:
        pipe(td, 5)
    error = raised.value
    if where == "timestamp extractor":
        assert (error.topic, error.partition, error.offset) == ("in", 0, 0)
        assert isinstance(error.__cause__, ValueError)
    else:
        assert error.node == "user" and isinstance(error.__cause__, (ConnectionError, LookupError))
