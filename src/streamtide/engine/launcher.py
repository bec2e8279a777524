"""Where long-running work units run: the executors the driver assigns tasks to, and how the
work unit of one executor slot is started there.

The driver's batch loop (planning, assignment, ranges, the control protocol, the commit)
only needs these four operations from the cluster, so they are one small interface.
``SparkLauncher`` is the engine's: Spark's executor list and one pinned Spark job per work
unit (``engine.worker.serve``). Another launcher can run the same driver against work units
started some other way, as the driver-scale benchmark does with simulated executors
(``bench/driver_scale.py``): whatever it starts must connect to the control channel with the
payload's address and secret (``engine.channel.connect``) and answer the driver's messages.
"""

from __future__ import annotations

from typing import Any, Protocol

from streamtide.engine.interop import ExecutorInfo, list_executors, run_pinned


class WorkUnitLauncher(Protocol):
    """The cluster as the continuous driver sees it."""

    def executors(self) -> list[ExecutorInfo]:
        """The live executors that can run work units (see ``interop.list_executors``)."""
        ...

    def driver_host(self) -> str:
        """The address work units reach the driver's control server at."""
        ...

    def serve(self, payload: str, executor: ExecutorInfo, blob: bytes, group: str) -> str:
        """Run one long-running work unit pinned to ``executor`` and block until it ends;
        return its JSON end report (``{"ended": why}``). ``payload`` is the JSON launch
        message (control address, secret, slot, generation); ``blob`` the pickled
        application; ``group`` names the run for ``cancel``. Raises when the work unit's
        executor died or the run was cancelled."""
        ...

    def cancel(self, group: str) -> None:
        """Stop the run named ``group`` if it is still going."""
        ...


class SparkLauncher:
    """Work units as pinned Spark jobs of a classic ``SparkContext``."""

    def __init__(self, sc: Any) -> None:
        self.sc = sc

    def executors(self) -> list[ExecutorInfo]:
        return list_executors(self.sc)

    def driver_host(self) -> str:
        return str(self.sc.getConf().get("spark.driver.host", "127.0.0.1"))

    def serve(self, payload: str, executor: ExecutorInfo, blob: bytes, group: str) -> str:
        from streamtide.engine.worker import make_serve

        self.sc.setJobGroup(group, f"Streamtide work unit {group}", True)
        outputs = run_pinned(self.sc, [(payload, executor)], make_serve(blob))
        return outputs[0] if outputs else '{"ended": "ended"}'

    def cancel(self, group: str) -> None:
        self.sc.cancelJobGroup(group)
