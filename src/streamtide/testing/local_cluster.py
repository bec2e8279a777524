"""A multi-executor Spark ``local-cluster`` for tests and benchmarks, and killing its executors.

``local-cluster[N,cores,memory]`` starts a standalone master, N workers and one executor JVM
per worker on this machine: the closest a single machine gets to a real cluster (executors die
separately, and the master starts a replacement, with a new id, for one that died). It needs
``SPARK_HOME`` or PySpark's bundled jars and takes 10-40 s to register its executors; one
SparkContext per process, so a caller runs it in its own process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

from streamtide.engine.interop import build_session, list_executors
from streamtide.engine.scaling import await_executors


def start_local_cluster(
    executors: int,
    app_name: str,
    *,
    cores: int = 1,
    memory_mb: int = 1024,
    timeout: float = 120.0,
    attempts: int = 2,
    **conf: str,
) -> Any:
    """A SparkSession on ``local-cluster[executors,cores,memory_mb]`` once all its executors
    registered. A start that does not register in ``timeout`` seconds is retried once (the
    standalone master occasionally loses a worker's first registration under load)."""
    settings = {"spark.executor.memory": f"{memory_mb // 2}m", **conf}
    for attempt in range(attempts):
        spark = None
        try:
            spark = build_session(
                f"local-cluster[{executors},{cores},{memory_mb}]", app_name, **settings
            )
            wait_for_executors(spark.sparkContext, executors, timeout)
            return spark
        except Exception:
            if attempt + 1 >= attempts:
                raise
            if spark is not None:
                try:
                    spark.stop()
                except Exception:
                    pass
    raise AssertionError("unreachable")


def wait_for_executors(sc: Any, count: int, timeout: float = 120.0) -> list[str]:
    """Wait until at least ``count`` executors are live; return their ids."""
    return await_executors(
        sc,
        lambda ids: len(ids) >= count and "driver" not in ids,
        timeout,
        f"{count} executors did not register",
    )


def executor_pid(app_id: str, executor_id: str) -> int:
    """The process id of the JVM of executor ``executor_id`` of application ``app_id``
    (started on this machine by ``local-cluster``)."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if (
            "CoarseGrainedExecutorBackend" in line
            and f"--executor-id {executor_id} " in line
            and app_id in line
        ):
            return int(line.split()[0])
    raise LookupError(f"no JVM found for executor {executor_id} of application {app_id}")


def kill_executor(sc: Any, executor_id: str, timeout: float = 30.0, wait: bool = True) -> float:
    """SIGKILL the JVM of one executor (as a crash would) and, with ``wait``, wait until Spark
    dropped it from the executor list. Returns the ``time.time()`` of the kill."""
    pid = executor_pid(sc.applicationId, executor_id)
    killed_at = time.time()
    os.kill(pid, signal.SIGKILL)
    if not wait:
        return killed_at
    deadline = time.monotonic() + timeout
    while executor_id in {e.id for e in list_executors(sc)}:
        if time.monotonic() > deadline:
            raise TimeoutError(f"executor {executor_id} still listed {timeout:.0f} s after kill")
        time.sleep(0.1)
    return killed_at
