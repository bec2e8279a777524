"""A filter of a key-value stream aggregation asks it for old values when it is built
(Kafka's KTableFilter, KAFKA-10077), so it forwards a tombstone only for a key that passed
before, never one for a key that never passed; through the record cache the old value is
the one the last flush emitted."""

from __future__ import annotations

from datetime import timedelta

from streamtide import (
    BufferConfig,
    Consumed,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    Suppressed,
)
from streamtide.testing import TopologyTestDriver

STRING, LONG = Serdes.string(), Serdes.long()


def even_counts(builder: StreamsBuilder) -> object:
    counts = (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .count(Materialized.as_("counts"))
    )
    counts.filter(lambda k, n: n % 2 == 0).to_stream().to("even", Produced.with_(STRING, LONG))
    return counts


def test_a_filter_of_a_count_forwards_no_tombstone_for_a_key_that_never_passed() -> None:
    builder = StreamsBuilder()
    even_counts(builder)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        for i in range(3):
            inp.pipe_input("a", "x", i * 1000)
        inp.pipe_input("b", "x", 3000)
        out = driver.create_output_topic("even", STRING, LONG)
        # a: 1 fails (no tombstone), 2 passes, 3 fails after passing (tombstone); b: 1 fails
        assert [(r.key, r.value, r.timestamp) for r in out.read_records()] == [
            ("a", 2, 1000),
            ("a", None, 2000),
        ]


def test_through_the_record_cache_the_old_value_is_the_last_flushed_one() -> None:
    """Flushes emit a=3 (fails: nothing), then a=5 with old value 3 (fails and failed:
    nothing, although the update before it, 4, passed), then a=6 (passes)."""
    builder = StreamsBuilder()
    even_counts(builder)
    with TopologyTestDriver(builder.build(), cache_enabled=True) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        out = driver.create_output_topic("even", STRING, LONG)
        inp.pipe_record_list([("a", "x", 0), ("a", "x", 1), ("a", "x", 2)])
        assert out.read_key_values() == []
        inp.pipe_record_list([("a", "x", 3), ("a", "x", 4)])
        assert out.read_key_values() == []
        inp.pipe_record_list([("a", "x", 5)])
        assert out.read_key_values() == [("a", 6)]
        inp.pipe_record_list([("a", "x", 6), ("a", "x", 7)])
        assert out.read_key_values() == [("a", 8)]
        inp.pipe_record_list([("a", "x", 8)])
        assert out.read_key_values() == [("a", None)]


def test_a_count_that_is_also_suppressed_still_sends_old_values_to_its_filter() -> None:
    """The suppression buffer keeps both sides of an update: with one below, the count still
    sends old values, and its filter forwards no tombstone for a key that never passed."""
    builder = StreamsBuilder()
    counts = even_counts(builder)
    counts.suppress(
        Suppressed.until_time_limit(timedelta(seconds=1), BufferConfig.unbounded())
    ).to_stream().to("held", Produced.with_(STRING, LONG))
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        for i in range(3):
            inp.pipe_input("a", "x", i * 1000)
        assert driver.create_output_topic("even", STRING, LONG).read_key_values() == [
            ("a", 2),
            ("a", None),
        ]
        # a=1 entered the buffer at 0 s and was replaced by a=2, emitted at 1 s
        assert driver.create_output_topic("held", STRING, LONG).read_key_values() == [("a", 2)]
