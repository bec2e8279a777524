"""Where long-running work units run: the executors the driver assigns tasks to, and how the
work unit of one executor slot is started there.

The driver's batch loop (planning, assignment, ranges, the control protocol, the commit)
only needs these few operations from the cluster, so they are one small interface: the
executors, where the control server listens, the slots other applications of the session hold
(``engine.slots``), and starting and cancelling one work unit.
``SparkLauncher`` is the engine's: Spark's executor list and one pinned Spark job per work
unit (``engine.worker.serve``). Another launcher can run the same driver against work units
started some other way, as the driver-scale benchmark does with simulated executors
(``bench/driver_scale.py``): whatever it starts must connect to the control channel with the
payload's address, secret and certificate fingerprint (``engine.channel.connect``) and answer
the driver's messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from streamtide.engine import slots as slot_registry
from streamtide.engine.control_address import control_address
from streamtide.engine.interop import ExecutorInfo, busy_slots, list_executors, run_pinned


class WorkUnitLauncher(Protocol):
    """The cluster as the continuous driver sees it."""

    def executors(self) -> list[ExecutorInfo]:
        """The live executors that can run work units (see ``interop.list_executors``)."""
        ...

    def control_address(self) -> tuple[str, str]:
        """``(bind, advertised)``: where the driver's control server listens, and the address
        work units reach it at (``engine.control_address``)."""
        ...

    def hold_slots(self, application_id: str, held: Callable[[], Mapping[str, int]]) -> int:
        """Register ``application_id`` as holding the slots ``held()`` names, per executor;
        returns the token ``engine.slots.release`` takes."""
        ...

    def check_slots_free(
        self,
        application_id: str,
        slots: Iterable[tuple[ExecutorInfo, int]],
        own_token: int | None = None,
    ) -> None:
        """Raise ``TaskSlotsHeldError`` when another application of the session holds slots
        ``application_id`` needs (``engine.slots.check_free``)."""
        ...

    def busy_slots(self) -> dict[str, int]:
        """Tasks running per executor now, as far as the cluster says (for error messages)."""
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

    def control_address(self) -> tuple[str, str]:
        conf = self.sc.getConf()
        return control_address(
            conf.get("spark.driver.bindAddress"), conf.get("spark.driver.host"), self.sc.master
        )

    def hold_slots(self, application_id: str, held: Callable[[], Mapping[str, int]]) -> int:
        return slot_registry.hold(self.sc, application_id, held)

    def check_slots_free(
        self,
        application_id: str,
        slots: Iterable[tuple[ExecutorInfo, int]],
        own_token: int | None = None,
    ) -> None:
        slot_registry.check_free(self.sc, application_id, slots, own_token)

    def busy_slots(self) -> dict[str, int]:
        return busy_slots(self.sc)

    def serve(self, payload: str, executor: ExecutorInfo, blob: bytes, group: str) -> str:
        from streamtide.engine.worker import make_serve

        self.sc.setJobGroup(group, f"Streamtide work unit {group}", True)
        outputs = run_pinned(self.sc, [(payload, executor)], make_serve(blob))
        return outputs[0] if outputs else '{"ended": "ended"}'

    def cancel(self, group: str) -> None:
        self.sc.cancelJobGroup(group)
