"""A work unit that stops itself with its transaction open (``python -m
tests.engine.zombie_unit``), for the zombie work-unit test.

It runs tasks 0_0 and 0_1 of the counting topology under the transactional id it is given.
Once both tasks' records are sent and acknowledged in its open transaction, before their
offsets are added and the transaction committed, it writes ``marker`` and stops itself with
SIGSTOP. Continued (SIGCONT), it goes on to commit; it exits with ``FENCED`` if Kafka refuses
that (its producer was fenced meanwhile) and 0 if the commit went through.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from streamtide import Processor, Serdes, StreamsConfig, Topology
from streamtide.errors import FencedError
from streamtide.log import open_log
from streamtide.log.kafka_transaction import KafkaTransaction
from streamtide.record import Record
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.work_unit import ActiveSpec, WorkUnitSpec, run_work_unit
from streamtide.state import Stores
from tests.kafka_broker import KAFKA_TEST_OPTIONS

#: The exit status of a zombie whose commit Kafka refused.
FENCED = 3
TASKS = ("0_0", "0_1")


class _Count(Processor):
    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


def counting_topology() -> Topology:
    """Counts per key (store ``counts``, changelogged) into ``counts-out``."""
    topology = Topology()
    topology.add_source("src", "in", key_serde=Serdes.string(), value_serde=Serdes.string())
    topology.add_processor("count", _Count, "src")
    topology.add_sink(
        "out", "counts-out", "count", key_serde=Serdes.string(), value_serde=Serdes.int()
    )
    builder = Stores.key_value_store_builder(
        Stores.persistent_key_value_store("counts"), Serdes.string(), Serdes.int()
    )
    topology.add_state_store(builder, "count")
    return topology


def config_for(url: str, state_dir: str, app: str) -> StreamsConfig:
    return StreamsConfig(
        application_id=app,
        log=url,
        log_options=dict(KAFKA_TEST_OPTIONS),
        state_dir=state_dir,
    )


def spec_for(client: str, tasks: list[str], end: int, transactional_id: str) -> WorkUnitSpec:
    """The first batch of ``tasks`` (input offsets 0 to ``end``) on ``client``."""
    actives = [ActiveSpec(task, {"in": [0, end]}, {}) for task in tasks]
    return WorkUnitSpec(0, 0, client, actives, transactional_id=transactional_id)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("state_dir")
    parser.add_argument("app")
    parser.add_argument("transactional_id")
    parser.add_argument("end", type=int)
    parser.add_argument("marker")
    args = parser.parse_args()
    send_offsets = KafkaTransaction.send_offsets

    def stop_first(self: KafkaTransaction, *more: Any, **kwargs: Any) -> None:
        self.flush()  # the records are in the broker's open transaction
        Path(args.marker).write_text("open")
        os.kill(os.getpid(), signal.SIGSTOP)
        send_offsets(self, *more, **kwargs)

    KafkaTransaction.send_offsets = stop_first  # type: ignore[method-assign]
    config = config_for(args.url, args.state_dir, args.app)
    log = open_log(args.url, **KAFKA_TEST_OPTIONS)
    spec = spec_for("c1", list(TASKS), args.end, args.transactional_id)
    try:
        run_work_unit(counting_topology(), config, log, spec, make_task_stores)
    except FencedError as exc:
        print(f"fenced: {exc}", flush=True)
        sys.exit(FENCED)
    print("committed", flush=True)


if __name__ == "__main__":
    main()
