"""A driver process that dies at a chosen step of a batch (``python -m
tests.engine.crash_driver``), for the crash-point tests.

It runs the engine's batch loop without Spark (``LocalDriver``: the real committer,
application directory, work units, RocksDB stores and log) on the counting topology of the
crash-point tests. Every step of a batch is a *hook*: a method of the protocol wrapped so that
it reports the step, and, at the chosen occurrence of the chosen step, ends the process with
``os._exit`` (a real process death: no ``finally``, no ``atexit``, no flush; open Kafka
transactions and unsealed segments stay as they are). Without a target it runs to the end and
writes the trace of steps it passed, ``[[step, batch], ...]``, which the tests pick their
crash points from. The steps of a starting driver (``epoch``, ``task-fenced``) are hooks too,
so a driver can also die while it restarts after another one died.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamtide.engine.app_dir import AppDirectory
from streamtide.engine.committer import BatchCommitter
from streamtide.engine.kafka_committer import KafkaBatchCommitter
from streamtide.log.file_topic_manifest import TopicManifest
from streamtide.log.kafka_transaction import KafkaTransaction
from streamtide.runtime.kafka_unit_commit import KafkaUnitCommit
from streamtide.runtime.task_host import TaskHost
from tests.engine.local_driver import LocalDriver
from tests.engine.scenarios import engine_config

#: The exit status of a driver that died at its crash point.
DIED = 77


@dataclass(frozen=True)
class Step:
    """A hook: ``owner.method`` reports ``name`` before or after it runs; ``only`` keeps the
    calls it applies to (say, the transactions of tasks, not the driver's)."""

    name: str
    owner: Any
    method: str
    after: bool = True
    only: Callable[[Any], bool] | None = None
    meaning: str = ""


def _unit_transaction(txn: Any) -> bool:
    return str(txn.where).startswith("work unit ")


#: The steps of a batch on the file log, in the order a batch passes them.
FILE_STEPS = (
    Step("offsets", AppDirectory, "create_offsets", meaning="the stage's ranges are recorded"),
    Step(
        "segments-written",
        TaskHost,
        "write_outputs",
        meaning="a work unit wrote its tasks' outputs and changelogs as unsealed segments",
    ),
    Step("prepare", AppDirectory, "create_prepare", meaning="the prepare record names winners"),
    Step(
        "seal-group",
        TopicManifest,
        "create",
        meaning="one topic's group of seals is created (durable), the stage's others not yet",
    ),
    Step("seal", AppDirectory, "create_seal", meaning="the stage's seal record is written"),
    Step("sweep", BatchCommitter, "sweep", meaning="losing attempts' segments are deleted"),
    Step("commit", AppDirectory, "create_commit", meaning="the batch's commit record"),
)

#: The steps of a batch on Kafka, in the order a batch passes them.
KAFKA_STEPS = (
    Step(
        "driver-fence",
        KafkaBatchCommitter,
        "check_fence",
        meaning="the driver's fencing transaction committed",
    ),
    Step("offsets", AppDirectory, "create_offsets", meaning="the stage's ranges are recorded"),
    Step(
        "unit-open",
        KafkaUnitCommit,
        "__init__",
        meaning="a work unit's producer is initialised (fencing), its stores not restored yet",
    ),
    Step(
        "records-sent",
        KafkaTransaction,
        "send_offsets",
        after=False,
        only=_unit_transaction,
        meaning="a work unit's records are in its open transaction, its offsets not yet",
    ),
    Step(
        "offsets-sent",
        KafkaTransaction,
        "send_offsets",
        only=_unit_transaction,
        meaning="a work unit's records and offsets are in its open transaction",
    ),
    Step(
        "txn-committed",
        KafkaTransaction,
        "commit",
        only=_unit_transaction,
        meaning="a work unit's transaction committed, its offsets not read back",
    ),
    Step(
        "read-back",
        KafkaUnitCommit,
        "_confirm",
        meaning="a work unit read its committed offsets back, its stores not updated",
    ),
    Step(
        "stores-applied",
        TaskHost,
        "_apply_committed",
        meaning="a task applied its run's writes to its stores, its report not sent",
    ),
    Step("prepare", AppDirectory, "create_prepare", meaning="the prepare record (the reports)"),
    Step("seal", AppDirectory, "create_seal", meaning="the stage's seal record"),
    Step("commit", AppDirectory, "create_commit", meaning="the batch's commit record"),
    Step(
        "purge",
        KafkaBatchCommitter,
        "purge",
        meaning="consumed repartition records are deleted",
    ),
)

#: Steps of a driver that starts (for a second crash, before its first batch): its epoch is
#: taken; on Kafka, one more task's transactional id is initialised (fenced).
RESTART_STEPS = (
    Step("epoch", AppDirectory, "take_epoch", meaning="a starting driver took its epoch"),
)


def steps_for(kafka: bool) -> tuple[Step, ...]:
    return KAFKA_STEPS if kafka else FILE_STEPS


class Hooks:
    """Counts the steps a driver passes; dies at ``target`` (``(step, occurrence)``)."""

    def __init__(self, target: tuple[str, int] | None) -> None:
        self.target = target
        self.counts: dict[str, int] = {}
        self.trace: list[tuple[str, int]] = []
        self.driver: LocalDriver | None = None

    def passed(self, step: str) -> None:
        self.counts[step] = self.counts.get(step, 0) + 1
        batch = self.driver.batch if self.driver is not None else -1
        self.trace.append((step, batch))
        if self.target == (step, self.counts[step]):
            os._exit(DIED)  # the process is gone: nothing after this step happens

    def install(self, steps: tuple[Step, ...], log_class: Any) -> None:
        for step in (*steps, *RESTART_STEPS):
            self._wrap(log_class if step.owner == "log" else step.owner, step)
        self._hook_fencing()

    def _wrap(self, owner: Any, step: Step) -> None:
        original = getattr(owner, step.method)
        hooks = self

        def hooked(*args: Any, **kwargs: Any) -> Any:
            applies = step.only is None or step.only(args[0])
            if applies and not step.after:
                hooks.passed(step.name)
            result = original(*args, **kwargs)
            if applies and step.after:
                hooks.passed(step.name)
            return result

        setattr(owner, step.method, hooked)

    def _hook_fencing(self) -> None:
        """``task-fenced``: after each transactional id (a work unit's, or the first time a
        task's) that a starting driver initialises."""
        original = KafkaBatchCommitter.fence_work_units
        fence = KafkaBatchCommitter._fence_id
        hooks = self

        def fence_work_units(committer: KafkaBatchCommitter, task_ids: Any) -> None:
            def fenced(self: KafkaBatchCommitter, transactional_id: str) -> None:
                fence(self, transactional_id)
                hooks.passed("task-fenced")

            KafkaBatchCommitter._fence_id = fenced  # type: ignore[method-assign]
            try:
                original(committer, task_ids)
            finally:
                KafkaBatchCommitter._fence_id = fence  # type: ignore[method-assign]

        KafkaBatchCommitter.fence_work_units = fence_work_units  # type: ignore[method-assign]


def run(
    log_url: str, state_dir: str, app: str, target: tuple[str, int] | None, trace: str | None
) -> None:
    """Run the counting topology to the end, or die at ``target``."""
    from streamtide.log import open_log
    from tests.engine.crash_points import counting_topology

    config = engine_config(log_url, state_dir, app=app)
    hooks = Hooks(target)
    log_class = type(open_log(config.log, **config.log_options))
    hooks.install(steps_for(config.log.startswith("kafka://")), log_class)
    driver = LocalDriver(counting_topology(), config)
    hooks.driver = driver
    driver.run_until_caught_up()
    if trace is not None:
        with open(trace, "w") as f:
            json.dump(hooks.trace, f)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("state_dir")
    parser.add_argument("app")
    parser.add_argument("--step")
    parser.add_argument("--occurrence", type=int, default=1)
    parser.add_argument("--trace")
    args = parser.parse_args()
    target = (args.step, args.occurrence) if args.step else None
    run(args.log, args.state_dir, args.app, target, args.trace)


if __name__ == "__main__":
    main()
