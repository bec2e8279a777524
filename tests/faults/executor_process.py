"""An "executor" for the random-kill runs (``python -m tests.faults.executor_process``).

Micro-batch: runs one work unit read as JSON from stdin and writes its report as JSON to
stdout. ``--serve HOST PORT SECRET FINGERPRINT CONFIG``: a long-running work unit, as
continuous execution runs on Spark: it connects to the driver's control channel and runs the
work units the driver sends, keeping its tasks open between batches (``runtime.task_host``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from streamtide.engine.channel import connect
from streamtide.engine.failures import failure_report
from streamtide.engine.worker import answer_driver
from streamtide.log import open_log
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.task_host import TaskHost
from streamtide.runtime.work_unit import WorkUnitSpec, client_state_dir, run_work_unit
from tests.engine.scenarios import session_topology
from tests.faults.driver_process import make_config


def die_inside_commits(probability: float, seed: str, kills_file: str) -> None:
    """With ``probability`` per work unit's transaction, end this process (SIGKILL-like:
    ``os._exit``) a few milliseconds into its commit: while ``commit_transaction`` waits for
    the broker, or just after it returned, before the read-back."""
    import random
    import threading
    import time

    from streamtide.log.kafka_transaction import KafkaTransaction

    rnd = random.Random(seed)
    commit = KafkaTransaction.commit

    def dying_commit(self: KafkaTransaction) -> None:
        if not self.where.startswith("work unit ") or rnd.random() >= probability:
            commit(self)
            return
        returned = threading.Event()

        def die() -> None:
            time.sleep(rnd.uniform(0.0, 0.004))
            with open(kills_file, "a") as f:
                f.write("commit-after\n" if returned.is_set() else "commit-inside\n")
            os._exit(137)

        threading.Thread(target=die, daemon=True).start()
        commit(self)
        returned.set()
        time.sleep(1.0)  # the process dies here at the latest

    KafkaTransaction.commit = dying_commit  # type: ignore[method-assign]


def main() -> None:
    if os.environ.get("STREAMTIDE_FAULTS_COMMIT_KILL"):
        die_inside_commits(
            float(os.environ["STREAMTIDE_FAULTS_COMMIT_KILL"]),
            os.environ["STREAMTIDE_FAULTS_SEED"],
            os.environ["STREAMTIDE_FAULTS_KILLS"],
        )
    if sys.argv[1:2] == ["--serve"]:
        serve(*sys.argv[2:7])
        return
    message = json.loads(sys.stdin.read())
    config = make_config(message["config"])
    spec = WorkUnitSpec.from_dict(message["spec"])
    log = open_log(config.log, **config.log_options)
    report = run_work_unit(session_topology(), config, log, spec, make_task_stores)
    try:
        sys.stdout.write(json.dumps(report))
        sys.stdout.flush()
    except BrokenPipeError:  # the driver that asked was killed meanwhile: nobody listens
        sys.stdout = None  # type: ignore[assignment]  # no second error at interpreter exit


def serve(host: str, port: str, secret: str, fingerprint: str, config_json: str) -> None:
    config = make_config(json.loads(config_json))
    log = open_log(config.log, **config.log_options)
    topology = session_topology()
    tasks = TaskHost(
        topology,
        config,
        log,
        make_task_stores,
        client_state_dir(config, "local"),
        keep_open=True,
    )
    sock = connect(host, int(port), secret, fingerprint, {"pid": os.getpid()})
    parent = os.getppid()

    def run(units: list[dict[str, Any]]) -> list[dict[str, Any]]:
        reports = []
        for unit in units:
            try:
                spec = WorkUnitSpec.from_dict(unit)
                reports.append(
                    run_work_unit(topology, config, log, spec, make_task_stores, host=tasks)
                )
            except Exception as exc:
                tasks.close()
                reports.append({"failure": failure_report(exc, ()).to_dict()})
        return reports

    def gone() -> str | None:
        return "the driver died" if os.getppid() != parent else None

    try:
        answer_driver(sock, tasks, run, gone, tasks.checkpoint_due)
    finally:
        tasks.close()
        sock.close()


if __name__ == "__main__":
    main()
