"""A Spark standalone cluster on this machine, started the way a real one is: a master and
workers as separate processes, each launched with Spark's own ``spark-class`` from the
installed PySpark, each worker on ports of its own and with directories of its own (its work
directory, Spark's local directories and a Streamtide state directory), as separate hosts
would have.

Every worker process gets ``STREAMTIDE_HOST_DIR`` (its directory) in its environment, which
its executors and their Python workers inherit, so ``StreamsConfig(state_dir=
"$STREAMTIDE_HOST_DIR/state")`` puts each executor's state on "its host"
(``StreamsConfig.local_state_dir``). ``kill_worker`` kills a whole worker (its JVM and the
executor JVMs it started, which share its process group) as a host failing would;
``start_worker`` brings it back with the same directories.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from streamtide.testing.kafka_broker import free_port

HOST = "127.0.0.1"
#: The environment variable naming a worker's directory in its processes.
HOST_DIR_ENV = "STREAMTIDE_HOST_DIR"


#: JVM options that start a JVM on less CPU: the client compiler only, the serial collector.
LEAN_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class ClusterStartError(RuntimeError):
    """The master or a worker did not come up in time; the message says which and why."""


def spark_home() -> Path:
    """The Spark distribution inside the installed PySpark (``bin/spark-class``, jars)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class StandaloneWorker:
    """One worker: its "host" directory, ports and process."""

    index: int
    root: Path
    port: int
    webui_port: int
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def work_dir(self) -> Path:
        return self.root / "work"

    @property
    def local_dir(self) -> Path:
        return self.root / "local"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class StandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory_mb`` MB each."""

    root: Path
    workers: int = 3
    cores: int = 1
    memory_mb: int = 768
    daemon_memory: str = "256m"
    #: the master's and workers' JVMs: only the quick compiler and the serial collector, which
    #: start them on less CPU (they route messages; nothing of theirs runs hot)
    daemon_java_opts: str = LEAN_JVM
    master_port: int = field(default_factory=free_port)
    master_webui_port: int = field(default_factory=free_port)
    master: subprocess.Popen[bytes] | None = None
    nodes: list[StandaloneWorker] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        """Start the master, then every worker, and wait until all registered."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.master = self._spawn(
            "org.apache.spark.deploy.master.Master",
            ["--host", HOST, "--port", str(self.master_port)],
            ["--webui-port", str(self.master_webui_port)],
            self.root / "master",
            {},
        )
        self._await(lambda: self._master_state() is not None, timeout, "the master")
        if not self.nodes:
            self.nodes = [
                StandaloneWorker(i, self.root / f"worker-{i}", free_port(), free_port())
                for i in range(self.workers)
            ]
        for node in self.nodes:
            self._start(node)
        self._await(lambda: self.alive_workers() == self.workers, timeout, "the workers")
        return self

    def start_worker(self, index: int, timeout: float = 120.0) -> None:
        """Start worker ``index`` again (same directories and ports) and wait until the
        master lists it alive."""
        node = self.nodes[index]
        if node.alive:
            return
        self._start(node)
        wanted = sum(n.alive for n in self.nodes)
        self._await(lambda: self.alive_workers() >= wanted, timeout, f"worker {index}")

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index``'s process group: its JVM and the executor JVMs it
        started, at once, as a host that fails."""
        node = self.nodes[index]
        if node.process is None:
            return
        try:
            os.killpg(node.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        node.process.wait()

    def stop(self) -> None:
        """Stop every worker and the master (their process groups, executors included)."""
        for process in [n.process for n in self.nodes] + [self.master]:
            if process is not None and process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for process in [n.process for n in self.nodes] + [self.master]:
            if process is None:
                continue
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- what the master knows -----------------------------------------------------------

    def _master_state(self) -> dict[str, object] | None:
        url = f"http://{HOST}:{self.master_webui_port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                return dict(json.loads(answer.read()))
        except (OSError, ValueError):
            return None

    def alive_workers(self) -> int:
        """Workers the master lists as alive."""
        state = self._master_state() or {}
        workers = state.get("workers")
        if not isinstance(workers, list):
            return 0
        return sum(1 for w in workers if isinstance(w, dict) and w.get("state") == "ALIVE")

    def worker_of(self, app_id: str, executor_id: str) -> int | None:
        """The index of the worker that runs executor ``executor_id`` of application
        ``app_id`` (from the executor's working directory), or None."""
        for node in self.nodes:
            if (node.work_dir / app_id / executor_id).is_dir():
                return node.index
        return None

    # ---- plumbing ------------------------------------------------------------------------

    def _start(self, node: StandaloneWorker) -> None:
        for folder in (node.work_dir, node.local_dir, node.state_dir):
            folder.mkdir(parents=True, exist_ok=True)
        node.starts += 1
        node.process = self._spawn(
            "org.apache.spark.deploy.worker.Worker",
            [self.master_url, "--host", HOST, "--port", str(node.port)],
            [
                "--webui-port",
                str(node.webui_port),
                "--cores",
                str(self.cores),
                "--memory",
                f"{self.memory_mb}m",
                "--work-dir",
                str(node.work_dir),
            ],
            node.root,
            {"SPARK_LOCAL_DIRS": str(node.local_dir), HOST_DIR_ENV: str(node.root)},
        )

    def _spawn(
        self, main: str, args: list[str], more: list[str], folder: Path, env: dict[str, str]
    ) -> subprocess.Popen[bytes]:
        folder.mkdir(parents=True, exist_ok=True)
        home = spark_home()
        environment = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_DAEMON_JAVA_OPTS": self.daemon_java_opts,
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            **env,
        }
        with open(folder / "process.log", "ab") as out:
            return subprocess.Popen(
                [str(home / "bin" / "spark-class"), main, *args, *more],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=environment,
                start_new_session=True,  # its own process group: kill_worker takes all of it
            )

    def _await(self, ready: object, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():  # type: ignore[operator]
            if self.master is not None and self.master.poll() is not None:
                raise ClusterStartError(f"the master exited with code {self.master.returncode}")
            if time.monotonic() > deadline:
                raise ClusterStartError(f"{what} did not come up within {timeout:.0f} s")
            time.sleep(0.25)
