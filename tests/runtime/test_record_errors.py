"""Error handlers of records (KIP-1033) and the dead-letter topic (KIP-1034), through the test
driver on both processing paths."""

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
    Record,
    Serdes,
    Stores,
    StreamsBuilder,
    StreamsConfig,
    StreamsProcessingError,
    UserCodeError,
)
from streamtide.log.api import LogRecord
from streamtide.testing import TopologyTestDriver

STRING = Serdes.string()
CONTINUE = ProcessingHandlerResponse.CONTINUE
FAIL = ProcessingHandlerResponse.FAIL


def explode(value: str) -> str:
    if value.startswith("BOOM"):
        raise ValueError(f"cannot take {value!r}")
    return value


def driver(**settings: Any) -> TopologyTestDriver:
    """``in`` -> upper-case ("shout") -> fails on BOOM ("explode") -> ``out``."""
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .map_values(str.upper, "shout")
        .map_values(explode, "explode")
        .to("out", Produced.with_(STRING, STRING))
    )
    config = StreamsConfig(application_id="errors", **settings)
    return TopologyTestDriver(builder.build(), config)


def pipe(test_driver: TopologyTestDriver, *values: str) -> None:
    topic = test_driver.create_input_topic("in", STRING, STRING)
    for offset, value in enumerate(values):
        topic.pipe_input(f"k{offset}", value, timestamp=100 + offset, headers=[("h", b"1")])


def out(test_driver: TopologyTestDriver) -> list[Any]:
    return test_driver.create_output_topic("out", STRING, STRING).read_values()


def test_fail_stops_naming_processor_task_topic_partition_and_offset() -> None:
    with driver() as test_driver:
        with pytest.raises(StreamsProcessingError) as raised:
            pipe(test_driver, "a", "boom", "c")
        error = raised.value
        assert type(error) is UserCodeError  # user code raised: final, never retried
        assert isinstance(error.__cause__, ValueError)
        assert (error.node, error.task_id, error.topic, error.partition, error.offset) == (
            "explode",
            "0_0",
            "in",
            0,
            1,
        )
        assert "ValueError: cannot take 'BOOM'" in str(error)
        assert test_driver.metrics().get("dropped-records.processing_error") is None


def test_log_and_continue_skips_counts_and_dead_letters_the_raw_record() -> None:
    settings = {"processing_exception_handler": "log_and_continue"}
    with driver(errors_dead_letter_topic="dead", **settings) as test_driver:
        pipe(test_driver, "a", "boom", "c", "boom again", "e")
        assert out(test_driver) == ["A", "C", "E"]  # later records are processed
        metrics = test_driver.metrics()
        assert metrics["dropped-records.processing_error"] == 2
        assert metrics["dropped-records"] == 2
        first, second = test_driver.topic_records("dead")
        assert (first.key, first.value, first.timestamp) == (b"k1", b"boom", 101)
        assert dict(first.headers) == {
            "h": b"1",
            "streamtide.exception": b"builtins.ValueError",
            "streamtide.error": b"cannot take 'BOOM'",
            "streamtide.topic": b"in",
            "streamtide.partition": b"0",
            "streamtide.offset": b"1",
            "streamtide.processor": b"explode",
        }
        assert (second.value, dict(second.headers)["streamtide.offset"]) == (b"boom again", b"3")


def test_log_and_continue_without_a_dead_letter_topic_writes_nowhere_else() -> None:
    with driver(processing_exception_handler="log_and_continue") as test_driver:
        pipe(test_driver, "boom", "b")
        assert out(test_driver) == ["B"]
        assert test_driver.produced_topic_names() == {"in", "out"}
        assert test_driver.metrics()["dropped-records.processing_error"] == 1


def test_a_handler_function_sees_the_context_and_decides() -> None:
    seen: list[tuple[ErrorHandlerContext, Any, Exception]] = []

    def handler(context: ErrorHandlerContext, record: Any, exc: Exception) -> Any:
        seen.append((context, record, exc))
        return FAIL if record.value == "BOOM FATAL" else CONTINUE

    settings = {"processing_exception_handler": handler, "errors_dead_letter_topic": "dead"}
    with driver(**settings) as test_driver:
        with pytest.raises(HandlerFailedError) as raised:
            pipe(test_driver, "a", "boom", "c", "boom fatal", "e")
        assert out(test_driver) == ["A", "C"]
        (skipped, _, _), (failed, _, _) = seen
        assert skipped == ErrorHandlerContext(
            processor_node_id="explode",
            task_id="0_0",
            topic="in",
            partition=0,
            offset=1,
            timestamp=101,
            headers=(("h", b"1"),),
        )
        record = seen[0][1]  # what the failing processor was given: after "shout"
        assert isinstance(record, Record) and (record.key, record.value) == ("k1", "BOOM")
        assert isinstance(seen[0][2], ValueError)
        assert failed.offset == 3
        error = raised.value  # final: the engine does not retry it
        assert (error.node, error.task_id, error.topic, error.partition, error.offset) == (
            "explode",
            "0_0",
            "in",
            0,
            3,
        )
        assert [r.value for r in test_driver.topic_records("dead")] == [b"boom"]
        assert test_driver.metrics()["dropped-records.processing_error"] == 1


