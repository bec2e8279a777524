"""Errors in work units: reported once with where they happened, retried only when a retry
can help."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamtide import (
    BufferConfig,
    Consumed,
    ErrorHandlerContext,
    HandlerFailedError,
    ProcessingHandlerResponse,
    Processor,
    Produced,
    Record,
    Serdes,
    StreamsApp,
    StreamsBuilder,
    Suppressed,
)
from streamtide.engine.failures import RemoteTraceback, failure_report, rebuild
from streamtide.errors import (
    BufferFullError,
    CorruptLogError,
    InvalidTimestampError,
    SerdeError,
    StreamsProcessingError,
    StreamtideError,
    UserCodeError,
)
from streamtide.log import LogRecord, open_log
from tests.engine.scenarios import (
    JSON,
    STRING,
    by_user_key,
    engine_config,
    engine_outputs,
    expected_outputs,
    log_options_for,
    make_events,
    session_topology,
    write_events,
)
from tests.engine.test_exactly_once import pass_through


def raised(exc: BaseException, cause: BaseException | None = None) -> BaseException:
    try:
        raise exc from cause
    except BaseException as caught:
        return caught


def test_a_processing_error_is_rebuilt_with_its_type_and_record() -> None:
    error = StreamsProcessingError(
        "processing failed: ZeroDivisionError: division by zero",
        task_id="0_1",
        node="KSTREAM-PROCESSOR-0000000001",
        topic="events",
        partition=1,
        offset=41,
    )
    report = failure_report(raised(error, ZeroDivisionError("division by zero")))
    assert not report.fatal
    again = rebuild(report)
    assert type(again) is StreamsProcessingError and str(again) == str(error)
    assert (again.node, again.task_id, again.offset) == (error.node, "0_1", 41)


class CustomStoreError(Exception):
    """An error type an application lists in ``fatal_exceptions``."""


@pytest.mark.parametrize(
    ("exc", "cause", "fatal"),
    [
        (CorruptLogError("bad crc"), None, True),
        (InvalidTimestampError("negative", offset=3), None, True),
        (StreamsProcessingError("cannot deserialize"), SerdeError("bad json"), True),
        (UserCodeError("processing failed", offset=3), ValueError("v"), True),  # user code
        (StreamsProcessingError("processing failed"), CustomStoreError("k"), True),  # listed
        (RuntimeError("flush failed"), CustomStoreError("k"), True),  # listed, anywhere
        (CustomStoreError("k"), None, True),
        (StreamsProcessingError("processing failed"), ValueError("v"), False),  # the engine's
        (HandlerFailedError("processing failed"), ValueError("v"), True),  # a handler's FAIL
        (BufferFullError("suppression buffer of 's' exceeded its max capacity"), None, True),
        (OSError("disk full"), None, False),  # the infrastructure: retried
        (RuntimeError("a bug"), None, False),
    ],
)
def test_errors_no_retry_can_heal_are_fatal(exc, cause, fatal) -> None:
    report = failure_report(raised(exc, cause), fatal_exceptions=(CustomStoreError,))
    assert report.fatal is fatal
    rebuilt = rebuild(report)
    assert isinstance(rebuilt, StreamtideError)
    assert type(rebuilt) is (type(exc) if isinstance(exc, StreamtideError) else StreamtideError)


class FailsAt(Processor):
    """Notes every record it is given in a file (a side effect outside the application)
    and raises ZeroDivisionError at record ``n == at``, every time."""

    def __init__(self, seen: str, at: int) -> None:
        self.seen, self.at = seen, at

    def process(self, record: Record) -> None:
        n = record.value.get("n")
        with open(self.seen, "a") as f:
            f.write(f"{n}\n")
        if n == self.at:
            _ = 1 // 0
        self.context.forward(record)


def failing_mapper(seen: str, at: int) -> Any:
    """A ``map_values`` function like ``FailsAt``."""

    def divide(value: dict) -> dict:
        with open(seen, "a") as f:
            f.write(f"{value.get('n')}\n")
        return {**value, "ratio": 1 // (value.get("n") - at)}

    return divide


def failing_topology(seen: str, at: int, kind: str = "processor"):
    builder = StreamsBuilder()
    events = builder.stream("events", Consumed.with_(STRING, JSON))
    if kind == "processor":
        events = events.process(lambda: FailsAt(seen, at), named="divider")
    else:
        events = events.map_values(failing_mapper(seen, at), "divider")
    events.to("out", Produced.with_(STRING, JSON, by_user_key))
    return builder.build()


def assert_stopped_at_first_occurrence(error: StreamsProcessingError, log_url: str, seen: Path):
    """``error`` names the record ``n == 30`` (node, task, topic, partition, offset), and user
    code was given that record once and no record twice."""
    assert isinstance(error, UserCodeError)
    assert error.node == "divider" and error.topic == "events" and error.offset is not None
    assert error.task_id == f"0_{error.partition}"
    assert "ZeroDivisionError: integer division or modulo by zero" in str(error)
    assert isinstance(error.__cause__, RemoteTraceback)
    assert len(str(error.__cause__).splitlines()) <= 25
    log = open_log(log_url, **log_options_for(log_url))
    (record,) = log.read("events", error.partition, error.offset, error.offset + 1)
    assert JSON.deserialize(record.value)["n"] == 30
    given = seen.read_text().split()
    assert given.count("30") == 1, "the failing record reached user code once"
    assert len(given) == len(set(given)), "no record reached user code twice"


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["processor", "mapper"])
def test_user_code_that_raises_stops_the_app_at_its_first_occurrence(
    spark, log_url, tmp_path, kind
) -> None:
    """With the ``fail`` handler, no retry: user code may call other systems."""
    events = [(u, {**v, "n": i}, ts) for i, (u, v, ts) in enumerate(make_events(60, seed=41))]
    write_events(log_url, events)
    seen = tmp_path / "seen"
    config = engine_config(log_url, str(tmp_path / "state"))
    app = StreamsApp(failing_topology(str(seen), at=30, kind=kind), config, spark=spark)
    with pytest.raises(UserCodeError) as info:
        app.run_until_caught_up(timeout=300)
    assert_stopped_at_first_occurrence(info.value, log_url, seen)


@pytest.mark.spark
def test_a_type_in_fatal_exceptions_stops_the_app_also_outside_user_code(
    spark, log_url, tmp_path
) -> None:
    """An infrastructure failure is retried (``test_exactly_once``), unless its type is
    listed in ``fatal_exceptions``: then the app stops at once."""
    events = [(u, {**v, "n": i}, ts) for i, (u, v, ts) in enumerate(make_events(60, seed=47))]
    write_events(log_url, events)
    marker = str(tmp_path / "failed-once")
    config = engine_config(log_url, str(tmp_path / "state"), fatal_exceptions=(OSError,))
    app = StreamsApp(pass_through(marker, at=30, how="log-write"), config, spark=spark)
    with pytest.raises(StreamtideError, match=r"OSError: .*injected") as info:
        app.run_until_caught_up(timeout=300)  # the injected failure happens once: no retry
    assert not isinstance(info.value, UserCodeError)
    assert engine_outputs(log_url, "dedup") == {0: [], 1: []}  # nothing was committed


@pytest.mark.spark
def test_a_skipped_poison_record_reaches_the_dead_letter_topic_exactly_once(
    spark, log_url, tmp_path
) -> None:
    events = [(u, {**v, "n": i}, ts) for i, (u, v, ts) in enumerate(make_events(200, seed=44))]
    write_events(log_url, events)
    marker = tmp_path / "raised"
    config = engine_config(
        log_url,
        str(tmp_path / "state"),
        processing_exception_handler="log_and_continue",
        errors_dead_letter_topic="dead-letters",
    )
    StreamsApp(failing_topology(str(marker), at=130), config, spark=spark).run_until_caught_up(
        timeout=300
    )
    StreamsApp(failing_topology(str(marker), at=130), config, spark=spark).run_until_caught_up(
        timeout=300
    )  # a restart processes nothing again
    log = open_log(log_url)
    (dead,) = [
        r for p in range(log.partitions("dead-letters")) for r in log.read("dead-letters", p)
    ]
    assert JSON.deserialize(dead.value)["n"] == 130
    headers = dict(dead.headers)
    assert headers["streamtide.exception"] == b"builtins.ZeroDivisionError"
    assert headers["streamtide.processor"] == b"divider"
    assert headers["streamtide.topic"] == b"events"
    assert Path(marker).read_text().split().count("130") == 1
    out = sorted(JSON.deserialize(r.value)["n"] for p in range(2) for r in log.read("out", p))
    assert out == [n for n in range(200) if n != 130]


@pytest.mark.spark
def test_a_handler_function_answering_fail_stops_the_app_without_retries(
    spark, log_url, tmp_path
) -> None:
    events = [(u, {**v, "n": i}, ts) for i, (u, v, ts) in enumerate(make_events(60, seed=45))]
    write_events(log_url, events)
    marker = tmp_path / "raised"

    def give_up(context: ErrorHandlerContext, record: Record, exc: Exception) -> Any:
        return ProcessingHandlerResponse.FAIL  # shipped to the executors with the config

    config = engine_config(log_url, str(tmp_path / "state"), processing_exception_handler=give_up)
    app = StreamsApp(failing_topology(str(marker), at=30), config, spark=spark)
    with pytest.raises(HandlerFailedError) as info:
        app.run_until_caught_up(timeout=300)
    error = info.value
    assert (error.node, error.topic, error.task_id) == ("divider", "events", f"0_{error.partition}")
    assert error.offset is not None and "ZeroDivisionError" in str(error)
    assert Path(marker).read_text().split().count("30") == 1


@pytest.mark.spark
def test_a_full_suppression_buffer_that_must_shut_down_stops_the_app(
    spark, log_url, tmp_path
) -> None:
    """Even with a continuing error handler: the node and the limits are named, no retry."""
    write_events(log_url, make_events(60, seed=46))
    builder = StreamsBuilder()
    full = BufferConfig.max_records(2).shutdown_when_full()
    (
        builder.stream("events", Consumed.with_(STRING, JSON))
        .group_by_key()
        .count()
        .suppress(Suppressed.until_time_limit(3_600_000, full).with_name("hold"))
        .to_stream()
        .to("out", Produced.with_(STRING, Serdes.long()))
    )
    config = engine_config(
        log_url, str(tmp_path / "state"), processing_exception_handler="log_and_continue"
    )
    app = StreamsApp(builder.build(), config, spark=spark)
    with pytest.raises(BufferFullError, match=r"'hold' exceeded its max capacity: 3/2 records"):
        app.run_until_caught_up(timeout=300)


@pytest.mark.spark
def test_a_negative_timestamp_stops_the_app_or_is_skipped(spark, log_url, tmp_path) -> None:
    events = make_events(40, seed=42)
    write_events(log_url, events)
    log = open_log(log_url)
    log.append("events", 0, [LogRecord(b"u1", b'{"id": "x"}', -5)])
    bad = log.end_offset("events", 0) - 1
    config = engine_config(log_url, str(tmp_path / "s"))
    with pytest.raises(InvalidTimestampError) as info:
        StreamsApp(session_topology(), config, spark=spark).run_until_caught_up(timeout=300)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("events", 0, bad)
    skip = config.with_overrides(invalid_timestamp_handler="log_and_skip")
    StreamsApp(session_topology(), skip, spark=spark).run_until_caught_up(timeout=300)
    assert engine_outputs(log_url, "session") == expected_outputs("session", events)


@pytest.mark.spark
def test_a_damaged_input_segment_stops_the_app_naming_the_file(spark, log_url, tmp_path) -> None:
    write_events(log_url, make_events(40, seed=43))
    root = Path(open_log(log_url).root)
    (segment,) = (root / "events" / "1" / "segments").iterdir()
    data = bytearray(segment.read_bytes())
    data[len(data) // 3] ^= 0x04
    segment.write_bytes(bytes(data))
    app = StreamsApp(session_topology(), engine_config(log_url, str(tmp_path / "s")), spark=spark)
    with pytest.raises(CorruptLogError) as info:
        app.run_until_caught_up(timeout=300)
    assert "topic partition events/1" in str(info.value) and segment.name in str(info.value)
    assert engine_outputs(log_url, "session") == {0: [], 1: []}  # nothing was committed
