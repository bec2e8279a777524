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
import socket
import subprocess
import sys
import threading
from pathlib import Path

from streamtide.engine.channel import (
    ChannelClosedError,
    accept,
    new_secret,
    recv_message,
    send_message,
)
from streamtide.engine.channel_tls import new_identity
from streamtide.engine.committer import StageResult
from streamtide.engine.protocol import Ranges
from tests.engine.local_driver import CLIENT, LocalDriver
from tests.engine.scenarios import engine_config, session_topology

MAX_ATTEMPTS = 20


class ChildExecutorDriver(LocalDriver):
    """LocalDriver whose work units run in killable child processes."""

    def __init__(
        self, config, kill_probability: float, kills_file: Path, rnd, commit_kill: float = 0.0
    ) -> None:
        super().__init__(session_topology(), config)
        self.kill_probability, self.kills_file, self.rnd = kill_probability, kills_file, rnd
        self.commit_kill = commit_kill

    def child_env(self) -> dict[str, str]:
        """The executor's environment: with ``commit_kill``, it dies inside some of its
        tasks' Kafka commits (``executor_process.die_inside_commits``)."""
        if not self.commit_kill:
            return dict(os.environ)
        return {
            **os.environ,
            "STREAMTIDE_FAULTS_COMMIT_KILL": str(self.commit_kill),
            "STREAMTIDE_FAULTS_SEED": str(self.rnd.random()),
            "STREAMTIDE_FAULTS_KILLS": str(self.kills_file),
        }

    def _spec(self, batch, stage, ranges: Ranges) -> dict:
        return {
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

    def _execute(self, batch, stage, ranges: Ranges) -> list[tuple[str, dict]]:
        spec = self._spec(batch, stage, ranges)
        payload = json.dumps({"config": config_args(self.config), "spec": spec})
        for _ in range(MAX_ATTEMPTS):
            child = subprocess.Popen(
                [sys.executable, "-m", "tests.faults.executor_process"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=self.child_env(),
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

    def _kill(self, child: subprocess.Popen, count: bool = True) -> None:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            if count:
                with open(self.kills_file, "a") as f:
                    f.write("executor\n")


class LongRunningExecutorDriver(ChildExecutorDriver):
    """ChildExecutorDriver whose executor is one long-running work unit (continuous
    execution): it keeps its tasks open between batches and learns each sealed outcome over
    the control channel; a killed one is replaced and the stage retried."""

    def __init__(
        self, config, kill_probability: float, kills_file: Path, rnd, commit_kill: float = 0.0
    ) -> None:
        super().__init__(config, kill_probability, kills_file, rnd, commit_kill)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(120)
        self.secret = new_secret()
        self.identity = new_identity()
        self.child: subprocess.Popen | None = None
        self.sock: socket.socket | None = None

    def _launch(self) -> None:
        port = str(self.server.getsockname()[1])
        args = json.dumps(config_args(self.config))
        self.child = subprocess.Popen(
            [
                *(sys.executable, "-m", "tests.faults.executor_process", "--serve"),
                *("127.0.0.1", port, self.secret, self.identity.fingerprint, args),
            ],
            env=self.child_env(),
        )
        raw, _ = self.server.accept()
        conn, _ = accept(raw, self.identity, self.secret)
        conn.settimeout(None)
        send_message(conn, {"ok": True})
        self.sock = conn

    def _drop(self) -> None:
        if self.sock is not None:
            self.sock.close()
        if self.child is not None:
            self._kill(self.child, count=False)
            self.child.wait()
        self.sock, self.child = None, None

    def _execute(self, batch, stage, ranges: Ranges) -> list[tuple[str, dict]]:
        spec = self._spec(batch, stage, ranges)
        for _ in range(MAX_ATTEMPTS):
            if self.sock is None:
                self._launch()
            assert self.child is not None and self.sock is not None
            timer = None
            if self.rnd.random() < self.kill_probability:
                # a kept-open executor answers a run in a fraction of a second: kill within it
                timer = threading.Timer(self.rnd.uniform(0.0, 0.25), self._kill, (self.child,))
                timer.start()
            try:
                send_message(self.sock, {"kind": "run", "units": [spec]})
                report = recv_message(self.sock)["reports"][0]
            except (ChannelClosedError, OSError):
                self._drop()
                continue
            finally:
                if timer is not None:
                    timer.cancel()
            if "failure" in report:
                continue
            report["ran_on"] = {"executor": CLIENT}
            return [(CLIENT, report)]
        raise RuntimeError("every attempt of the stage failed")

    def after_stage(self, result: StageResult) -> None:
        winners = {t: p.writer for t, p in result.prepare.tasks.items() if p.writer}
        if self.sock is not None and winners:
            try:
                send_message(self.sock, {"kind": "settle", "winners": winners})
            except OSError:
                self._drop()


def config_args(config) -> dict:
    return {
        "log": config.log,
        "state_dir": config.state_dir,
        "app": config.application_id,
        "guarantee": config.processing_guarantee,
    }


def ready_file(kills_file: str | Path, pid: int) -> Path:
    """The file a driver creates once it holds its epoch and runs batches (in continuous
    execution: once its long-running executor connected)."""
    return Path(f"{kills_file}.ready-{pid}")


def make_config(args: dict):
    guarantee = args.get("guarantee", "exactly_once")
    return engine_config(
        args["log"], args["state_dir"], app=args["app"], processing_guarantee=guarantee
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("state_dir")
    parser.add_argument("kills_file")
    parser.add_argument("--executor-kill", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--execution", choices=["continuous", "micro_batch"], default="micro_batch")
    parser.add_argument("--app", default="faults")
    parser.add_argument("--guarantee", default="exactly_once")
    parser.add_argument("--commit-kill", type=float, default=0.0)
    args = parser.parse_args()
    config = make_config(
        {"log": args.log, "state_dir": args.state_dir, "app": args.app, "guarantee": args.guarantee}
    )
    rnd = random.Random(args.seed)
    kind = LongRunningExecutorDriver if args.execution == "continuous" else ChildExecutorDriver
    driver = kind(config, args.executor_kill, Path(args.kills_file), rnd, args.commit_kill)
    if isinstance(driver, LongRunningExecutorDriver):
        driver._launch()  # its executor is up before it counts as running
    ready_file(args.kills_file, os.getpid()).touch()  # the harness times its kill from here
    driver.run_until_caught_up(max_batches=10_000)
    if isinstance(driver, LongRunningExecutorDriver) and driver.sock is not None:
        send_message(driver.sock, {"kind": "stop"})
    sys.stdout.write(f"caught up at batch {driver.batch} (pid {os.getpid()})\n")


if __name__ == "__main__":
    main()
