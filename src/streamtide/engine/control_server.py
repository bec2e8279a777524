"""The driver's control server: where long-running work units connect back to the driver.

It listens on the address the work-unit launcher names, runs each connection's TLS handshake
(the per-application certificate, the secret; ``engine.channel``) in a thread of its own, at
most ``MAX_PENDING_HANDSHAKES`` at once, and hands each authenticated connection with its
hello to ``admit``, which decides whether a work unit of that slot and generation is expected
(``engine.continuous``) and answers it with ``welcome`` or ``refuse`` while it holds its own
lock (so that nothing else is sent on the connection before the answer). What the connections
then carry is not this module's concern."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

from streamtide.engine.channel import (
    HANDSHAKE_TIMEOUT_S,
    ChannelClosedError,
    HandshakeError,
    accept,
    new_secret,
    send_message,
)
from streamtide.engine.channel_tls import new_identity

log = logging.getLogger("streamtide.engine")

#: Connections that may be in their handshake at once. More wait in the listen queue until one
#: of them ends (each ends within ``HANDSHAKE_TIMEOUT_S``), so that a burst of work units, as a
#: large cluster launches, is admitted; a connection still waiting after that is closed.
MAX_PENDING_HANDSHAKES = 32

#: ``admit(conn, hello)``: takes the connection (``welcome``) or refuses it (``refuse``).
Admit = Callable[[socket.socket, dict[str, Any]], None]


def welcome(conn: socket.socket) -> None:
    """Tell a work unit its connection was taken."""
    send_message(conn, {"ok": True})


def refuse(conn: socket.socket, why: str) -> None:
    """Tell a work unit why its connection is refused, and close it."""
    try:
        send_message(conn, {"error": why})
    finally:
        conn.close()


class ControlServer:
    """Accepts work units' control connections and hands the authenticated ones to
    ``admit`` (see the module docstring)."""

    def __init__(self, bind: str, admit: Admit) -> None:
        self.secret = new_secret()
        self.identity = new_identity()
        self._admit = admit
        self._closed = False
        self._server = socket.create_server(
            (bind, 0), family=socket.AF_INET6 if ":" in bind else socket.AF_INET
        )
        self._pending = threading.BoundedSemaphore(MAX_PENDING_HANDSHAKES)
        self._acceptor = threading.Thread(
            target=self._accept_loop, name="streamtide-control", daemon=True
        )
        self._acceptor.start()

    @property
    def address(self) -> tuple[str, int]:
        """Where the server listens (bound address, port)."""
        host, port = self._server.getsockname()[:2]
        return host, port

    def close(self) -> None:
        """Stop accepting connections (those already admitted stay open)."""
        self._closed = True
        self._server.close()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, peer = self._server.accept()
            except OSError:
                return  # the server was closed
            if not self._pending.acquire(timeout=HANDSHAKE_TIMEOUT_S):
                log.warning("refused a control connection from %s: too many handshakes", peer)
                conn.close()
                continue
            threading.Thread(
                target=self._handshake, args=(conn,), name="streamtide-handshake", daemon=True
            ).start()

    def _handshake(self, raw: socket.socket) -> None:
        try:
            conn, hello = accept(raw, self.identity, self.secret)
        except (HandshakeError, ChannelClosedError, OSError) as exc:
            log.warning("refused a control connection: %s", exc)
            return
        finally:
            self._pending.release()
        try:
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._admit(conn, hello)
        except (OSError, KeyError, TypeError, ValueError) as exc:
            log.warning("refused a control connection: %s", exc)
            conn.close()
