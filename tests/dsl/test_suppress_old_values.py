"""``KTable.suppress`` over a table that sends old values: the buffer keeps both sides of an
update and the key's prior value (what was last emitted for it), so a filter below forwards
a tombstone only for a key whose last emitted value passed, as in Kafka Streams."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from streamtide import (
    BufferConfig,
    Consumed,
    Produced,
    Serdes,
    StreamsBuilder,
    StreamsConfig,
    Suppressed,
)
from streamtide.dsl.suppress import Buffered, decode_entry, encode_entry, entry_size
from streamtide.errors import SerdeError
from streamtide.state.encoding import encode_long
from streamtide.testing import TopologyTestDriver

STRING, LONG = Serdes.string(), Serdes.long()
LIMIT = Suppressed.until_time_limit(timedelta(milliseconds=10), BufferConfig.unbounded())
CONFIG = StreamsConfig(application_id="s", default_key_serde=STRING, default_value_serde=STRING)


def counts(builder: StreamsBuilder) -> Any:
    return builder.stream("in", Consumed.with_(STRING, STRING)).group_by_key().count()


def pipe(builder: StreamsBuilder, records: list[tuple], topic: str, state_dir: Any = None) -> list:
    """Pipe ``(key, timestamp)`` records; return ``topic``'s ``(key, value, timestamp)``."""
    with TopologyTestDriver(builder.build(), CONFIG, state_dir=state_dir) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        for key, ts in records:
            inp.pipe_input(key, "x", ts)
        out = driver.create_output_topic(topic, STRING, LONG)
        return [(r.key, r.value, r.timestamp) for r in out.read_records()]


def test_a_filter_above_suppress_sends_changes_the_buffer_can_hold() -> None:
    """The count sends old values to its filter; the buffer used to fail on the Change."""
    builder = StreamsBuilder()
    counts(builder).filter(lambda k, v: v > 1).suppress(LIMIT).to_stream().to(
        "out", Produced.with_(STRING, LONG)
    )
    records = [("a", 0), ("a", 1), ("b", 2), ("a", 30), ("c", 40)]
    # a=2 entered at 1 and was replaced by a=3 at 30 (due then); b and c never passed
    assert pipe(builder, records, "out") == [("a", 3, 30)]


def test_a_tombstone_of_a_filter_above_suppress_leaves_the_buffer() -> None:
    builder = StreamsBuilder()
    counts(builder).filter(lambda k, v: v % 2 == 0).suppress(LIMIT).to_stream().to(
        "out", Produced.with_(STRING, LONG)
    )
    records = [("a", 0), ("a", 1), ("z", 15), ("z", 16), ("a", 17), ("y", 40), ("y", 41)]
    # the node's stream time moves with what passes the filter: a=2 (buffered at 1) leaves
    # at 16; a=3 fails after passing: its tombstone (buffered at 17) leaves at 41
    assert pipe(builder, records, "out") == [("a", 2, 1), ("z", 2, 16), ("a", None, 17)]


def filter_below(builder: StreamsBuilder) -> None:
    held = counts(builder).suppress(LIMIT)
    held.to_stream().to("held", Produced.with_(STRING, LONG))
    held.filter(lambda k, v: v % 4 == 0).to_stream().to("out", Produced.with_(STRING, LONG))


def test_a_filter_below_suppress_tombstones_only_keys_whose_emitted_value_passed() -> None:
    builder = StreamsBuilder()
    filter_below(builder)
    records = [("a", 0), ("a", 1), ("a", 2), ("z", 12), ("a", 13), ("z", 25)]
    records += [("a", 30), ("a", 31), ("y", 45)]
    assert pipe(builder, records, "held") == [
        ("a", 3, 2),
        ("z", 2, 25),
        ("a", 4, 13),
        ("a", 6, 31),
    ]
    # a=3 never passed (no tombstone; a=2 was replaced in the buffer before it left); a=4
    # passes; a=6 leaves with prior value 4 (not the old value 5 of its own update), so
    # the filter forwards a tombstone for it
    assert pipe(builder, records, "out") == [("a", 4, 13), ("a", None, 31)]


def test_the_prior_value_survives_a_restart(tmp_path) -> None:
    """The buffer's prior value of a key is in its store: after a restart a=3 leaves with
    prior value 1 (which passed), so the filter forwards a tombstone."""
    state = tmp_path / "state"

    def topology() -> StreamsBuilder:
        builder = StreamsBuilder()
        held = counts(builder).suppress(LIMIT)
        held.filter(lambda k, v: v == 1).to_stream().to("out", Produced.with_(STRING, LONG))
        return builder

    assert pipe(topology(), [("a", 0), ("z", 20), ("a", 21)], "out", state) == [("a", 1, 0)]
    second = pipe(topology(), [("a", 22), ("y", 40)], "out", state)
    assert second == [("z", 1, 20), ("a", None, 22)]


def test_buffer_entries_keep_prior_old_and_new_values() -> None:
    entry = Buffered(5, (("h", b"v"),), b"p", b"p", b"new")
    assert decode_entry(encode_entry(entry)) == entry
    assert entry_size(b"k", encode_entry(entry)) == 28 + 1 + 1 + 3 + 2  # old counted once
    other = Buffered(5, (), None, b"old", None)
    assert decode_entry(encode_entry(other)) == other
    assert entry_size(b"k", encode_entry(other)) == 28 + 1 + 3


def test_entries_without_prior_or_old_values_keep_the_earlier_layout() -> None:
    """Buffers and changelogs written before old values were kept still decode."""
    earlier = encode_long(5) + (0).to_bytes(4, "big") + b"\x01" + b"value"
    assert decode_entry(earlier) == Buffered(5, (), None, None, b"value")
    assert encode_entry(Buffered(5, (), None, None, b"value")) == earlier
    tombstone = earlier[:12] + b"\x00"
    assert decode_entry(tombstone) == Buffered(5, (), None, None, None)


def test_an_entry_with_an_unknown_layout_is_refused() -> None:
    with pytest.raises(SerdeError, match="unknown value layout 7"):
        decode_entry(encode_long(5) + (0).to_bytes(4, "big") + b"\x07")
