"""``KTable.suppress`` (KIP-328) through the TopologyTestDriver.

Windowed cases are Apache Kafka's SuppressScenarioTest; the buffer cases are its
KTableSuppressProcessorTest, driven through a count (Kafka drives the processor directly).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from streamtide import (
    BufferConfig,
    BufferFullError,
    Consumed,
    Materialized,
    Produced,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    StreamsConfig,
    Suppressed,
    TimeWindows,
    TopologyError,
    Window,
    Windowed,
)
from streamtide.testing import TopologyTestDriver

STRING, LONG = Serdes.string(), Serdes.long()
UNBOUNDED = BufferConfig.unbounded()
FINAL = Suppressed.until_window_closes(UNBOUNDED)


def w(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def run(
    table_of: Callable[[Any], Any],
    suppressed: Suppressed,
    records: list[tuple],
    windowed: bool = True,
    state_dir: Any = None,
) -> tuple[list[tuple], list[tuple]]:
    """Pipe ``(key, timestamp)`` or ``(key, timestamp, headers)`` records into
    ``table_of(grouped stream)``; return its raw and its suppressed updates."""
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, STRING)).group_by_key()
    table = table_of(grouped)
    key_serde = Serdes.windowed(STRING) if windowed else STRING
    table.to_stream().to("raw", Produced.with_(key_serde, LONG))
    table.suppress(suppressed).to_stream().to("suppressed", Produced.with_(key_serde, LONG))
    config = StreamsConfig(
        application_id="suppress", default_key_serde=STRING, default_value_serde=STRING
    )
    with TopologyTestDriver(builder.build(), config, state_dir=state_dir) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        for key, ts, *headers in records:
            inp.pipe_input(key, "v", timestamp=ts, headers=headers[0] if headers else ())
        outputs = []
        for topic in ("raw", "suppressed"):
            out = driver.create_output_topic(topic, key_serde, LONG)
            outputs.append([(r.key, r.value, r.timestamp) for r in out.read_records()])
        return outputs[0], outputs[1]


def uncached_count(windows: Any) -> Callable[[Any], Any]:
    return lambda grouped: grouped.windowed_by(windows).count(
        Materialized.as_("counts").with_caching_disabled()
    )


def plain_count(grouped: Any) -> Any:
    return grouped.count(Materialized.as_("counts").with_caching_disabled())


# ---- final results: SuppressScenarioTest -------------------------------------------------------


def test_final_results_for_time_windows() -> None:
    records = [("k1", 0), ("k1", 1), ("k1", 2), ("k1", 1), ("k1", 0), ("k1", 5), ("k1", 0)]
    raw, suppressed = run(uncached_count(TimeWindows.of_size_and_grace(2, 1)), FINAL, records)
    assert raw == [
        (w("k1", 0, 2), 1, 0),
        (w("k1", 0, 2), 2, 1),
        (w("k1", 2, 4), 1, 2),
        (w("k1", 0, 2), 3, 1),
        (w("k1", 0, 2), 4, 1),
        (w("k1", 4, 6), 1, 5),
    ]  # the last record is beyond the grace period: dropped
    assert suppressed == [(w("k1", 0, 2), 4, 1), (w("k1", 2, 4), 1, 2)]


def test_final_results_for_time_windows_with_a_large_jump() -> None:
    records = [("k1", t) for t in (0, 1, 2, 0, 3, 0, 4, 0, 30)]
    raw, suppressed = run(uncached_count(TimeWindows.of_size_and_grace(2, 2)), FINAL, records)
    assert raw == [
        (w("k1", 0, 2), 1, 0),
        (w("k1", 0, 2), 2, 1),
        (w("k1", 2, 4), 1, 2),
        (w("k1", 0, 2), 3, 1),
        (w("k1", 2, 4), 2, 3),
        (w("k1", 0, 2), 4, 1),
        (w("k1", 4, 6), 1, 4),
        (w("k1", 30, 32), 1, 30),
    ]
    assert suppressed == [(w("k1", 0, 2), 4, 1), (w("k1", 2, 4), 2, 3), (w("k1", 4, 6), 1, 4)]


def test_final_results_for_session_windows() -> None:
    """Kafka's scenario; one update differs by design (SEMANTICS 5): no tombstone before a
    session's re-emission under the same window. The late k1@5 (its session ended before
    stream time 11 - gap 5 - grace 0) is dropped under the grace rule, as in Kafka."""
    records = [("k1", 0), ("k1", 5), ("k1", 1), ("k2", 11), ("k1", 5), ("k1", 30)]
    windows = SessionWindows.of_inactivity_gap_with_no_grace(5)
    raw, suppressed = run(uncached_count(windows), FINAL, records)
    assert raw == [
        (w("k1", 0, 0), 1, 0),
        (w("k1", 0, 0), None, 0),
        (w("k1", 0, 5), 2, 5),
        (w("k1", 0, 5), 3, 5),
        (w("k2", 11, 11), 1, 11),
        (w("k1", 30, 30), 1, 30),
    ]
    assert suppressed == [(w("k1", 0, 5), 3, 5), (w("k2", 11, 11), 1, 11)]


def test_final_results_for_sliding_windows() -> None:
    records = [("k1", t) for t in (10, 11, 10, 13, 10, 24, 5, 7, 90)]
    windows = SlidingWindows.of_time_difference_and_grace(5, 15)
    raw, suppressed = run(uncached_count(windows), FINAL, records)
    shown = sorted(
        ((f"[{k.key}@{k.window.start}/{k.window.end}]", ts), v) for k, v, ts in raw
    )  # Kafka's test sorts by the printed key, then timestamp
    assert [(key, v, ts) for (key, ts), v in shown] == [
        ("[k1@11/16]", 1, 11),
        ("[k1@11/16]", 2, 13),
        ("[k1@12/17]", 1, 13),
        ("[k1@19/24]", 1, 24),
        ("[k1@5/10]", 1, 10),
        ("[k1@5/10]", 2, 10),
        ("[k1@5/10]", 3, 10),
        ("[k1@5/10]", 4, 10),
        ("[k1@5/10]", 5, 10),
        ("[k1@6/11]", 2, 11),
        ("[k1@6/11]", 3, 11),
        ("[k1@6/11]", 4, 11),
        ("[k1@6/11]", 5, 11),
        ("[k1@8/13]", 4, 13),
        ("[k1@8/13]", 5, 13),
        ("[k1@85/90]", 1, 90),
    ]
    assert suppressed == [
        (w("k1", 5, 10), 5, 10),
        (w("k1", 6, 11), 5, 11),
        (w("k1", 8, 13), 5, 13),
        (w("k1", 11, 16), 2, 13),
        (w("k1", 12, 17), 1, 13),
        (w("k1", 19, 24), 1, 24),
    ]


def test_a_session_leaves_the_buffer_at_end_plus_gap_plus_grace() -> None:
    """SEMANTICS 4b: suppress uses ``>=`` for sessions too (emit-final waits one more ms)."""
    windows = SessionWindows.of_inactivity_gap_and_grace(5_000, 2_000)
    records = [("a", 0), ("a", 3_000), ("b", 9_999)]
    assert run(uncached_count(windows), FINAL, records)[1] == []
    records.append(("b", 10_000))
    assert run(uncached_count(windows), FINAL, records)[1] == [(w("a", 0, 3_000), 2, 3_000)]


def test_final_results_with_grace_wait_one_past_the_window_end() -> None:
    records = [("hey", 99), ("dummyKey1", 100), ("dummyKey2", 101)]
    windows = TimeWindows.of_size_and_grace(1, 1)
    assert run(uncached_count(windows), FINAL, records[:2])[1] == []
    assert run(uncached_count(windows), FINAL, records)[1] == [(w("hey", 99, 100), 1, 99)]


def test_final_results_with_zero_grace_still_wait_for_the_window_end() -> None:
    windows = TimeWindows.of_size_with_no_grace(100)
    assert run(uncached_count(windows), FINAL, [("hey", 5)])[1] == []
    suppressed = run(uncached_count(windows), FINAL, [("hey", 5), ("dummyKey", 100)])[1]
    assert suppressed == [(w("hey", 0, 100), 1, 5)]


def test_final_results_need_a_windowed_table() -> None:
    builder = StreamsBuilder()
    table = builder.stream("in", Consumed.with_(STRING, STRING)).group_by_key().count()
    with pytest.raises(TopologyError, match="windowed table"):
        table.suppress(FINAL)


def test_final_results_refuse_a_buffer_that_emits_early() -> None:
    with pytest.raises(ValueError, match="never emits early"):
        Suppressed.until_window_closes(BufferConfig.max_records(3))
    strict = BufferConfig.max_records(3).shutdown_when_full()
    assert Suppressed.until_window_closes(strict).buffer.records_limit == 3


# ---- time limits: SuppressScenarioTest / KTableSuppressProcessorTest ---------------------------


def test_time_limit_emits_a_key_once_the_limit_passed_since_its_first_update() -> None:
    limit = Suppressed.until_time_limit(timedelta(milliseconds=2), UNBOUNDED)
    records = [("k1", 0), ("k1", 1), ("k2", 2)]
    raw, suppressed = run(plain_count, limit, records, windowed=False)
    assert raw == [("k1", 1, 0), ("k1", 2, 1), ("k2", 1, 2)]
    assert suppressed == [("k1", 2, 1)]
    _, suppressed = run(plain_count, limit, [*records, ("tick", 3)], windowed=False)
    assert suppressed == [("k1", 2, 1)]  # k2 entered at 2: due at 4
    _, suppressed = run(plain_count, limit, [*records, ("tick", 3), ("tock", 4)], False)
    assert suppressed == [("k1", 2, 1), ("k2", 1, 2)]  # tick entered at 3: still buffered


def test_zero_time_limit_emits_at_once() -> None:
    limit = Suppressed.until_time_limit(0, UNBOUNDED)
    raw, suppressed = run(plain_count, limit, [("hey", 7), ("hey", 8)], windowed=False)
    assert suppressed == raw == [("hey", 1, 7), ("hey", 2, 8)]


def test_time_limit_buffers_and_emits_later_with_headers() -> None:
    limit = Suppressed.until_time_limit(1, UNBOUNDED)
    headers = [("k", b"v")]
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .count()
        .suppress(limit)
        .to_stream()
        .to("out", Produced.with_(STRING, LONG))
    )
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        out = driver.create_output_topic("out", STRING, LONG)
        inp.pipe_input("hey", "v", timestamp=0, headers=headers)
        assert out.read_records() == []
        inp.pipe_input("tick", "v", timestamp=1)
        (record,) = out.read_records()
        assert (record.key, record.value, record.timestamp) == ("hey", 1, 0)
        assert list(record.headers) == headers


def test_time_limit_forwards_tombstones() -> None:
    limit = Suppressed.until_time_limit(0, BufferConfig.max_records(0))
    windows = SessionWindows.with_inactivity_gap(5_000)
    raw, suppressed = run(uncached_count(windows), limit, [("a", 0), ("a", 3_000)])
    assert (
        suppressed
        == raw
        == [
            (w("a", 0, 0), 1, 0),
            (w("a", 0, 0), None, 0),
            (w("a", 0, 3_000), 2, 3_000),
        ]
    )


@pytest.mark.parametrize(
    "buffer", [BufferConfig.max_records(1), BufferConfig.max_bytes(60)], ids=["records", "bytes"]
)
def test_a_full_buffer_emits_its_oldest_record_early(buffer: BufferConfig) -> None:
    """hey: 3 key bytes + 8 value bytes + 28 = 39; dummyKey: 8 + 8 + 28 = 44 (> 60 together)."""
    limit = Suppressed.until_time_limit(timedelta(days=100), buffer.emit_early_when_full())
    _, suppressed = run(plain_count, limit, [("hey", 100), ("dummyKey", 101)], windowed=False)
    assert suppressed == [("hey", 1, 100)]


@pytest.mark.parametrize(
    "buffer",
    [
        BufferConfig.max_records(1).shutdown_when_full(),
        BufferConfig.max_bytes(60).shutdown_when_full(),
    ],
    ids=["records", "bytes"],
)
def test_a_full_buffer_that_must_shut_down_stops_with_a_clear_error(buffer: BufferConfig) -> None:
    limit = Suppressed.until_time_limit(timedelta(days=100), buffer).with_name("slow")
    with pytest.raises(BufferFullError, match="'slow' exceeded its max capacity") as info:
        run(plain_count, limit, [("hey", 100), ("dummyKey", 100)], windowed=False)
    assert "2/" in str(info.value) or "83/60" in str(info.value)


def test_a_full_buffer_stops_even_with_a_continuing_error_handler() -> None:
    builder = StreamsBuilder()
    limit = Suppressed.until_time_limit(1_000, BufferConfig.max_records(1).shutdown_when_full())
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .count()
        .suppress(limit)
        .to_stream()
        .to("out", Produced.with_(STRING, LONG))
    )
    config = StreamsConfig(application_id="a", processing_exception_handler="log_and_continue")
    with TopologyTestDriver(builder.build(), config) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        inp.pipe_input("a", "v", timestamp=1)
        with pytest.raises(BufferFullError):
            inp.pipe_input("b", "v", timestamp=2)


def test_named_suppression_names_its_buffer_store() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .count()
        .suppress(Suppressed.until_time_limit(5, UNBOUNDED).with_name("hold"))
    )
    description = str(builder.build().describe())
    assert "hold" in description and "hold-store" in description


def test_the_buffer_survives_a_restart(tmp_path) -> None:
    """The buffered record and the observed stream time are in the changelogged store."""
    limit = Suppressed.until_time_limit(10, UNBOUNDED)
    state = tmp_path / "state"
    _, first = run(plain_count, limit, [("a", 100)], windowed=False, state_dir=state)
    assert first == []
    _, second = run(plain_count, limit, [("b", 105)], windowed=False, state_dir=state)
    assert second == []  # stream time 105: a (entered at 100) is due at 110
    _, third = run(plain_count, limit, [("c", 90)], windowed=False, state_dir=state)
    assert third == [("c", 1, 90)]  # due at once: stream time 105 survived the restart
    _, fourth = run(plain_count, limit, [("d", 110)], windowed=False, state_dir=state)
    assert fourth == [("a", 1, 100)]
