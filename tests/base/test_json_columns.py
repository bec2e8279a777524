"""The JSON serde's column path (msgspec where it is exact) writes the very bytes, and reads
the very values, that the standard ``json`` module gives with the serde's settings."""

from __future__ import annotations

import enum
import json
import math
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtide import SerdeError, Serdes
from streamtide.json_columns import decode_column, encode_column, is_plain

JSON = Serdes.json()


def reference_bytes(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def reference_value(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"))


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (NaN equal to NaN, -0.0 unlike 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or repr(a) == repr(b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same, a, b))
    return a == b


scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.floats(min_value=-1e-3, max_value=1e-3)
    | st.floats(min_value=1e15, max_value=1e17)
    | st.text()
    | st.text(alphabet=st.characters(max_codepoint=0x80))
)
keys = st.text() | st.text(alphabet='abcXYZ_ \x7f\x00\n"\\', max_size=4)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.dictionaries(keys, inner, max_size=5)
    ),
    max_leaves=20,
)


@settings(max_examples=400)
@given(st.lists(json_values, min_size=1, max_size=8))
def test_a_column_encodes_to_the_bytes_of_json(values: list[Any]) -> None:
    expected = [None if value is None else reference_bytes(value) for value in values]
    assert JSON.serialize_many(values) == expected  # a top-level None is a tombstone


plain_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(min_value=1e-4, max_value=9.999e15)
    | st.floats(min_value=-9.999e15, max_value=-1e-4)
    | st.just(0.0)
    | st.text()
)
plain_values = st.recursive(
    plain_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=400)
@given(st.lists(plain_values, min_size=1, max_size=8).filter(lambda values: None not in values))
def test_plain_values_take_the_msgspec_path_with_the_bytes_of_json(values: list[Any]) -> None:
    assert is_plain(values)
    assert encode_column(values, reference_bytes) == [reference_bytes(v) for v in values]


@settings(max_examples=400)
@given(st.lists(json_values, min_size=1, max_size=8))
def test_a_column_decodes_to_the_values_of_json(values: list[Any]) -> None:
    column = [reference_bytes(value) for value in values]
    decoded = JSON.deserialize_many(column)
    assert all(map(same, decoded, [reference_value(data) for data in column]))


@settings(max_examples=200)
@given(
    st.lists(
        st.text(alphabet=' \t\n\r0123456789.eE+-"[]{},:\\unlfatrsNIy', max_size=12),
        min_size=1,
        max_size=6,
    )
)
def test_any_text_decodes_as_json_does_or_fails_as_json_does(texts: list[str]) -> None:
    column = [text.encode("utf-8") for text in texts]
    try:
        expected = [reference_value(data) for data in column]
    except ValueError:
        with pytest.raises(SerdeError):
            JSON.deserialize_many(column)
        return
    assert all(map(same, JSON.deserialize_many(column), expected))


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    LOW = 1


class Label(str):
    """A str subclass: msgspec takes it as a dict key, the column path must not."""


@pytest.mark.parametrize(
    "value",
    [
        uuid.UUID(int=7),
        Color.RED,
        {1, 2},
        b"bytes",
        {1: "int key"},
        {Label("k"): 1},
        {"a": [{Label("k"): 1}]},
        {"a": {True: 1}},
        {None: 1},
        {(1, 2): 1},
        {1.5: 1},
        {"nested": [{"a": float("nan")}]},
        [float("inf")],
        {"x": 1e-7},
        {"x": 1e16},
        Level.LOW,
        {"deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
    ],
)
def test_values_msgspec_would_write_differently_are_left_to_json(value: Any) -> None:
    assert encode_column([{"ok": 1}, value], reference_bytes) is None
    try:
        expected: Any = [reference_bytes(value)]
    except (TypeError, ValueError):
        expected = SerdeError
    if expected is SerdeError:
        with pytest.raises(SerdeError):
            JSON.serialize_many([value])
    else:
        assert JSON.serialize_many([value]) == expected


def test_non_ascii_and_delete_characters_are_escaped_as_json_does() -> None:
    values = [{"name": "Zoë"}, {"name": "plain"}, "a\x7fb", {"k": "\U0001f600"}]
    assert encode_column(values, reference_bytes) == [reference_bytes(v) for v in values]


def test_a_circular_value_fails_as_json_does() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    loop["again"] = loop
    with pytest.raises(SerdeError, match="Circular reference"):
        JSON.serialize_many([loop])


def test_text_msgspec_rejects_is_decoded_by_json() -> None:
    column = [b"NaN", b"1e999", b'"\\ud800"', b" [1 , 2] ", None]
    assert decode_column(column) is None
    decoded = JSON.deserialize_many(column)
    assert math.isnan(decoded[0]) and decoded[1] == math.inf
    assert decoded[2:] == ["\ud800", [1, 2], None]


@pytest.mark.parametrize(
    "data", [b'"\xff"', b'"\xed\xa0\x80"', b'{"\xc0\xaf":1}', b'"a\x00b"', b"\xef\xbb\xbf1"]
)
def test_bytes_json_refuses_are_refused_with_the_serde_error(data: bytes) -> None:
    assert decode_column([b"1", data]) is None
    with pytest.raises(SerdeError):
        JSON.deserialize_many([b"1", data])
