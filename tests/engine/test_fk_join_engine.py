"""Foreign-key joins (KIP-213) on the engine: 4 partitions, the subscriptions and answers
crossing partitions, a driver restart in the middle on executors without local state. The
engine processes updates in batches, so an answer made for a left value that a later update
in the same batch replaced is dropped as stale where the test driver (one record at a time)
still emits it: what must be equal is every key's final result, in the output topics and in
the materialized join, and no output may be made of values that never met. (An inner join's
tombstone for a key that never joined is unnecessary, as in Kafka; how many come out
depends on the batches.)"""

from __future__ import annotations

import shutil

import pytest

from streamtide import (
    Consumed,
    Materialized,
    Produced,
    StreamsApp,
    StreamsBuilder,
    StreamsConfig,
    Topology,
)
from streamtide.log import open_log
from streamtide.testing import TopologyTestDriver
from tests.engine.scenarios import JSON, STRING, engine_config
from tests.engine.table_scenarios import PARTITIONS, make_table_events, write_table_events

pytestmark = pytest.mark.spark

TOPICS = ("orders", "customers")


def customer_of(order: dict) -> str | None:
    """An order's customer key; None for every tenth order (a left join keeps those)."""
    return None if order["n"] % 10 == 0 else f"u{order['n'] % 12}"


def joined(order: dict, customer: dict | None) -> list:
    return [order["v"], customer and customer["v"]]


def fk_topology() -> Topology:
    builder = StreamsBuilder()
    orders = builder.table("orders", Consumed.with_(STRING, JSON))
    customers = builder.table("customers", Consumed.with_(STRING, JSON))
    stored = Materialized.as_("enriched").with_value_serde(JSON)
    orders.left_join(customers, customer_of, joined, "enriched", stored).to_stream().to(
        "out-left", Produced.with_(STRING, JSON)
    )
    orders.join(customers, customer_of, joined, "matched").to_stream().to(
        "out-inner", Produced.with_(STRING, JSON)
    )
    return builder.build()


def driver_results(events: list) -> dict[str, dict]:
    """Each output topic's last value per key, fed all events in timestamp order."""
    config = StreamsConfig(application_id="expected", default_key_serde=STRING,
                           default_value_serde=JSON)  # fmt: skip
    with TopologyTestDriver(fk_topology(), config) as driver:
        inputs = {t: driver.create_input_topic(t, STRING, JSON) for t in TOPICS}
        for topic, key, value, ts in sorted(events, key=lambda e: e[3]):
            inputs[topic].pipe_input(key, value, timestamp=ts)
        return {
            topic: driver.create_output_topic(topic, STRING, JSON).read_key_values_to_map()
            for topic in ("out-left", "out-inner")
        }


def present(results: dict) -> dict:
    return {key: value for key, value in results.items() if value is not None}


def test_foreign_key_joins_on_the_engine_end_as_on_the_driver(spark, log_url, tmp_path):
    events = make_table_events(300, TOPICS, seed=213)
    first, second = events[:150], events[150:]
    config = engine_config(log_url, str(tmp_path / "state"), app="fk", max_records_per_batch=10)
    write_table_events(log_url, first, TOPICS)
    app = StreamsApp(fk_topology(), config, spark=spark)
    progress = app.run_until_caught_up(timeout=300)
    assert len(progress) >= 2, "the first half must span several batches"
    app.stop()
    shutil.rmtree(tmp_path / "state")  # the restarted driver's executors have no local state
    write_table_events(log_url, second, TOPICS)
    again = StreamsApp(fk_topology(), config, spark=spark)
    progress = again.run_until_caught_up(timeout=300)
    assert sum(p.restored_records for p in progress) > 0, "the subscription stores restore"
    enriched = dict(again.store("enriched").all())
    again.stop()

    # every input value by its unique "v": (topic, key, value)
    inputs = {value["v"]: (topic, key, value) for topic, key, value, _ in events if value}
    log = open_log(log_url)
    try:
        actual: dict[str, dict] = {}
        for topic in ("out-left", "out-inner"):
            latest: dict = {}
            for partition in range(PARTITIONS):
                for record in log.read(topic, partition):
                    key, value = STRING.deserialize(record.key), JSON.deserialize(record.value)
                    latest[key] = value
                    if value is not None:  # an order of this key and its customer
                        _, order_key, order = inputs[value[0]]
                        assert order_key == key
                        if value[1] is not None:
                            assert inputs[value[1]][:2] == ("customers", customer_of(order))
            actual[topic] = latest
    finally:
        log.close()
    expected = driver_results(events)
    assert sum(v is not None for v in expected["out-inner"].values()) > 3
    # the final results (a tombstone for a key that never joined is unnecessary: how many
    # of those come out depends on the batches)
    assert {t: present(v) for t, v in actual.items()} == {
        t: present(v) for t, v in expected.items()
    }
    assert enriched == present(expected["out-left"])
