"""Kafka-compatible murmur2 partitioning."""

from __future__ import annotations

import pytest

from streamtide.log import murmur2, partition_for_key

# Reference values of Kafka's Utils.murmur2 (its own unit test).
KAFKA_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_partition_for_key_is_positive_hash_mod_partitions() -> None:
    for data, h in KAFKA_MURMUR2:
        assert partition_for_key(data, 7) == (h & 0x7FFFFFFF) % 7
    assert partition_for_key(b"", 3) in range(3)
    assert {partition_for_key(f"k{i}".encode(), 4) for i in range(200)} == {0, 1, 2, 3}


def test_partition_for_key_rejects_no_partitions() -> None:
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)
