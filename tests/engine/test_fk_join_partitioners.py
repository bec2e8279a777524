"""KIP-775: a foreign-key join of tables whose topics a custom partitioner wrote, on the
engine's batch loop (4 partitions, without Spark). ``TableJoined.with_(partitioner,
other_partitioner)`` tells the join where each side's keys are: subscriptions must reach the
foreign table's partition of their key, or they are answered as if it had no row."""

from __future__ import annotations

import pytest

from streamtide import Consumed, Produced, StreamsBuilder, TableJoined, Topology
from streamtide.log import LogRecord, open_log
from tests.engine.local_driver import LocalDriver
from tests.engine.scenarios import JSON, STRING, engine_config

PARTITIONS = 4


def by_number(key: str, value: object, key_bytes: bytes | None, partitions: int) -> int:
    """The partition of ``"c7"`` or ``"o7"``: 7 mod the partition count (not murmur2)."""
    return int(key[1:]) % partitions


def topology(partitioners: bool) -> Topology:
    builder = StreamsBuilder()
    orders = builder.table("orders", Consumed.with_(STRING, JSON))
    customers = builder.table("customers", Consumed.with_(STRING, JSON))
    joined = TableJoined.with_(by_number, by_number) if partitioners else TableJoined()
    orders.left_join(
        customers,
        lambda order: order["customer"],
        lambda order, customer: [order["n"], customer and customer["name"]],
        joined.with_name("by-number"),
    ).to_stream().to("out", Produced.with_(STRING, JSON))
    return builder.build()


def run(tmp_path, partitioners: bool) -> dict[str, list]:
    url = f"file://{tmp_path}/log-{partitioners}"
    log = open_log(url)
    for topic in ("orders", "customers"):
        log.create_topic(topic, PARTITIONS)
    for c in range(8):
        key = f"c{c}"
        record = LogRecord(STRING.serialize(key), JSON.serialize({"name": f"name{c}"}), 10 + c)
        log.append("customers", by_number(key, None, None, PARTITIONS), [record])
    for o in range(16):
        key, value = f"o{o}", {"n": o, "customer": f"c{(o * 3) % 8}"}
        record = LogRecord(STRING.serialize(key), JSON.serialize(value), 100 + o)
        log.append("orders", by_number(key, None, None, PARTITIONS), [record])
    config = engine_config(url, str(tmp_path / f"state-{partitioners}"), app="kip775")
    driver = LocalDriver(topology(partitioners), config)
    driver.run_until_caught_up()
    results = {}
    for partition in range(PARTITIONS):
        for r in log.read("out", partition):
            results[STRING.deserialize(r.key)] = JSON.deserialize(r.value)
    log.close()
    return results


def expected() -> dict[str, list]:
    return {f"o{o}": [o, f"name{(o * 3) % 8}"] for o in range(16)}


def test_table_joined_partitioners_send_subscriptions_to_the_foreign_rows(tmp_path) -> None:
    assert run(tmp_path, partitioners=True) == expected()


@pytest.mark.parametrize("partitioners", [False])
def test_without_them_the_subscriptions_miss_the_foreign_rows(tmp_path, partitioners):
    """The control: by murmur2 of the foreign key, most subscriptions reach a partition
    without the foreign row (a left join then answers None)."""
    results = run(tmp_path, partitioners)
    assert results != expected()
    assert sum(value[1] is None for value in results.values()) > 4
