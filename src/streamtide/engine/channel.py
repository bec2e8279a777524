"""The control channel between the driver and its long-running work units.

One TLS 1.3 connection per work unit, opened by the work unit to the driver (executors reach
the driver for Spark itself); the handshake happens once per connection, and each message
after it is a JSON object framed by a 4-byte big-endian length. Each end proves who it is:

- the driver by its per-application certificate (``channel_tls``), which the work unit pins
  by the fingerprint it got with its payload: a server with any other certificate is left
  before the work unit sends anything;
- the work unit by answering a random challenge with ``HMAC-SHA256(secret, challenge)``, so no
  other process can take a work unit's place or receive what the driver sends.

Until a work unit has answered, the driver reads at most ``MAX_UNAUTHENTICATED_BYTES`` from it
(a larger length prefix ends the connection before anything is allocated for it) and gives it
``HANDSHAKE_TIMEOUT_S`` in all, TLS handshake included. docs/security.md has the threat model.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import socket
import ssl
import struct
import threading
from typing import Any

from streamtide.engine.channel_tls import ServerIdentity, client_context, fingerprint
from streamtide.errors import StreamtideError

#: Largest message accepted from an authenticated work unit (reports stay far below it).
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
#: Largest message read from a peer before it has proved it knows the secret (its hello).
MAX_UNAUTHENTICATED_BYTES = 4096
#: How long a peer has, from connecting, to complete TLS and prove it knows the secret.
HANDSHAKE_TIMEOUT_S = 10.0
_LENGTH = struct.Struct(">I")


class ChannelClosedError(StreamtideError):
    """The other end closed the connection (or it broke) before a whole message arrived."""


class HandshakeError(StreamtideError):
    """A peer could not prove who it is: a work unit without the application's secret, or a
    server without the driver's certificate."""


def new_secret() -> str:
    """A fresh per-application secret (hex)."""
    return secrets.token_hex(32)


def send_message(sock: socket.socket, message: dict[str, Any]) -> None:
    """Send one JSON message."""
    data = json.dumps(message, separators=(",", ":")).encode()
    sock.sendall(_LENGTH.pack(len(data)) + data)


def recv_message(sock: socket.socket, limit: int = MAX_MESSAGE_BYTES) -> dict[str, Any]:
    """Receive one JSON message of at most ``limit`` bytes; ``ChannelClosedError`` when the
    connection ends or the length prefix announces more (nothing of it is read then)."""
    (length,) = _LENGTH.unpack(_recv_exactly(sock, _LENGTH.size))
    if length > limit:
        raise ChannelClosedError(
            f"control message of {length} bytes exceeds the limit of {limit} bytes"
        )
    try:
        message = json.loads(_recv_exactly(sock, length))
    except ValueError as exc:
        raise ChannelClosedError(f"control message is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ChannelClosedError("control message is not a JSON object")
    return message


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = []
    while count:
        try:
            chunk = sock.recv(min(count, 1 << 20))
        except (OSError, ValueError) as exc:  # ValueError: an SSL socket closed meanwhile
            raise ChannelClosedError(f"control connection broke: {exc}") from exc
        if not chunk:
            raise ChannelClosedError("control connection closed")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _proof(secret: str, challenge: str) -> str:
    return hmac.new(secret.encode(), challenge.encode(), hashlib.sha256).hexdigest()


def accept(
    conn: socket.socket,
    identity: ServerIdentity,
    secret: str,
    timeout: float = HANDSHAKE_TIMEOUT_S,
) -> tuple[ssl.SSLSocket, dict[str, Any]]:
    """Driver side, for a freshly accepted connection: run the TLS handshake with the
    driver's certificate, challenge the peer, and return the TLS socket and the work unit's
    hello. ``HandshakeError`` for a wrong proof, ``ChannelClosedError`` or ``OSError`` for a
    peer that broke the rules (too much data, no TLS, too slow); ``conn`` is closed then.
    The whole exchange ends after ``timeout`` seconds, however slowly the peer sends."""
    watchdog = _Watchdog(conn, timeout)
    try:
        conn.settimeout(timeout)
        tls = identity.context.wrap_socket(conn, server_side=True)
        try:
            challenge = secrets.token_hex(16)
            send_message(tls, {"challenge": challenge})
            reply = recv_message(tls, MAX_UNAUTHENTICATED_BYTES)
            proof = str(reply.get("proof", ""))
            if not hmac.compare_digest(proof, _proof(secret, challenge)):
                send_message(tls, {"error": "authentication failed"})
                raise HandshakeError("a work unit connected with a wrong application secret")
            hello = reply.get("hello")
            if not isinstance(hello, dict):
                raise HandshakeError("a work unit connected without saying who it is")
        except BaseException:
            tls.close()
            raise
    except BaseException:
        conn.close()
        raise
    finally:
        watchdog.cancel()
    return tls, hello


class _Watchdog:
    """Shuts a connection down after ``timeout`` seconds unless cancelled: a blocked read on
    it then returns, wherever in the TLS or the challenge it waits."""

    def __init__(self, conn: socket.socket, timeout: float) -> None:
        self._guard = conn.dup()  # the same connection, untouched by TLS wrapping
        self._timer = threading.Timer(timeout, self._cut)
        self._timer.daemon = True
        self._timer.start()

    def _cut(self) -> None:
        try:
            self._guard.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def cancel(self) -> None:
        self._timer.cancel()
        self._guard.close()


def connect(
    host: str,
    port: int,
    secret: str,
    server_fingerprint: str,
    hello: dict[str, Any],
    timeout: float = 30.0,
) -> ssl.SSLSocket:
    """Work-unit side: connect to the driver over TLS, check that it presents the
    certificate of ``server_fingerprint`` (``HandshakeError`` otherwise, before anything is
    sent), and answer its challenge with ``hello``."""
    raw = socket.create_connection((host, port), timeout=timeout)
    try:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock = client_context().wrap_socket(raw)
        except ssl.SSLError as exc:
            raise HandshakeError(
                f"no TLS connection to the driver at {host}:{port}: {exc}"
            ) from exc
    except BaseException:
        raw.close()
        raise
    try:
        presented = fingerprint(sock.getpeercert(binary_form=True) or b"")
        if not hmac.compare_digest(presented, server_fingerprint):
            raise HandshakeError(
                f"the server at {host}:{port} is not this application's driver: its "
                f"certificate {presented[:16]}... is not the pinned {server_fingerprint[:16]}..."
            )
        challenge = str(recv_message(sock, MAX_UNAUTHENTICATED_BYTES).get("challenge", ""))
        send_message(sock, {"proof": _proof(secret, challenge), "hello": hello})
        answer = recv_message(sock, MAX_UNAUTHENTICATED_BYTES)
        if "error" in answer:
            raise HandshakeError(f"the driver refused this work unit: {answer['error']}")
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    return sock


def pending(sock: Any) -> bool:
    """Whether bytes of the next message already wait inside ``sock`` (decrypted by TLS but
    not yet read), where ``select`` on the socket cannot see them."""
    return bool(getattr(sock, "pending", lambda: 0)())
