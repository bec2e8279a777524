"""Serdes in Kafka's byte layouts, with the values of Kafka's own serde tests
(``SerializationTest``, ``WindowedSerdesTest``) and the bytes Java's big-endian
``ByteBuffer`` writes for them; and the deprecated names, which keep their old bytes."""

from __future__ import annotations

import math
import struct
import uuid
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtide import SerdeError, Serdes, Window, Windowed

LONG_MAX = (1 << 63) - 1


@pytest.mark.parametrize(
    "factory,value,hex_bytes",
    [
        (Serdes.short, 32767, "7fff"),
        (Serdes.short, -32768, "8000"),
        (Serdes.integer, 423412424, "193cc2c8"),
        (Serdes.integer, -41243432, "fd8aacd8"),
        (Serdes.long, 922337203685477580, "0ccccccccccccccc"),
        (Serdes.long, -922337203685477581, "f333333333333333"),
        (Serdes.double, 5678567.12312, "4155a979c7e132b5"),
        (Serdes.float32, 5678567.0, "4aad4bce"),  # 5678567.12312f as Java stores it
        (Serdes.string, "my string", "6d7920737472696e67"),
        (Serdes.bytes, b"my string", "6d7920737472696e67"),
    ],
)
def test_kafka_layouts(factory, value, hex_bytes: str) -> None:
    serde = factory()
    assert serde.serialize(value).hex() == hex_bytes
    assert serde.deserialize(bytes.fromhex(hex_bytes)) == value


def test_float32_rounds_like_java_and_keeps_quiet_nan_payloads() -> None:
    serde = Serdes.float32()
    assert serde.serialize(5678567.12312) == bytes.fromhex("4aad4bce")
    assert serde.serialize(-5678567.12341) == bytes.fromhex("caad4bce")
    for bits in (0x7FC00001, 0x7FC00002):
        nan = serde.deserialize(struct.pack(">I", bits))
        assert math.isnan(nan) and serde.serialize(nan) == struct.pack(">I", bits)
    with pytest.raises(SerdeError, match="float32 serde cannot serialize"):
        serde.serialize(1e39)  # beyond single precision


@pytest.mark.parametrize(
    "factory,size", [(Serdes.short, 2), (Serdes.integer, 4), (Serdes.float32, 4), (Serdes.long, 8)]
)
def test_fixed_width_serdes_refuse_other_lengths(factory, size: int) -> None:
    serde = factory()
    for n in (0, size - 1, size + 1):
        with pytest.raises(SerdeError, match=f"expected {size} bytes, got {n}"):
            serde.deserialize(bytes(n))


@pytest.mark.parametrize(
    "factory,value", [(Serdes.short, 1 << 15), (Serdes.integer, -(1 << 31) - 1), (Serdes.long, "1")]
)
def test_out_of_range_or_wrong_type_is_a_serde_error(factory, value) -> None:
    with pytest.raises(SerdeError, match="cannot serialize"):
        factory().serialize(value)


def test_uuid_is_its_text() -> None:
    value = uuid.UUID("123e4567-e89b-12d3-a456-426614174000")
    serde = Serdes.uuid()
    assert serde.serialize(value) == b"123e4567-e89b-12d3-a456-426614174000"
    assert serde.deserialize(serde.serialize(value)) == value
    assert serde.deserialize(b"123E4567-E89B-12D3-A456-426614174000") == value
    with pytest.raises(SerdeError, match="uuid serde cannot serialize"):
        serde.serialize("123e4567-e89b-12d3-a456-426614174000")
    with pytest.raises(SerdeError, match="uuid serde cannot deserialize"):
        serde.deserialize(b"123e4567e89b12d3a456426614174000")


def test_void_is_only_none() -> None:
    serde = Serdes.void()
    assert serde.serialize(None) is None and serde.deserialize(None) is None
    with pytest.raises(SerdeError, match="void serde cannot deserialize"):
        serde.deserialize(bytes(5))
    with pytest.raises(SerdeError, match="void serde cannot serialize"):
        serde.serialize(0)


@pytest.mark.parametrize(
    "factory", [Serdes.short, Serdes.integer, Serdes.long, Serdes.float32, Serdes.double,
                Serdes.uuid, Serdes.void, Serdes.string, Serdes.bytes]
)  # fmt: skip
def test_none_is_none_both_ways(factory) -> None:
    assert factory().serialize(None) is None and factory().deserialize(None) is None


def test_time_windowed_is_key_then_start() -> None:
    # WindowedSerdesTest: Windowed(10, TimeWindow(0, Long.MAX_VALUE)) with Integer keys.
    serde = Serdes.time_windowed(Serdes.integer(), LONG_MAX)
    value = Windowed(10, Window(0, LONG_MAX))
    assert serde.serialize(value) == bytes.fromhex("0000000a" + "00" * 8)
    assert serde.deserialize(serde.serialize(value)) == value
    minute = Serdes.time_windowed(Serdes.string(), 60_000)
    encoded = minute.serialize(Windowed("k", Window(120_000, 180_000)))
    assert encoded == b"k" + struct.pack(">q", 120_000)
    assert minute.deserialize(encoded) == Windowed("k", Window(120_000, 180_000))
    # The end comes from the size and is capped at the largest long, as in Kafka.
    late = minute.deserialize(b"k" + struct.pack(">q", LONG_MAX - 5))
    assert late.window == Window(LONG_MAX - 5, LONG_MAX)
    with pytest.raises(SerdeError, match="at least 8 bytes"):
        minute.deserialize(b"1234567")
    with pytest.raises(ValueError, match="window_size must be positive"):
        Serdes.time_windowed(Serdes.string(), 0)


