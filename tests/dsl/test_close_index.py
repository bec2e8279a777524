"""The close index of emit-final aggregations: what it takes, and what its store holds after
each batch, against the same writes made to a plain sorted map one at a time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamtide.dsl.final_results import CloseIndex
from streamtide.state.encoding import encode_long
from streamtide.state.memory import InMemoryKeyValueBytesStore

# times on a coarse grid (so that adds, removes and takes meet) that spans the lookahead
times = st.integers(0, 10).map(lambda x: x * 15_000)
uppers = st.one_of(times, times.map(lambda t: t - 1))
suffixes = st.sampled_from([b"a", b"b"])
# one batch: ("add", time, suffix) | ("remove", time, suffix) | ("take", upper)
step = st.one_of(
    st.tuples(st.just("add"), times, suffixes),
    st.tuples(st.just("remove"), times, suffixes),
    st.tuples(st.just("take"), uppers),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(step, max_size=12), max_size=6))
def test_takes_and_store_match_writes_one_at_a_time(batches: list[list[tuple]]) -> None:
    store = InMemoryKeyValueBytesStore("index").open_standalone()
    index = CloseIndex(store)
    entries: dict[bytes, int] = {}  # the reference: live entries
    written: dict[bytes, bytes | None] = {}  # the reference: every key ever written, last write
    upper = -1
    for batch in batches:
        for op in batch:
            if op[0] == "take":
                upper = max(upper, op[1])  # stream time does not go back
                expected = sorted((t, k[8:]) for k, t in entries.items() if t <= upper)
                if upper >= index.due_from:
                    assert index.take_due(upper) == expected
                else:
                    assert expected == []
                for t, suffix in expected:
                    del entries[encode_long(t) + suffix]
                    written[encode_long(t) + suffix] = None
                continue
            kind, time, suffix = op
            if kind == "add" and time > upper:  # operators add only what is not due yet
                index.add(time, suffix)
                entries[encode_long(time) + suffix] = time
                written[encode_long(time) + suffix] = b""
            elif kind == "remove":
                index.remove(time, suffix)
                entries.pop(encode_long(time) + suffix, None)
                written[encode_long(time) + suffix] = None
        index.write_back()
        assert dict(store.all()) == {k: v for k, v in written.items() if v is not None}


def test_an_entry_removed_in_its_batch_is_not_taken_from_memory_or_from_the_store() -> None:
    store = InMemoryKeyValueBytesStore("index").open_standalone()
    index = CloseIndex(store)
    index.add(10, b"kept")
    index.add(20, b"stored")
    index.write_back()  # both in the store now
    index.add(15, b"staged")
    index.remove(15, b"staged")
    index.remove(20, b"stored")
    assert index.take_due(100) == [(10, b"kept")]
    index.write_back()
    assert dict(store.all()) == {}


def test_the_store_is_scanned_only_when_an_entry_of_it_can_be_due() -> None:
    store = InMemoryKeyValueBytesStore("index").open_standalone()
    index = CloseIndex(store)
    index.add(60_000, b"late")
    index.write_back()
    assert index.take_due(10) == []
    assert index.due_from == 60_000  # the next entry, found past the scan's bound
    index.add(50, b"early")
    assert index.due_from == 50
    assert index.take_due(59_999) == [(50, b"early")]
    assert index.take_due(100_000) == [(60_000, b"late")]
