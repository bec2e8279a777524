"""``TopicEncoder``: the one place records get their bytes and partition (sinks, write_topic)."""

from __future__ import annotations

from typing import Any

from streamtide import Serdes
from streamtide.errors import SerdeError
from streamtide.log.encoder import PartitionOutOfRangeError, TopicEncoder
from streamtide.log.partitioner import partition_for_key
from streamtide.window import Window, Windowed

STRING = Serdes.string()


def test_keys_go_by_murmur2_and_keyless_rows_round_robin() -> None:
    encoder = TopicEncoder(STRING, STRING, first_keyless=1)
    encoded = encoder.encode(["a", None, "b", None, "a", None], ["1"] * 6, 4)
    assert encoded.keys == [b"a", None, b"b", None, b"a", None]
    assert encoded.values == [b"1"] * 6
    a, b = partition_for_key(b"a", 4), partition_for_key(b"b", 4)
    assert encoded.partitions == [a, 1, b, 2, a, 3]
    assert not encoded.errors
    # the round robin goes on across batches
    assert encoder.encode([None], ["x"], 4).partitions == [0]


def test_windowed_keys_go_by_their_base_key() -> None:
    for serde in (Serdes.time_windowed(STRING, 10), Serdes.session_windowed(STRING)):
        encoder = TopicEncoder(serde, STRING)
        keys = [Windowed("user", Window(0, 10)), Windowed("user", Window(10, 20))]
        partitions = encoder.encode(keys, ["1", "2"], 5).partitions
        assert partitions == [partition_for_key(b"user", 5)] * 2


def test_a_partitioner_decides_first_and_none_leaves_the_default() -> None:
    def choose(key: Any, value: Any, key_bytes: Any, n: int) -> int | None:
        return None if value == "default" else int(value)

    encoder = TopicEncoder(STRING, STRING, choose)
    encoded = encoder.encode(["k", "k", "k"], ["2", "default", "9"], 4)
    assert encoded.partitions[:2] == [2, partition_for_key(b"k", 4)]
    assert list(encoded.errors) == [2]
    error = encoded.errors[2]
    assert isinstance(error, PartitionOutOfRangeError) and error.partition == 9
    assert encoded.serde_failed == set()


def test_rows_a_serde_refuses_are_reported_and_take_no_round_robin_turn() -> None:
    encoder = TopicEncoder(Serdes.long(), STRING)
    encoded = encoder.encode([None, "not a number", None], ["a", "b", "c"], 3)
    assert list(encoded.errors) == [1] and encoded.serde_failed == {1}
    assert isinstance(encoded.errors[1], SerdeError)
    assert [encoded.partitions[0], encoded.partitions[2]] == [0, 1]


def test_a_batch_of_new_keys_is_partitioned_as_key_by_key() -> None:
    """A key that repeats among a batch's new keys, keyless rows among them, and a later
    batch over the cached keys all get the partitions of the one-key-at-a-time path."""
    keys = ["a", "b", None, "a", "c", None, "b"]
    encoder, single = TopicEncoder(STRING, STRING), TopicEncoder(STRING, STRING)
    first = encoder.encode(keys, ["v"] * len(keys), 3).partitions
    assert first == [single.encode([k], ["v"], 3).partitions[0] for k in keys]
    assert encoder.encode(keys, ["v"] * len(keys), 3).partitions == [
        single.encode([k], ["v"], 3).partitions[0] for k in keys
    ]
