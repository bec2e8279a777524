"""The typed key-value store's range reads: whole chunks deserialized at once, with the same
entries, order and errors as one entry at a time."""

from __future__ import annotations

import pytest

import streamtide.state.typed as typed
from streamtide import Serdes
from streamtide.errors import SerdeError
from streamtide.state.stores import KeyValueBytesStoreSupplier
from streamtide.state.typed import SerdeKeyValueStore


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> SerdeKeyValueStore:
    monkeypatch.setattr(typed, "_DECODE_CHUNK", 4)  # several chunks from a few entries
    inner = KeyValueBytesStoreSupplier("typed", "in_memory", logging_enabled=False).get()
    typed_store = SerdeKeyValueStore(inner, Serdes.string(), Serdes.long())
    typed_store.open_standalone()
    return typed_store


def test_range_reads_span_chunks_in_key_order(store: SerdeKeyValueStore) -> None:
    for n in range(11):
        store.put(f"k{n:02d}", n)
    assert list(store.all()) == [(f"k{n:02d}", n) for n in range(11)]
    assert list(store.range("k03", "k09")) == [(f"k{n:02d}", n) for n in range(3, 10)]
    assert list(store.prefix_scan("k1")) == [("k10", 10)]


def test_an_entry_that_does_not_deserialize_fails_after_the_ones_before_it(
    store: SerdeKeyValueStore,
) -> None:
    for n in range(7):
        store.put(f"k{n}", n)
    store.inner.put(b"k5", b"not a long")  # a value of the wrong width, in the second chunk
    seen = []
    with pytest.raises(SerdeError, match="long"):
        for entry in store.all():
            seen.append(entry)
    assert seen == [(f"k{n}", n) for n in range(5)]
