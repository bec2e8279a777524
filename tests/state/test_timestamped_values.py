"""The value-and-timestamp format of timestamped stores, and their plain view."""

from __future__ import annotations

import pytest

from streamtide.serde import Serdes
from streamtide.state.memory import InMemoryKeyValueBytesStore
from streamtide.state.stores import KeyValueStoreBuilder, Stores
from streamtide.state.timestamped import (
    FORMAT_MARKER,
    NO_TIMESTAMP,
    TimestampedValueSerde,
    ValueAndTimestamp,
    decode,
    encode,
)
from streamtide.state.typed import SerdeKeyValueStore, TimestampedKeyValueStore


@pytest.mark.parametrize("timestamp", [0, 7_000, NO_TIMESTAMP, (1 << 63) - 1])
@pytest.mark.parametrize("value", [b"", b"x", bytes([FORMAT_MARKER]) * 20])
def test_values_round_trip_with_their_timestamp(value: bytes, timestamp: int) -> None:
    assert decode(encode(value, timestamp)) == (value, timestamp)


@pytest.mark.parametrize(
    "plain",
    [
        b"",
        b"\x00" * 8,
        bytes([FORMAT_MARKER]),
        bytes([FORMAT_MARKER]) + b"\x00" * 12,  # the marker, but no valid checksum
        encode(b"v", 5)[:12],  # a header cut short
        bytes([FORMAT_MARKER]) + encode(b"v", 5)[1:9] + b"\x00\x00\x00\x00v",
    ],
)
def test_plain_values_of_the_previous_layout_have_no_timestamp(plain: bytes) -> None:
    assert decode(plain) == (plain, NO_TIMESTAMP)


def test_the_serde_gives_a_plain_and_a_timestamped_view() -> None:
    serde = TimestampedValueSerde(Serdes.json())
    stored = serde.serialize_with_timestamp({"n": 1}, 42)
    assert serde.deserialize(stored) == {"n": 1}
    assert serde.deserialize_with_timestamp(stored) == ValueAndTimestamp({"n": 1}, 42)
    assert serde.deserialize_with_timestamp(serde.serialize([1])) == ([1], NO_TIMESTAMP)
    old = Serdes.json().serialize({"n": 2})
    assert serde.deserialize(old) == {"n": 2}
    assert serde.deserialize_with_timestamp(old) == ({"n": 2}, NO_TIMESTAMP)
    assert serde.serialize_with_timestamp(None, 1) is None
    assert serde.deserialize_with_timestamp(None) is None


def test_a_timestamped_store_reads_plain_values_to_its_users() -> None:
    inner = InMemoryKeyValueBytesStore("s").open_standalone()
    old = SerdeKeyValueStore(inner, Serdes.string(), Serdes.long())
    old.put("old", 1)  # as the previous release stored it
    store = TimestampedKeyValueStore(inner, Serdes.string(), Serdes.long())
    store.put_with_timestamp("new", 2, 9_000)
    store.put("plain", 3)
    assert store.get("old") == 1 and store.get("new") == 2
    assert list(store.all()) == [("new", 2), ("old", 1), ("plain", 3)]
    assert list(store.range("new", "old")) == [("new", 2), ("old", 1)]
    assert store.get_with_timestamp("old") == (1, NO_TIMESTAMP)
    assert store.get_with_timestamp("new") == (2, 9_000)
    assert store.get_with_timestamp("plain") == (3, NO_TIMESTAMP)
    assert store.get_with_timestamp("absent") is None
    assert store.delete("new") == 2
    store.put_with_timestamp("old", None, 1)
    assert list(store.all()) == [("plain", 3)]
    assert decode(inner.get(b"plain"))[1] == NO_TIMESTAMP  # stored in the new layout


def test_the_builder_makes_timestamped_stores_on_request() -> None:
    supplier = Stores.in_memory_key_value_store("s")
    assert type(KeyValueStoreBuilder(supplier).build()) is SerdeKeyValueStore
    built = KeyValueStoreBuilder(supplier, timestamped=True).build()
    assert isinstance(built, TimestampedKeyValueStore)
