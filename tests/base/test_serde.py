from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtide import SerdeError, Serdes, Window, Windowed


@pytest.mark.parametrize(
    "serde,value,encoded",
    [
        (Serdes.string(), "héllo", "héllo".encode()),
        (Serdes.int(), 1, b"\x00\x00\x00\x00\x00\x00\x00\x01"),
        (Serdes.int(), -1, b"\xff" * 8),
        (Serdes.float(), 1.5, b"\x3f\xf8\x00\x00\x00\x00\x00\x00"),
        (Serdes.json(), {"b": 1, "a": [1, 2]}, b'{"a":[1,2],"b":1}'),
        (Serdes.bytes(), b"\x00\x01", b"\x00\x01"),
    ],
)
def test_known_encodings(serde, value, encoded) -> None:
    assert serde.serialize(value) == encoded
    assert serde.deserialize(encoded) == value


@pytest.mark.parametrize("serde", [Serdes.string(), Serdes.int(), Serdes.json(), Serdes.bytes()])
def test_none_is_a_tombstone_both_ways(serde) -> None:
    assert serde.serialize(None) is None and serde.deserialize(None) is None


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_int_round_trip(n: int) -> None:
    assert Serdes.int().deserialize(Serdes.int().serialize(n)) == n


@given(st.floats(allow_nan=False))
def test_float_round_trip(x: float) -> None:
    assert Serdes.float().deserialize(Serdes.float().serialize(x)) == x


def test_float_nan_round_trip() -> None:
    assert math.isnan(Serdes.float().deserialize(Serdes.float().serialize(float("nan"))))


@given(st.text(), st.integers(0, 2**40), st.integers(0, 2**20))
def test_windowed_round_trip(key: str, start: int, size: int) -> None:
    serde = Serdes.windowed(Serdes.string())
    value = Windowed(key, Window(start, start + size))
    assert serde.deserialize(serde.serialize(value)) == value


@pytest.mark.parametrize(
    "serde,value,message",
    [
        (Serdes.int(), "7", "int serde cannot serialize '7' of type str"),
        (Serdes.int(), 2**63, "int serde cannot serialize"),
        (Serdes.string(), 5, "string serde cannot serialize 5"),
        (Serdes.json(), {1, 2}, "json serde cannot serialize"),
        (Serdes.bytes(), "x", "bytes serde cannot serialize"),
    ],
)
def test_values_a_serde_cannot_encode_raise_clear_errors(serde, value, message) -> None:
    with pytest.raises(SerdeError, match=message):
        serde.serialize(value)


@pytest.mark.parametrize(
    "serde,data", [(Serdes.int(), b"\x01"), (Serdes.string(), b"\xff"), (Serdes.json(), b"{")]
)
def test_bad_bytes_raise_clear_errors(serde, data) -> None:
    with pytest.raises(SerdeError, match="cannot deserialize"):
        serde.deserialize(data)


def test_custom_serde_from_functions() -> None:
    serde = Serdes.from_functions(
        lambda v: v.to_bytes(2, "big"), lambda b: int.from_bytes(b, "big"), "u16"
    )
    assert serde.deserialize(serde.serialize(513)) == 513
    with pytest.raises(SerdeError, match="u16 serde"):
        serde.serialize(-1)
