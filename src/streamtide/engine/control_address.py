"""Where the driver's control server listens, and the address work units are told to use.

As Spark's own driver services: ``spark.driver.bindAddress`` is where to listen and
``spark.driver.host`` the address executors reach the driver at (the bind address defaults to
it). A local master (``local``, ``local[N]``) runs its work units in the driver's machine, so
without an explicit bind address the server listens on loopback only. Never on every
interface unless ``spark.driver.bindAddress`` says so (``0.0.0.0``, as in some containers).
"""

from __future__ import annotations

import re

LOOPBACK = "127.0.0.1"
WILDCARDS = ("", "0.0.0.0", "::")
_LOCAL_MASTER = re.compile(r"^local(\[[^\]]*\])?$")


def is_local_master(master: str | None) -> bool:
    """``local`` or ``local[...]`` (not ``local-cluster[...]``, whose executors are separate
    processes that connect like a real cluster's)."""
    return bool(master) and bool(_LOCAL_MASTER.match(str(master).strip()))


def control_address(
    bind_address: str | None, driver_host: str | None, master: str | None
) -> tuple[str, str]:
    """``(bind, advertised)``: the address to listen on and the one work units connect to."""
    bind = (bind_address or "").strip()
    host = (driver_host or "").strip()
    if not bind and is_local_master(master):
        return LOOPBACK, LOOPBACK
    bind = bind or host or LOOPBACK
    if _is_loopback(bind):  # nothing else reaches it
        return bind, bind
    advertised = host or (LOOPBACK if bind in WILDCARDS else bind)
    return bind, advertised


def _is_loopback(address: str) -> bool:
    return address.startswith("127.") or address in ("::1", "localhost")
