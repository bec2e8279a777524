"""Stateless operators against the reference: filter, filter_not, map, map_values, flat_map,
flat_map_values, select_key, peek, foreach, split/branch, merge, repartition and to (with a
topic name, or a topic chosen per record)."""

from __future__ import annotations

from streamtide.log import LogRecord, open_log
from tests.against_reference.build import build_topology
from tests.against_reference.harness import config
from tests.against_reference.inputs import events, on_driver_and_engine, scratch
from tests.engine.local_driver import LocalDriver
from tests.reference import Plan


def stateless_plan() -> Plan:
    plan = Plan()
    s = plan.stream("in")
    s.peek("seen")
    s.filter(lambda k, v: v["n"] % 4 != 0).map_values(lambda v: {"twice": v["n"] * 2}).to("mapped")
    s.filter_not(lambda k, v: v["n"] < 5).foreach("high")
    s.flat_map_values(lambda v: [v["n"]] * (v["n"] % 3)).to("flat", value="long")
    s.flat_map(lambda k, v: [(f"{k}-{j}", j) for j in range(v["n"] % 3)]).to("pairs", value="long")
    branches = s.split([("small", lambda k, v: v["n"] < 3), ("mid", lambda k, v: v["n"] < 7)])
    branches["small"].merge(branches["default"]).to("merged")
    branches["mid"].map(lambda k, v: ((v["i"] % 2 == 0 and k) or "odd", v["i"])).to(
        "mid", value="long"
    )
    rekeyed = s.filter(lambda k, v: k is not None).select_key(lambda k, v: f"n{v['n'] % 3}")
    rekeyed.repartition("by-n").peek("after").to("by-n")
    s.map(lambda k, v: (k, v["n"])).filter(lambda k, v: k is not None).repartition("same").to(
        "same", value="long"
    )
    return plan


def chosen_topics_plan() -> Plan:
    """``to(extractor)`` beside a plain ``to`` of one of the topics it chooses (the task must
    then keep the records of both in per-record order), after a key change too."""
    plan = Plan()
    s = plan.stream("in")

    def by_size(key, value, context):  # type: ignore[no-untyped-def]
        if context.topic != "in":  # a topic that does not exist: the run fails
            return "unknown"
        return "small" if value["n"] < 5 else "large"

    s.to_chosen(by_size, ["small", "large"])
    s.filter(lambda k, v: v["n"] % 3 == 0).map_values(lambda v: {"third": v["i"]}).to("small")
    by_time = lambda k, v, context: f"time-{context.timestamp % 2}"  # noqa: E731
    rekeyed = s.filter(lambda k, v: k is not None).select_key(lambda k, v: f"n{v['n'] % 3}")
    rekeyed.repartition("chosen").to_chosen(by_time, ["time-0", "time-1"])
    return plan


test_chosen_topics_on_the_test_driver, test_chosen_topics_on_the_engine = on_driver_and_engine(
    "chosen_topics", chosen_topics_plan, events()
)


test_stateless_operators_on_the_test_driver, test_stateless_operators_on_the_engine = (
    on_driver_and_engine("stateless_operators", stateless_plan, events())
)


def test_a_repartition_with_a_partition_count_creates_its_topic_with_that_count() -> None:
    """As Kafka does: the topic gets the count given, and the sub-topology reading it that
    many tasks; every record arrives once."""
    plan = Plan()
    plan.stream("in").repartition("rp", partitions=2).to("out")
    with scratch() as root:
        log = open_log(f"file://{root / 'log'}")
        log.create_topic("in", 4)
        for p in range(4):
            log.append("in", p, [LogRecord(b"k%d" % i, b"%d" % (10 * p + i), i) for i in range(5)])
        driver = LocalDriver(
            build_topology(plan), config(log=log.url, state_dir=str(root / "state"))
        )
        assert log.partitions("ref-rp-repartition") == 2
        for _ in range(5):
            driver.run_batch()
        assert driver.lag() == 0
        assert [s.partitions for s in driver.stages] == [4, 2]
        values = sorted(int(r.value) for p in range(2) for r in log.read("out", p))
        assert values == sorted(10 * p + i for p in range(4) for i in range(5))


def test_a_repartition_with_a_stream_partitioner_places_records_with_it() -> None:
    from streamtide import Consumed, Produced, Repartitioned, Serdes, StreamsBuilder

    def by_value(key, value, key_bytes, n):  # odd values to partition 1, even ones to 0
        return int(value) % 2

    builder = StreamsBuilder()
    string = Serdes.string()
    builder.stream("in", Consumed.with_(string, string)).repartition(
        Repartitioned.as_("rp").with_number_of_partitions(2).with_stream_partitioner(by_value)
    ).to("out", Produced.with_(string, string))
    with scratch() as root:
        log = open_log(f"file://{root / 'log'}")
        log.create_topic("in", 3)
        for p in range(3):
            log.append("in", p, [LogRecord(b"k", b"%d" % (10 * p + i), i) for i in range(4)])
        conf = config(log=log.url, state_dir=str(root / "state"))
        driver = LocalDriver(builder.build(), conf)
        for _ in range(4):
            driver.run_batch()
        topic = f"{conf.application_id}-rp-repartition"
        placed = {p: sorted(int(r.value) for r in log.read(topic, p)) for p in range(2)}
    assert placed == {
        0: [v for v in sorted(10 * p + i for p in range(3) for i in range(4)) if v % 2 == 0],
        1: [v for v in sorted(10 * p + i for p in range(3) for i in range(4)) if v % 2 == 1],
    }
