"""A driver process for the random-kill runs: ``python -m tests.faults.driver_process``.

It runs the session topology with the engine's real commit protocol (``LocalDriver``), but
each work unit in a child process, an "executor" (``tests.faults.executor_process``). With
probability ``--executor-kill`` it kills that child with SIGKILL at a random moment and retries
the stage, as the engine does after a lost executor. The harness kills this process (and, at
times, its executors) at random moments.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

from streamtide.engine.protocol import Ranges
from tests.engine.local_driver import CLIENT, LocalDriver
from tests.engine.scenarios import engine_config, session_topology

MAX_ATTEMPTS = 20


class ChildExecutorDriver(LocalDriver):
    """LocalDriver whose work units run in killable child processes."""

    def __init__(self, config, kill_probability: float, kills_file: Path, rnd) -> None:
        super().__init__(session_topology(), config)
        self.kill_probability, self.kills_file, self.rnd = kill_probability, kills_file, rnd

    def _execute(self, batch, stage, ranges: Ranges) -> list[tuple[str, dict]]:
        spec = {
            "batch": batch,
            "stage": stage.subtopology,
            "client": CLIENT,
            "active": [
                {
                    "task_id": t,
                    "ranges": {k: list(r) for k, r in ranges[t].items()},
                    "state": self.states.get(t, {}),
                }
                for t in stage.task_ids
            ],
            "standby": [],
        }
        payload = json.dumps({"config": config_args(self.config), "spec": spec})
        for _ in range(MAX_ATTEMPTS):
            child = subprocess.Popen(
                [sys.executable, "-m", "tests.faults.executor_process"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            timer = None
            if self.rnd.random() < self.kill_probability:
                timer = threading.Timer(self.rnd.uniform(0.0, 1.5), self._kill, (child,))
                timer.start()
            out, _ = child.communicate(payload)
            if timer is not None:
                timer.cancel()
            if child.returncode == 0:
                report = json.loads(out)
                report["ran_on"] = {"executor": CLIENT}
                return [(CLIENT, report)]
        raise RuntimeError("every attempt of the stage failed")

    def _kill(self, child: subprocess.Popen) -> None:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            with open(self.kills_file, "a") as f:
                f.write("executor\n")


def config_args(config) -> dict:
    return {"log": config.log, "state_dir": config.state_dir, "app": config.application_id}


def make_config(args: dict):
    return engine_config(args["log"], args["state_dir"], app=args["app"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("state_dir")
    parser.add_argument("kills_file")
    parser.add_argument("--executor-kill", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = make_config({"log": args.log, "state_dir": args.state_dir, "app": "faults"})
    rnd = random.Random(args.seed)
    driver = ChildExecutorDriver(config, args.executor_kill, Path(args.kills_file), rnd)
    driver.run_until_caught_up(max_batches=10_000)
    sys.stdout.write(f"caught up at batch {driver.batch} (pid {os.getpid()})\n")


if __name__ == "__main__":
    main()