def test_session_windowed_is_key_then_end_then_start() -> None:
    # WindowedSerdesTest: Windowed(10, SessionWindow(0, 1)) with Integer keys.
    serde = Serdes.session_windowed(Serdes.integer())
    value = Windowed(10, Window(0, 1))
    assert serde.serialize(value) == bytes.fromhex("0000000a" + "0000000000000001" + "00" * 8)
    assert serde.deserialize(serde.serialize(value)) == value
    with pytest.raises(SerdeError, match="at least 16 bytes"):
        serde.deserialize(bytes(15))


@given(st.text(), st.integers(0, 2**40), st.integers(0, 2**20))
def test_session_windowed_round_trip(key: str, start: int, length: int) -> None:
    serde = Serdes.session_windowed(Serdes.string())
    value = Windowed(key, Window(start, start + length))
    assert serde.deserialize(serde.serialize(value)) == value


@pytest.mark.parametrize(
    "name,make,same_bytes_as",
    [
        ("int", Serdes.int, Serdes.long),
        ("float", Serdes.float, Serdes.double),
    ],
)
def test_deprecated_numeric_names_warn_and_keep_their_bytes(name, make, same_bytes_as) -> None:
    with pytest.warns(DeprecationWarning, match=rf"Serdes\.{name}\(\) is deprecated"):
        serde = make()
    assert serde.serialize(7) == same_bytes_as().serialize(7)
    assert len(serde.serialize(7)) == 8


def test_deprecated_windowed_warns_and_keeps_the_legacy_layout() -> None:
    with pytest.warns(DeprecationWarning, match="time_windowed"):
        serde = Serdes.windowed(Serdes.string())
    encoded = serde.serialize(Windowed("k", Window(1, 2)))
    assert encoded == b"k" + struct.pack(">q", 1) + struct.pack(">q", 2)


def test_the_new_names_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for make in (Serdes.short, Serdes.integer, Serdes.long, Serdes.float32, Serdes.double):
            make()
        Serdes.time_windowed(Serdes.string(), 1000)
        Serdes.session_windowed(Serdes.string())


def test_serdes_pickle_for_spark_executors() -> None:
    import pickle

    serdes = [Serdes.short(), Serdes.integer(), Serdes.long(), Serdes.float32(), Serdes.double(),
              Serdes.uuid(), Serdes.void(), Serdes.time_windowed(Serdes.integer(), 60_000),
              Serdes.session_windowed(Serdes.long())]  # fmt: skip
    value = {"short": 3, "integer": 3, "long": 3, "float32": 0.5, "double": 0.5}
    for serde in serdes:
        clone = pickle.loads(pickle.dumps(serde))
        assert repr(clone) == repr(serde)
        if serde.name in value:
            assert clone.serialize(value[serde.name]) == serde.serialize(value[serde.name])


@pytest.mark.parametrize(
    "make,values",
    [
        (Serdes.short, [1, None, -32768, 32767]),
        (Serdes.integer, [423412424, None, -41243432]),
        (Serdes.long, [922337203685477580, None, -1]),
        (Serdes.float32, [0.5, None, 3, -2.25]),
        (Serdes.double, [5678567.12312, None, 7]),
        (Serdes.uuid, [uuid.UUID(int=5), None]),
        (lambda: Serdes.session_windowed(Serdes.integer()), [Windowed(10, Window(0, 1)), None]),
    ],
)
def test_column_paths_match_value_by_value(make, values) -> None:
    serde = make()
    encoded = serde.serialize_many(values)
    assert encoded == [serde.serialize(v) for v in values]
    assert serde.deserialize_many(encoded) == [serde.deserialize(b) for b in encoded]


def test_column_paths_raise_the_value_by_value_errors() -> None:
    with pytest.raises(SerdeError, match="short serde cannot serialize 32768"):
        Serdes.short().serialize_many([1, 32768])
    with pytest.raises(SerdeError, match="expected 4 bytes, got 8"):
        Serdes.integer().deserialize_many([bytes(4), bytes(8)])
    with pytest.raises(SerdeError, match="integer serde cannot serialize True"):
        Serdes.integer().serialize_many([1, True])


@pytest.mark.parametrize(
    "make,values",
    [
        (Serdes.string, ["a", "", "ü€", "with\x00nul", "b"]),
        (Serdes.string, ["a", "", "ü€"]),
        (Serdes.json, [{"b": 1, "a": [1.5, "x\x00y"]}, 7, "s", [], None, {"k": None}]),
        (Serdes.json, [{"b": 1, "a": [1.5, "x\x00y"]}, 7, "s", [], {"k": None}, 1e16]),
    ],
)
def test_text_column_paths_match_value_by_value(make, values) -> None:
    """Strings and JSON are encoded and decoded as one joined text; a NUL inside a value,
    a None or an item with space around its JSON value takes the item-by-item path."""
    serde = make()
    encoded = serde.serialize_many(values)
    assert encoded == [serde.serialize(v) for v in values]
    assert serde.deserialize_many(encoded) == [serde.deserialize(b) for b in encoded]


def test_json_column_decoding_takes_each_item_whole() -> None:
    json = Serdes.json()
    assert json.deserialize_many([b"1", b" 2 ", b'{"a":3}']) == [1, 2, {"a": 3}]
    with pytest.raises(SerdeError):  # no value runs into the next
        json.deserialize_many([b"[1", b"2]"])
    with pytest.raises(SerdeError):
        json.deserialize_many([b"1", b"2 3"])
    with pytest.raises(SerdeError, match="cannot serialize"):
        json.serialize_many([1, {1, 2}])
    with pytest.raises(SerdeError):
        Serdes.string().serialize_many(["a", "\ud800"])
