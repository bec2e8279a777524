"""Watching idle control connections: a work unit that dies between batches is noticed at
once, not when the next batch needs it.

Between batches nothing is sent on a work unit's control connection. A work unit that ends on
its own (its driver was taken over, its executor went away) says so before it closes its end
(``{"ended": why}``); one whose Python worker died just closes. So an idle connection that
becomes readable holds either that farewell or nothing (closed by its peer).
``IdleWatcher`` looks every ``interval`` seconds, but only while it can take the ``busy`` lock
that message exchanges hold, so it never reads or races a reply.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from typing import Any

from streamtide.engine.channel import ChannelClosedError, pending, recv_message

#: What an idle connection holds: nothing yet (None), its work unit's farewell, or DIED.
DIED: dict[str, Any] = {"ended": "its work unit died (its connection closed)"}
#: How long the rest of a farewell may take once its first byte arrived.
_REST_TIMEOUT_S = 5.0


def idle_state(sock: socket.socket) -> dict[str, Any] | None:
    """None while an idle connection is quiet; the farewell its work unit sent; or ``DIED``
    when its peer closed it without one. Works on TLS sockets too: a readable socket may
    hold only TLS bookkeeping, so the first byte is read without waiting (there is no peek
    through TLS), then the rest of the message."""
    try:
        if not pending(sock) and not select.select([sock], [], [], 0)[0]:
            return None
        timeout = sock.gettimeout()
        sock.setblocking(False)
        try:
            first = sock.recv(1)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return None  # no application data yet
        finally:
            sock.settimeout(timeout)
        if first == b"":
            return DIED
        sock.settimeout(_REST_TIMEOUT_S)
        try:
            message = recv_message(_Prefixed(first, sock))  # type: ignore[arg-type]
        finally:
            sock.settimeout(timeout)
    except (OSError, ValueError, ChannelClosedError):  # reset, or closed here meanwhile
        return DIED
    return message if isinstance(message, dict) and "ended" in message else DIED


class _Prefixed:
    """A socket whose first ``recv`` returns bytes already read from it."""

    def __init__(self, head: bytes, sock: socket.socket) -> None:
        self._head, self._sock = head, sock

    def recv(self, count: int) -> bytes:
        if self._head:
            head, self._head = self._head[:count], self._head[count:]
            return head
        return self._sock.recv(count)


class IdleWatcher:
    """Calls ``on_ended(item, state)`` for each item of ``connections()`` (``(item, socket)``
    pairs) whose idle connection ended (``idle_state``), looking every ``interval`` seconds
    while ``busy`` is free; runs in a daemon thread until ``stop``."""

    def __init__(
        self,
        connections: Callable[[], Iterable[tuple[Any, socket.socket]]],
        on_ended: Callable[[Any, dict[str, Any]], None],
        busy: threading.Lock,
        interval: float,
    ) -> None:
        self._connections = connections
        self._on_ended = on_ended
        self._busy = busy
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="streamtide-watch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stopped.wait(self._interval):
            if not self._busy.acquire(blocking=False):
                continue  # messages are exchanged: a loss is noticed by the exchange
            try:
                ended = [
                    (item, state)
                    for item, sock in self._connections()
                    if (state := idle_state(sock)) is not None
                ]
            finally:
                self._busy.release()
            for item, state in ended:
                self._on_ended(item, state)

    def stop(self) -> None:
        self._stopped.set()
