"""The driver's side of continuous execution: long-running work units and their channel.

Each executor slot runs one long-running work unit: a Spark job of one pinned task
(``engine.worker.serve``) that connects back to the driver's control server
(``engine.control_server``) and runs the batches the driver sends it, keeping its tasks open
in between (``runtime.task_host``). One job per slot, so losing an executor ends only that
executor's jobs. The driver launches a slot's job when it first needs the slot, relaunches it
when it ended (its executor died, Spark ran it elsewhere, or it reached
``work_unit_max_age``), and stops them all at ``close``. Between batches a watcher looks at
the idle connections every ``WATCH_S``: a work unit whose connection closed (its Python worker
died) is replaced at once, not when the next batch needs its slot.
See docs/engine.md, "Continuous execution", for the messages and the failure table.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamtide.engine import slots as slot_registry
from streamtide.engine.channel import ChannelClosedError, pending, recv_message, send_message
from streamtide.engine.control_server import ControlServer, refuse, welcome
from streamtide.engine.idle_watch import DIED, IdleWatcher
from streamtide.engine.interop import ExecutorInfo
from streamtide.engine.launcher import WorkUnitLauncher
from streamtide.errors import StreamtideError
from streamtide.runtime.messages import (
    Control,
    Ended,
    MessageError,
    Reply,
    Stop,
    decode_reply,
    encode,
)

log = logging.getLogger("streamtide.engine")

#: How often the watcher looks for work units that died between batches.
WATCH_S = 0.2


@dataclass(frozen=True, order=True)
class SlotKey:
    """One task slot of one executor."""

    executor: str
    slot: int

    def __str__(self) -> str:
        return f"{self.executor}/{self.slot}"


class WorkerLostError(StreamtideError):
    """A long-running work unit ended or could not be reached; its batch is retried.
    ``executors`` are the executors of the lost work units."""

    def __init__(self, message: str, executors: frozenset[str] = frozenset()) -> None:
        super().__init__(message)
        self.executors = executors


class _Slot:
    """A slot's current work unit: its Spark job's thread and, once it connected, its socket."""

    def __init__(self, key: SlotKey, executor: ExecutorInfo, generation: int) -> None:
        self.key = key
        self.executor = executor
        self.generation = generation
        self.sock: socket.socket | None = None
        self.pid: int | None = None
        self.thread: threading.Thread | None = None
        self.ended: str | None = None  # why its job ended (None: running)
        self.died = False  # it ended without saying so: its Python worker or executor died
        self.started = time.monotonic()

    @property
    def connected(self) -> bool:
        return self.sock is not None and self.ended is None


class ContinuousWorkers:
    """Launches, reaches and stops the long-running work units of one application."""

    def __init__(
        self,
        launcher: WorkUnitLauncher,
        blob: bytes,
        application_id: str,
        app_dir: str,
        epoch: int,
        *,
        connect_timeout: float = 120.0,
        max_age: float = 3600.0,
    ) -> None:
        self._launcher = launcher
        self._blob = blob
        self._application_id = application_id
        self._app_dir = app_dir
        self._epoch = epoch
        self._connect_timeout = connect_timeout
        self._max_age = max_age
        bind, self._host = launcher.control_address()
        self._slots: dict[SlotKey, _Slot] = {}
        self._generations: dict[SlotKey, int] = {}
        self._changed = threading.Condition()
        self._closed = False
        #: held while messages are exchanged: the watcher never reads a reply
        self._io = threading.Lock()
        self.launched = 0  # Spark jobs started (each one long-running work unit)
        #: Seconds spent waiting for work units: to connect, and for the replies to requests
        #: (the rest of a batch's wall time is the driver's own).
        self.waited_s = 0.0
        self.replaced = 0  # work units replaced after they died between batches
        self._server = ControlServer(bind, self._admit)
        self._holding = launcher.hold_slots(application_id, self._held_slots)
        self._watcher = IdleWatcher(
            self._idle_connections, self._ended_between_batches, self._io, WATCH_S
        )

    # ---- connections ---------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """Where the control server listens (bound address, port)."""
        return self._server.address

    def _admit(self, conn: socket.socket, hello: dict[str, Any]) -> None:
        """Take a work unit's authenticated connection if its slot expects it."""
        key = SlotKey(*hello["slot"])
        with self._changed:
            slot = self._slots.get(key)
            if (
                slot is None
                or slot.generation != hello["generation"]
                or slot.sock is not None
                or slot.ended is not None
            ):
                refuse(conn, f"slot {key} does not expect this work unit")
                return
            welcome(conn)
            slot.sock, slot.pid = conn, int(hello.get("pid", 0))
            self._changed.notify_all()

    # ---- launching -----------------------------------------------------------------------

    def ensure(self, slots: Mapping[SlotKey, ExecutorInfo]) -> None:
        """Make sure every slot of ``slots`` has a connected work unit: launch the missing
        ones together (each pays a Spark job and a Python worker's start, in parallel), then
        wait for all of them."""
        with self._changed:
            self._check_free(slots)
            launched = [self._current(key, executor) for key, executor in slots.items()]
            began = time.monotonic()
            deadline = began + self._connect_timeout
            try:
                for slot in launched:
                    self._wait_connected(slot, deadline, slots)
            finally:
                self.waited_s += time.monotonic() - began

    def _held_slots(self) -> dict[str, int]:
        """Slots this application's work units hold now, per executor (for the registry)."""
        held: dict[str, int] = {}
        for key, slot in list(self._slots.items()):
            if slot.connected and _alive(slot):
                held[key.executor] = held.get(key.executor, 0) + 1
        return held

    def _check_free(self, slots: Mapping[SlotKey, ExecutorInfo]) -> None:
        """Fail at once when another application of the session holds slots these need;
        the work units launched for them and still waiting are cancelled."""
        try:
            self._launcher.check_slots_free(
                self._application_id,
                [(executor, key.slot) for key, executor in slots.items()],
                self._holding,
            )
        except slot_registry.TaskSlotsHeldError:
            for key in slots:
                slot = self._slots.get(key)
                if slot is not None and not slot.connected and slot.ended is None:
                    slot.ended = "cancelled: another application holds the slots"
                    self._launcher.cancel(self._group(slot))
            raise

    def _current(self, key: SlotKey, executor: ExecutorInfo) -> _Slot:
        """``key``'s work unit, launched anew if it has none or it is too old."""
        slot = self._slots.get(key)
        if slot is not None and slot.connected and time.monotonic() - slot.started > self._max_age:
            log.info("work unit %s reached its maximum age: replacing it", key)
            self._stop_slot(slot)
            while _alive(slot):  # its stores close before the next unit opens them
                self._changed.wait(0.5)
            slot = None
        if slot is None or slot.ended is not None or (slot.sock is None and not _alive(slot)):
            slot = self._launch(key, executor)
        return slot

    def _wait_connected(
        self, slot: _Slot, deadline: float, wanted: Mapping[SlotKey, ExecutorInfo]
    ) -> None:
        key = slot.key
        lost = frozenset({key.executor})
        while not slot.connected:
            if slot.ended is not None:
                raise WorkerLostError(
                    f"work unit {key} ended before connecting: {slot.ended}", lost
                )
            left = deadline - time.monotonic()
            if left <= 0:
                busy = self._launcher.busy_slots().get(key.executor)
                raise WorkerLostError(
                    f"work unit {key} did not connect within {self._connect_timeout:.0f} s "
                    "(continuous execution needs one free task slot per work unit; Spark "
                    f"reports {busy} of the {slot.executor.cores} slot(s) of executor "
                    f"{key.executor} busy)",
                    lost,
                )
            self._changed.wait(min(left, 0.5))
            if not slot.connected:  # another application may have taken the slots meanwhile
                self._check_free(wanted)
            if not slot.connected and not self._listed(key.executor):
                # pinned to an executor that died meanwhile: Spark would run it elsewhere
                # only once a core is free there, which may take long; re-plan now
                raise WorkerLostError(f"work unit {key}: executor {key.executor} is gone", lost)

    def _launch(self, key: SlotKey, executor: ExecutorInfo) -> _Slot:
        generation = self._generations.get(key, 0) + 1
        self._generations[key] = generation
        slot = self._slots[key] = _Slot(key, executor, generation)
        payload = json.dumps(
            {
                "host": self._host,
                "port": self._server.address[1],
                "secret": self._server.secret,
                "fingerprint": self._server.identity.fingerprint,
                "slot": [key.executor, key.slot],
                "generation": generation,
                "executor": executor.id,
                "client": executor.id,
                "app_dir": self._app_dir,
                "epoch": self._epoch,
            }
        )
        slot.thread = threading.Thread(
            target=self._run_job,
            args=(slot, payload),
            name=f"streamtide-work-unit-{key}",
            daemon=True,
        )
        self.launched += 1
        slot.thread.start()
        return slot

    def _group(self, slot: _Slot) -> str:
        return f"streamtide-{self._application_id}-{slot.key}-{slot.generation}"

    def _run_job(self, slot: _Slot, payload: str) -> None:
        try:
            output = self._launcher.serve(payload, slot.executor, self._blob, self._group(slot))
            ended = json.loads(output).get("ended", "ended")
        except Exception as exc:  # the executor or the Python worker died, or a cancel
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            ended = f"its Spark job failed: {first}"
            slot.died = slot.died or slot.ended is None
        with self._changed:
            slot.ended = slot.ended or ended
            if slot.sock is not None:
                slot.sock.close()
            self._changed.notify_all()
        if not self._closed:
            log.info("work unit %s ended: %s", slot.key, ended)
            self._replace_if_idle(slot)

    # ---- work units that die between batches --------------------------------------------

    def _idle_connections(self) -> list[tuple[_Slot, socket.socket]]:
        return [(s, s.sock) for s in list(self._slots.values()) if s.connected and s.sock]

    def _ended_between_batches(self, slot: _Slot, state: dict[str, Any]) -> None:
        slot.died = slot.died or state is DIED
        self._drop(slot, str(state["ended"]))
        self._replace_if_idle(slot)

    def _replace_if_idle(self, slot: _Slot) -> None:
        """Launch a new work unit for a slot whose connected work unit died between batches
        (its Python worker; its executor is still there). Not for one that ended on purpose
        (stopped, or its driver was taken over). During a batch the batch notices and
        re-plans instead."""
        if not self._io.acquire(blocking=False):
            return
        try:
            with self._changed:
                if (
                    self._closed
                    or self._slots.get(slot.key) is not slot
                    or slot.pid is None  # it never connected: the next batch decides
                    or not slot.died
                    or not self._listed(slot.key.executor)
                ):
                    return
                log.warning(
                    "work unit %s ended between batches (%s): replacing it", slot.key, slot.ended
                )
                self._launch(slot.key, slot.executor)
                self.replaced += 1
        finally:
            self._io.release()

    # ---- messages ------------------------------------------------------------------------

    def request(self, messages: Mapping[SlotKey, Control]) -> dict[SlotKey, Reply]:
        """Send each slot its message and wait for every reply (the slots work in parallel).
        ``WorkerLostError`` names the slots that did not answer; the others' replies are
        consumed first, so every channel is left in step."""
        with self._io:
            return self._request(messages)

    def _request(self, messages: Mapping[SlotKey, Control]) -> dict[SlotKey, Reply]:
        sent: list[SlotKey] = []
        lost: dict[SlotKey, str] = {}
        for key, message in messages.items():
            slot = self._slots.get(key)
            if slot is None or not slot.connected:
                lost[key] = "not connected"
                continue
            try:
                send_message(slot.sock, encode(message))  # type: ignore[arg-type]
                sent.append(key)
            except OSError as exc:
                lost[key] = str(exc)
                self._drop(slot)
        replies: dict[SlotKey, Reply] = {}
        for key in sent:
            slot = self._slots[key]
            try:
                self._await_reply(slot.sock)  # type: ignore[arg-type]
                reply = decode_reply(recv_message(slot.sock))  # type: ignore[arg-type]
            except (ChannelClosedError, MessageError) as exc:
                lost[key] = str(exc)
                self._drop(slot)
                continue
            if isinstance(reply, Ended):  # it ended on its own just as the message went out
                lost[key] = f"it ended: {reply.why}"
                self._drop(slot, lost[key])
                continue
            replies[key] = reply
        if lost:
            raise WorkerLostError(
                "lost work unit(s): " + "; ".join(f"{k}: {why}" for k, why in sorted(lost.items())),
                frozenset(k.executor for k in lost),
            )
        return replies

    def _await_reply(self, sock: socket.socket) -> None:
        """Block until ``sock`` has data (or closed), counting the time in ``waited_s``."""
        if pending(sock):  # TLS already decrypted the reply: select cannot see it
            return
        began = time.monotonic()
        try:
            select.select([sock], [], [])
        except (OSError, ValueError):
            pass  # closed meanwhile: the read that follows reports it
        self.waited_s += time.monotonic() - began

    def notify(self, key: SlotKey, message: Control) -> None:
        """Send a message that has no reply (a lost slot is noticed at its next request)."""
        slot = self._slots.get(key)
        if slot is None or not slot.connected:
            return
        with self._io:
            try:
                send_message(slot.sock, encode(message))  # type: ignore[arg-type]
            except OSError:
                self._drop(slot)

    def slots(self) -> dict[SlotKey, dict[str, Any]]:
        """The slots' state, for status displays and tests."""
        return {
            key: {
                "connected": slot.connected,
                "generation": slot.generation,
                "pid": slot.pid,
                "ended": slot.ended,
                "age_s": round(time.monotonic() - slot.started, 3),
            }
            for key, slot in sorted(self._slots.items())
        }

    def _drop(self, slot: _Slot, why: str = "its control connection broke") -> None:
        with self._changed:
            if slot.sock is not None:
                slot.sock.close()
            slot.ended = slot.ended or why
            self._changed.notify_all()

    def _listed(self, executor_id: str) -> bool:
        return executor_id == "driver" or any(
            e.id == executor_id for e in self._launcher.executors()
        )

    # ---- stopping ------------------------------------------------------------------------

    def retire_executors(self, executors: set[str], timeout: float = 30.0) -> None:
        """Stop the work units of the given executors and wait until their Spark jobs ended
        (before the executors are removed, so no running Spark task is lost with them);
        the other work units go on."""
        slots = [s for k, s in self._slots.items() if k.executor in executors]
        for slot in slots:
            if slot.ended is None:
                self._stop_slot(slot)
        deadline = time.monotonic() + timeout
        for slot in slots:
            if slot.thread is not None:
                slot.thread.join(max(0.0, deadline - time.monotonic()))

    def _stop_slot(self, slot: _Slot) -> None:
        if slot.sock is not None and slot.ended is None:
            try:
                send_message(slot.sock, encode(Stop()))
            except OSError:
                pass
        slot.ended = slot.ended or "stopped"

    def close(self, timeout: float = 30.0) -> None:
        """Stop every work unit and the control server; cancel jobs that do not end."""
        self._closed = True
        self._watcher.stop()
        slot_registry.release(self._holding)
        for slot in list(self._slots.values()):
            self._stop_slot(slot)
        self._server.close()
        for slot in list(self._slots.values()):
            if slot.sock is None and _alive(slot):
                # Never connected, so it cannot hear "stop" (e.g. a replacement still waiting
                # for a slot a newer instance of the application holds): cancel at once.
                self._launcher.cancel(self._group(slot))
        deadline = time.monotonic() + timeout
        for slot in list(self._slots.values()):
            if slot.thread is not None:
                slot.thread.join(max(0.0, deadline - time.monotonic()))
            if slot.thread is not None and slot.thread.is_alive():
                self._launcher.cancel(self._group(slot))
        for slot in list(self._slots.values()):
            if slot.sock is not None:
                slot.sock.close()


def _alive(slot: _Slot) -> bool:
    return slot.thread is not None and slot.thread.is_alive()
