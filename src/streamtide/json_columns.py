"""JSON for whole columns of values through msgspec's C encoder and decoder, giving exactly the
bytes and values of the standard ``json`` module with the JSON serde's settings (sorted keys,
compact separators, ASCII output).

msgspec writes and reads the same text as ``json`` for plain values, but not for everything:
it encodes types ``json`` rejects (UUIDs, datetimes, enums, sets, dataclasses...), writes
non-ASCII text and U+007F unescaped, formats floats below 1e-4 or from 1e16 up differently,
and rejects NaN, infinities and lone surrogates that ``json`` accepts. So a column is encoded
here only when every value in it is made of exactly dicts, lists, tuples, ``str``, ``int``,
``bool``, None and finite floats in the range where both write the same digits (checked a
level at a time in C loops; with sorted keys msgspec takes only ``str`` keys, so no other
key is plain), and each value's text that is not plain ASCII is written by ``json``
instead. Decoding through msgspec gives the same values as ``json``
for all the text msgspec accepts; anything it rejects is decoded by ``json`` (the caller's
path). Each function returns None where the caller must use ``json``.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain, compress, repeat
from math import isfinite
from typing import Any

import msgspec

_ENCODE_LINES = msgspec.json.Encoder(order="sorted").encode_lines
_DECODE = msgspec.json.Decoder().decode
_DICT, _LIST, _TUPLE, _FLOAT = dict, list, tuple, float
_PLAIN = frozenset({dict, list, tuple, str, int, bool, float, type(None)})
_CONTAINERS = frozenset({dict, list, tuple})
#: The only dict keys of a plain value (exactly ``str``: msgspec takes a subclass too).
_KEYS = frozenset({str})
_IS_A = type.__instancecheck__
#: Floats whose shortest text both write alike: zero, and magnitudes in [1e-4, 1e16).
_SMALLEST, _LARGEST = 1e-4, 1e16
#: A column nested deeper, or holding more items in all, is left to ``json`` (which also
#: finds circular references, which would make this check go on forever).
_MAX_DEPTH = 32
_ITEMS_PER_VALUE = 64


def _of_type(items: list[Any], kind: type) -> list[Any]:
    return list(compress(items, map(_IS_A, repeat(kind), items)))


def _plain_floats(floats: list[float]) -> bool:
    if not all(map(isfinite, floats)):
        return False
    sizes = list(map(abs, floats))
    return max(sizes) < _LARGEST and min(filter(None, sizes), default=_SMALLEST) >= _SMALLEST


def is_plain(values: list[Any]) -> bool:
    """True when every value is built only of the types msgspec writes exactly as ``json``
    (see the module's docstring), with only ``str`` as dict keys (with sorted keys msgspec
    takes no other key, and ``json`` takes the column). A few C loops per nesting level, no
    Python call per item; keys are checked where they are and do not go down a level."""
    budget = _ITEMS_PER_VALUE * len(values) + 1_000
    level = values
    kinds = set(map(type, level))
    for _ in range(_MAX_DEPTH):
        if not kinds <= _PLAIN:
            return False
        if _FLOAT in kinds and not _plain_floats(_of_type(level, _FLOAT)):
            return False
        if not kinds & _CONTAINERS:
            return True
        one_kind = len(kinds) == 1
        dicts = (level if one_kind else _of_type(level, _DICT)) if _DICT in kinds else []
        if dicts and not set(map(type, chain.from_iterable(dicts))) <= _KEYS:
            return False
        sequences = [
            level if one_kind else _of_type(level, kind)
            for kind in (_LIST, _TUPLE)
            if kind in kinds
        ]
        # the types one level down first, without a list: most often they are all scalars
        inner = set(map(type, chain.from_iterable(map(_DICT.values, dicts))))
        for items in sequences:
            inner.update(map(type, chain.from_iterable(items)))
        if not inner <= _PLAIN:
            return False
        if not inner & _CONTAINERS and _FLOAT not in inner:
            return True
        level = list(chain.from_iterable(map(_DICT.values, dicts)))
        for items in sequences:
            level.extend(chain.from_iterable(items))
        kinds = inner
        budget -= len(level)
        if budget < 0:
            return False
    return False


def encode_column(values: list[Any], one: Callable[[Any], bytes]) -> list[bytes] | None:
    """The JSON bytes of each value (no None among them), or None when the column is not
    plain; a value whose text is not plain ASCII is written by ``one`` (``json``)."""
    if not values or not is_plain(values):
        return None
    try:
        lines = _ENCODE_LINES(values)
    except (TypeError, ValueError, OverflowError):  # e.g. a lone surrogate, a huge int
        return None
    if lines.isascii() and b"\x7f" not in lines:
        out = lines.split(b"\n")  # JSON text escapes every newline inside a value
        out.pop()  # after the last value's newline
        return out
    return [
        text if text.isascii() and b"\x7f" not in text else one(value)
        for text, value in zip(lines.split(b"\n"), values)
    ]


def decode_column(items: list[Any]) -> list[Any] | None:
    """The value of each JSON text (None stays None), or None when msgspec rejects any item
    (then ``json`` decodes the column and raises the precise error, if any)."""
    try:
        if None in items:
            return [None if data is None else _DECODE(data) for data in items]
        return list(map(_DECODE, items))
    except Exception:  # any rejection sends the column to json
        return None
