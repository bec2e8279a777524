from __future__ import annotations

import pytest

from streamtide import (
    Consumed,
    Materialized,
    Produced,
    Record,
    Serdes,
    StreamsBuilder,
    TopologyError,
    UnknownTopicError,
)
from streamtide.testing import TopologyTestDriver


def upper_topology():
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string()))
    stream.map_values(str.upper).to("out", Produced.with_(Serdes.string(), Serdes.string()))
    stream.group_by_key().count(Materialized.as_("counts"))
    return builder.build()


def test_records_keep_timestamps_and_headers_and_reads_consume() -> None:
    with TopologyTestDriver(upper_topology(), initial_wall_clock_ms=1234) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out", Serdes.string(), Serdes.string())
        assert out.is_empty()
        inp.pipe_input("k", "a", headers=[("h", b"1")])
        inp.pipe_record_list([Record("k", "b", 99), ("j", "c", 100), ("j", "d")])
        records = out.read_records()
        assert [(r.key, r.value, r.timestamp) for r in records] == [
            ("k", "A", 1234),
            ("k", "B", 99),
            ("j", "C", 100),
            ("j", "D", 1234),
        ]
        assert records[0].headers == (("h", b"1"),)
        assert out.is_empty() and out.read_key_values() == []
        inp.pipe_input("k", "e", 5)
        assert out.read_key_values_to_map() == {"k": "E"}


def test_stores_are_reachable_by_kind() -> None:
    with TopologyTestDriver(upper_topology()) as driver:
        driver.create_input_topic("in", Serdes.string(), Serdes.string()).pipe_input("k", "a", 1)
        assert driver.get_key_value_store("counts").get("k") == 1
        with pytest.raises(TopologyError, match="not session"):
            driver.get_session_store("counts")
        with pytest.raises(TopologyError, match="unknown state store 'nope'"):
            driver.get_state_store("nope")


def test_every_pipe_commits_and_the_stores_apply_what_they_sent() -> None:
    with TopologyTestDriver(upper_topology()) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        (task,) = [t for t in driver.tasks if "counts" in t.subtopology.stores]
        logged = task.stores.logged["counts"]
        changelog = task.stores.changelog_topic("counts")
        seen: set[bytes] = set()
        for count, key in enumerate(["k", "j", "k"], start=1):
            inp.pipe_input(key, "a", count)
            seen.add(key.encode())
            assert logged.pending == 0 and logged.unapplied == 0  # nothing held back
            assert [k for k, _ in logged.inner.all()] == sorted(seen)  # the local store has it
            assert len(driver.topic_records(changelog)) == count
            assert task.stores.local_offsets() == {"counts": count}


def test_unknown_input_topic_is_rejected() -> None:
    with (
        TopologyTestDriver(upper_topology()) as driver,
        pytest.raises(UnknownTopicError, match="no source of the topology reads topic 'x'"),
    ):
        driver.create_input_topic("x", Serdes.string(), Serdes.string())


def test_a_closed_driver_refuses_work() -> None:
    driver = TopologyTestDriver(upper_topology())
    inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
    driver.close()
    with pytest.raises(RuntimeError, match="closed"):
        inp.pipe_input("k", "v", 1)
