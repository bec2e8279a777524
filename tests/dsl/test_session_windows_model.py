"""Session aggregation compared with simple reference models on random out-of-order input.

Two models, each checked on every emitted change and on the final store contents, for
``count`` and for ``aggregate`` with a list-building aggregator (both in one topology):

- from scratch (retention longer than the input): sessions are the runs of a key's sorted
  timestamps whose neighbours are at most ``gap`` apart, recomputed for every prefix of the
  input; a record's emission is a tombstone for every session of the previous prefix that is
  gone, then the session containing the record;
- merge by scan (short retention, so segments and expiry take part): a plain list of sessions
  that applies the session window rules (docs/windows.md) rule by rule.
"""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from streamtide import (
    Consumed,
    Materialized,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    Window,
    Windowed,
)
from streamtide.testing import TopologyTestDriver

Session = tuple[str, int, int]  # key, start, end


def build(gap: int, retention: int):
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.int()))
    windowed = stream.group_by_key().windowed_by(
        SessionWindows.with_inactivity_gap(gap).until(retention)
    )
    windowed.count(Materialized.as_("counts")).to_stream().to("count-out")
    windowed.aggregate(
        list,
        lambda _k, v, agg: [*agg, v],
        lambda _k, a, b: a + b,
        Materialized.as_("lists").with_value_serde(Serdes.json()),
    ).to_stream().to("list-out")
    driver = TopologyTestDriver(builder.build())
    inp = driver.create_input_topic("in", Serdes.string(), Serdes.int())
    key_serde = Serdes.windowed(Serdes.string())
    counts = driver.create_output_topic("count-out", key_serde, Serdes.int())
    lists = driver.create_output_topic("list-out", key_serde, Serdes.json())
    return driver, inp, counts, lists


def flat(out) -> list[tuple[Session, object]]:
    return [((k.key, k.window.start, k.window.end), v) for k, v in out.read_key_values()]


def from_scratch(records: list[tuple[str, int, int]], gap: int) -> dict[Session, list[int]]:
    """Sessions of ``(key, time, value)`` records, each with its values (sorted)."""
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for key, t, value in records:
        by_key[key].append((t, value))
    sessions: dict[Session, list[int]] = {}
    for key, items in by_key.items():
        items.sort()
        start = end = items[0][0]
        values: list[int] = []
        for t, value in items:
            if t - end > gap:
                sessions[(key, start, end)] = sorted(values)
                start, values = t, []
            end = t
            values.append(value)
        sessions[(key, start, end)] = sorted(values)
    return sessions


def times(seconds: int) -> st.SearchStrategy[int]:
    """Mostly whole seconds, so that gap and retention boundaries are hit exactly."""
    return st.one_of(
        st.integers(min_value=0, max_value=seconds).map(lambda s: s * 1000),
        st.integers(min_value=0, max_value=seconds * 1000),
    )


inputs = st.lists(st.tuples(st.sampled_from("ab"), times(60)), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None)
@given(records=inputs, gap=st.sampled_from([1, 1000, 4000, 15_000]))
def test_matches_sessions_recomputed_from_scratch(records, gap):
    driver, inp, counts, lists = build(gap, 86_400_000)
    with driver:
        seen: list[tuple[str, int, int]] = []
        before: dict[Session, list[int]] = {}
        for value, (key, t) in enumerate(records):
            inp.pipe_input(key, value, timestamp=t)
            seen.append((key, t, value))
            after = from_scratch(seen, gap)
            (new,) = [s for s in after if s[0] == key and s[1] <= t <= s[2]]
            gone = sorted((s for s in before if s not in after), key=lambda s: (s[2], s[1]))
            expected = [(s, None) for s in gone]
            assert flat(counts) == [*expected, (new, len(after[new]))]
            emitted = flat(lists)
            assert emitted[:-1] == expected
            assert emitted[-1][0] == new and sorted(emitted[-1][1]) == after[new]
            before = after
        stored = {
            (w.key, w.window.start, w.window.end): agg
            for w, agg in driver.get_session_store("lists").all()
        }
        assert {s: sorted(v) for s, v in stored.items()} == before
        count_store = driver.get_session_store("counts")
        for key in "ab":
            expected_sessions = sorted((s for s in before if s[0] == key), key=lambda s: s[2])
            assert count_store.fetch(key) == [
                (Windowed(key, Window(s[1], s[2])), len(before[s])) for s in expected_sessions
            ]


class ScanModel:
    """A list of stored sessions, applying the session window rules to each record."""

    def __init__(self, gap: int, retention: int) -> None:
        self.gap, self.retention = gap, retention
        self.stream_time = -1
        self.stored: dict[Session, list[int]] = {}

    def live(self, session: Session) -> bool:
        return session[2] >= self.stream_time - self.retention

    def process(self, key: str, t: int, value: int) -> list[tuple[Session, object]]:
        self.stream_time = max(self.stream_time, t)
        merged = sorted(
            (
                s
                for s in self.stored
                if s[0] == key and self.live(s) and s[2] >= t - self.gap and s[1] <= t + self.gap
            ),
            key=lambda s: (s[2], s[1]),
        )
        agg: list[int] = []
        for s in merged:
            agg = agg + self.stored[s]
        agg = [*agg, value]
        new = (key, min([t] + [s[1] for s in merged]), max([t] + [s[2] for s in merged]))
        emitted: list[tuple[Session, object]] = [(s, None) for s in merged if s != new]
        for s in merged:
            del self.stored[s]
        if self.live(new):
            self.stored[new] = agg
        return [*emitted, (new, agg)]


@settings(max_examples=40, deadline=None)
@given(
    records=st.lists(
        st.tuples(st.sampled_from("ab"), times(300)),
        min_size=1,
        max_size=30,
    ),
    gap=st.sampled_from([1000, 5000, 20_000]),
    factor=st.integers(min_value=1, max_value=4),
)
def test_matches_a_merge_by_scan_model_with_expiry(records, gap, factor):
    retention = gap * factor
    model = ScanModel(gap, retention)
    driver, inp, counts, lists = build(gap, retention)
    with driver:
        for value, (key, t) in enumerate(records):
            inp.pipe_input(key, value, timestamp=t)
            expected = model.process(key, t, value)
            assert flat(lists) == expected
            assert flat(counts) == [(s, None if a is None else len(a)) for s, a in expected]
        live = {s: agg for s, agg in model.stored.items() if model.live(s)}
        stored = {
            (w.key, w.window.start, w.window.end): agg
            for w, agg in driver.get_session_store("lists").all()
        }
        assert stored == live
