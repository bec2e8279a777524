"""The control channel between the driver and its long-running work units.

One TCP connection per work unit, opened by the work unit to the driver (executors reach the
driver for Spark itself). Messages are JSON objects framed by a 4-byte big-endian length.
The driver proves nothing; the work unit proves it knows the application's secret by
answering a random challenge with ``HMAC-SHA256(secret, challenge)``, so no other process can
take a work unit's place or read what the driver sends.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import socket
import struct
from typing import Any

from streamtide.errors import StreamtideError

#: Largest message accepted (reports of big batches stay far below it).
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
_LENGTH = struct.Struct(">I")


class ChannelClosedError(StreamtideError):
    """The other end closed the connection (or it broke) before a whole message arrived."""


class HandshakeError(StreamtideError):
    """A work unit could not prove it knows the application's secret."""


def new_secret() -> str:
    """A fresh per-application secret (hex)."""
    return secrets.token_hex(32)


def send_message(sock: socket.socket, message: dict[str, Any]) -> None:
    """Send one JSON message."""
    data = json.dumps(message, separators=(",", ":")).encode()
    sock.sendall(_LENGTH.pack(len(data)) + data)


def recv_message(sock: socket.socket) -> dict[str, Any]:
    """Receive one JSON message; ``ChannelClosedError`` when the connection ends."""
    (length,) = _LENGTH.unpack(_recv_exactly(sock, _LENGTH.size))
    if length > MAX_MESSAGE_BYTES:
        raise ChannelClosedError(f"control message of {length} bytes exceeds the limit")
    message = json.loads(_recv_exactly(sock, length))
    if not isinstance(message, dict):
        raise ChannelClosedError("control message is not a JSON object")
    return message


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = []
    while count:
        try:
            chunk = sock.recv(min(count, 1 << 20))
        except OSError as exc:
            raise ChannelClosedError(f"control connection broke: {exc}") from exc
        if not chunk:
            raise ChannelClosedError("control connection closed")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _proof(secret: str, challenge: str) -> str:
    return hmac.new(secret.encode(), challenge.encode(), hashlib.sha256).hexdigest()


def accept_handshake(sock: socket.socket, secret: str) -> dict[str, Any]:
    """Driver side: challenge the work unit and return its hello (``HandshakeError`` when its
    proof is wrong)."""
    challenge = secrets.token_hex(16)
    send_message(sock, {"challenge": challenge})
    reply = recv_message(sock)
    proof = str(reply.get("proof", ""))
    if not hmac.compare_digest(proof, _proof(secret, challenge)):
        send_message(sock, {"error": "authentication failed"})
        raise HandshakeError("a work unit connected with a wrong application secret")
    hello = reply.get("hello")
    if not isinstance(hello, dict):
        raise HandshakeError("a work unit connected without saying who it is")
    return hello


def connect(
    host: str, port: int, secret: str, hello: dict[str, Any], timeout: float = 30.0
) -> socket.socket:
    """Work-unit side: connect to the driver and answer its challenge with ``hello``."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        challenge = str(recv_message(sock).get("challenge", ""))
        send_message(sock, {"proof": _proof(secret, challenge), "hello": hello})
        answer = recv_message(sock)
        if "error" in answer:
            raise HandshakeError(f"the driver refused this work unit: {answer['error']}")
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    return sock
