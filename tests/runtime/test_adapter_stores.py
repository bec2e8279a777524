"""A Processor API node's key-value stores during a batch: reads and writes served from
memory, written back once, and every read and error as one put at a time gives them."""

from __future__ import annotations

from typing import Any

from streamtide import Processor, Record, Serdes, Topology
from streamtide.log.api import LogRecord
from streamtide.runtime.stream_task import StreamTask
from streamtide.state.stores import Stores

STRING = Serdes.string()


class Collector:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def partitions_for(self, topic: str) -> int:
        return 1

    def send(self, topic, partition, key, value, timestamp, headers) -> None:
        self.sent.append((topic, key, value))

    def values(self, topic: str) -> list[str]:
        return [value.decode() for t, _, value in self.sent if t == topic]


class Keeper(Processor):
    """Keeps per key a JSON list of the values seen, changed in place after each put; on a
    value "scan" forwards the store's whole content, on "drop" deletes the key, on "big"
    writes a count the INT serde cannot hold."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.lists = context.get_state_store("lists")
        self.counts = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        if value == "scan":
            entries = ";".join(f"{k}={v}" for k, v in self.lists.all())
            self.context.forward(record.with_value(entries))
            return
        if value == "drop":
            self.lists.put(key, None)
            self.context.forward(record.with_value(f"{self.lists.get(key)}"))
            return
        if value == "big":
            self.counts.put(key, 1 << 40)
        seen = self.lists.get(key) or []
        seen.append(value)
        self.lists.put(key, seen)
        seen.append("changed after the put")  # the store keeps what was put
        self.counts.put(key, (self.counts.get(key) or 0) + 1)
        self.context.forward(record.with_value(f"{self.lists.get(key)}|{self.counts.get(key)}"))


def topology(with_output: bool = True) -> Topology:
    json_store = Stores.key_value_store_builder(
        Stores.persistent_key_value_store("lists"), STRING, Serdes.json()
    )
    int_store = Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("counts"), STRING, Serdes.integer()
    )
    topology = (
        Topology()
        .add_source("src", "in", key_serde=STRING, value_serde=STRING)
        .add_processor("keep", Keeper, "src")
        .add_state_store(json_store, "keep")
        .add_state_store(int_store, "keep")
    )
    if with_output:
        topology.add_sink("out", "out", "keep", key_serde=STRING, value_serde=STRING)
    return topology


def run(
    pairs: list[tuple[str, str]], tmp_path: Any, **options: Any
) -> tuple[StreamTask, Collector]:
    """The records through a task at once (a node with children whose failures may be
    skipped hands records on one at a time, its stores then not kept in memory: the options
    choose)."""
    collector = Collector()
    task = StreamTask(
        topology(**options),
        0,
        0,
        collector,
        state_dir=str(tmp_path),
        **(
            {}
            if options.get("with_output", True)
            else {"processing_handler": "log_and_continue", "dead_letter_topic": "dlq"}
        ),
    ).initialize()
    inputs = [
        LogRecord(k.encode(), v.encode(), offset, (), offset) for offset, (k, v) in enumerate(pairs)
    ]
    task.add_records("in", inputs)
    task.process()
    assert task.store("lists")._view is None  # written back when the batch ended
    return task, collector


def test_reads_see_the_batchs_puts_and_not_changes_made_after_them(tmp_path) -> None:
    pairs = [("a", "1"), ("b", "2"), ("a", "3"), ("a", "scan"), ("b", "drop"), ("b", "4")]
    task, collector = run(pairs, tmp_path)
    assert collector.values("out") == [
        "['1']|1",
        "['2']|1",
        "['1', '3']|2",
        "a=['1', '3'];b=['2']",  # a scan in the batch sees its puts, in key order
        "None",
        "['4']|2",
    ]
    # written back when the batch ended
    assert task.store("lists").get("a") == ["1", "3"]
    assert task.store("lists").get("b") == ["4"]
    assert task.store("counts").get("a") == 2


def test_a_value_the_serde_rejects_fails_its_put_and_its_record_only(tmp_path) -> None:
    task, collector = run([("a", "1"), ("a", "big"), ("a", "2")], tmp_path, with_output=False)
    assert collector.values("dlq") == ["big"]
    assert task.store("lists").get("a") == ["1", "2"]
    assert task.store("counts").get("a") == 2