def test_a_handler_that_answers_nonsense_or_raises_stops_the_app() -> None:
    def nonsense(context: ErrorHandlerContext, record: Any, exc: Exception) -> Any:
        return True

    with driver(processing_exception_handler=nonsense) as test_driver:
        with pytest.raises(HandlerFailedError, match="must return") as raised:
            pipe(test_driver, "boom")
        assert raised.value.node == "explode" and raised.value.offset == 0

    def broken(context: ErrorHandlerContext, record: Any, exc: Exception) -> Any:
        raise KeyError("oops")

    with driver(processing_exception_handler=broken) as test_driver:
        with pytest.raises(HandlerFailedError, match="raised KeyError") as raised:
            pipe(test_driver, "boom")
        assert isinstance(raised.value.__cause__, KeyError)


def test_the_deserialization_handler_function_and_dead_letter_topic() -> None:
    seen: list[tuple[ErrorHandlerContext, Any, Exception]] = []

    def handler(context: ErrorHandlerContext, raw: Any, exc: Exception) -> Any:
        seen.append((context, raw, exc))
        return FAIL if raw.value == b"\xfe" else CONTINUE

    settings = {"deserialization_exception_handler": handler, "errors_dead_letter_topic": "dead"}
    with driver(**settings) as test_driver:
        test_driver.pipe_raw("in", b"k", b"\xff", 7, headers=[("h", b"1")])
        test_driver.pipe_raw("in", b"k", b"ok", 8)
        assert out(test_driver) == ["OK"]
        context, raw, exc = seen[0]
        assert context.processor_node_id.startswith("KSTREAM-SOURCE-")
        assert (context.task_id, context.topic, context.partition, context.offset) == (
            "0_0",
            "in",
            0,
            0,
        )
        assert raw == LogRecord(b"k", b"\xff", 7, (("h", b"1"),), 0)
        assert type(exc).__name__ == "SerdeError"
        (dead,) = test_driver.topic_records("dead")
        assert (dead.key, dead.value) == (b"k", b"\xff")
        headers = dict(dead.headers)
        assert headers["streamtide.exception"] == b"streamtide.errors.SerdeError"
        assert headers["streamtide.offset"] == b"0" and headers["streamtide.topic"] == b"in"
        assert test_driver.metrics()["dropped-records.deserialization_error"] == 1
        assert "errors-dlq" not in test_driver.produced_topic_names()
        with pytest.raises(HandlerFailedError, match="cannot deserialize") as raised:
            test_driver.pipe_raw("in", b"k", b"\xfe", 9)
        assert (raised.value.topic, raised.value.offset) == ("in", 2)


def test_log_and_continue_deserialization_keeps_the_default_dead_letter_topic() -> None:
    with driver(deserialization_exception_handler="log_and_continue") as test_driver:
        test_driver.pipe_raw("in", b"k", b"\xff", 7)
        assert [r.value for r in test_driver.topic_records("errors-dlq")] == [b"\xff"]


class CountsThenFails(Processor):
    """Counts records per key in store "counts"; raises for value "boom" after counting."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        self.store.put(record.key, (self.store.get(record.key) or 0) + 1)
        if record.value == "boom":
            raise ValueError("boom")


def test_with_continue_what_the_processor_did_before_raising_stays() -> None:
    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store("counts"), STRING, Serdes.int()
        )
    )
    builder.stream("in", Consumed.with_(STRING, STRING)).process(CountsThenFails, "counts")
    config = StreamsConfig(application_id="errors", processing_exception_handler="log_and_continue")
    with TopologyTestDriver(builder.build(), config) as test_driver:
        topic = test_driver.create_input_topic("in", STRING, STRING)
        for value in ("a", "boom", "c"):
            topic.pipe_input("k", value, timestamp=1)
        assert test_driver.get_key_value_store("counts").get("k") == 3  # not rolled back
        assert test_driver.metrics()["dropped-records.processing_error"] == 1


def test_a_serde_of_the_user_that_raises_at_a_sink_stops_the_task_as_user_code() -> None:
    def to_bytes(value: str) -> bytes:
        if value == "B":
            raise ValueError("no B here")
        return value.encode()

    builder = StreamsBuilder()
    mine = Serdes.from_functions(to_bytes, bytes.decode)
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .map_values(str.upper, "shout")
        .to("out", Produced.with_(STRING, mine))
    )
    config = StreamsConfig(application_id="errors")
    with TopologyTestDriver(builder.build(), config) as test_driver:
        with pytest.raises(UserCodeError, match="no B here") as raised:
            pipe(test_driver, "a", "b")
        assert (raised.value.topic, raised.value.offset) == ("in", 1)
        assert out(test_driver) == ["A"]
