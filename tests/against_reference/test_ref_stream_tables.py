"""``process_values`` (KIP-820) and ``to_table`` (KIP-523) against the reference: a
processor with a store that may not change keys, with a grouping below it that needs no
repartition; a stream read as a table (materialized, looked up by a stream-table join) and,
after a key change, through its repartition topic."""

from __future__ import annotations

from typing import Any

from streamtide import Processor, Record
from tests.against_reference.inputs import events, on_driver_and_engine
from tests.reference import Plan


class RunningCount(Processor):
    """Forwards each value with the number of records of its key so far (a store); a None
    value as it is."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.seen = context.get_state_store("seen")

    def process(self, record: Record) -> None:
        count = 0
        if record.key is not None:
            count = (self.seen.get(record.key) or 0) + 1
            self.seen.put(record.key, count)
        value = record.value and {"n": record.value["n"], "count": count}
        self.context.forward(record.with_value(value))


def pair(left: Any, right: Any) -> list:
    return [left and left["i"], right and right["i"]]


def stream_tables_plan() -> Plan:
    plan = Plan()
    plan.add_store("seen", value="long")
    updates = plan.stream("in")
    counted = updates.process_values(RunningCount, "seen")
    counted.to("counted")
    counted.group_by_key().count("per-key").to_stream().to("per-key", value="long")
    latest = updates.to_table("latest", store="latest")
    latest.to_stream().to("latest")
    plan.stream("clicks").join_table(latest, pair, left=True).to("enriched")
    rekeyed = updates.select_key(lambda k, v: "abcd"[v["n"] % 4] if v else "e").to_table("by-n")
    rekeyed.to_stream().to("by-n")
    return plan


STREAM_TABLE_EVENTS = events(topics=("in", "in", "clicks"), tombstones=("in",))

(
    test_process_values_and_to_table_on_the_test_driver,
    test_process_values_and_to_table_on_the_engine,
) = on_driver_and_engine("stream-tables", stream_tables_plan, STREAM_TABLE_EVENTS)
