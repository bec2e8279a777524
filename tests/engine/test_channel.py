"""The control channel's security measures (docs/security.md), each against a real TLS
server and client on loopback: TLS only, the driver's certificate pinned, the work unit's
HMAC proof, a cap and a deadline on what an unauthenticated peer can make the driver do."""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from streamtide.engine.channel import (
    MAX_UNAUTHENTICATED_BYTES,
    ChannelClosedError,
    HandshakeError,
    accept,
    connect,
    recv_message,
    send_message,
)
from streamtide.engine.channel_tls import ServerIdentity, client_context, new_identity
from streamtide.engine.control_address import control_address
from streamtide.engine.control_server import MAX_PENDING_HANDSHAKES, ControlServer, welcome

SECRET = "s3cret-of-the-application"


@pytest.fixture(scope="module")
def identity() -> ServerIdentity:
    return new_identity()


class Driver:
    """A driver's control server on loopback that accepts one connection in a thread and
    records what ``accept`` returned or raised."""

    def __init__(self, identity: ServerIdentity, timeout: float = 10.0) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.result: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._serve, args=(identity, timeout))
        self.thread.start()

    def _serve(self, identity: ServerIdentity, timeout: float) -> None:
        raw, _ = self.server.accept()
        try:
            conn, hello = accept(raw, identity, SECRET, timeout)
        except Exception as exc:
            self.result["error"] = exc
            return
        self.result["hello"] = hello
        send_message(conn, {"ok": True})
        try:
            self.result["got"] = recv_message(conn)
        except ChannelClosedError:
            pass
        conn.close()

    def join(self) -> dict[str, Any]:
        self.thread.join(60)
        assert not self.thread.is_alive(), "the driver's handshake never ended"
        self.server.close()
        return self.result


def tls_peer(port: int) -> ssl.SSLSocket:
    """A peer that completes TLS with the driver (anyone can) but knows no secret."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    return client_context().wrap_socket(raw)


def test_a_work_unit_pinning_the_driver_and_knowing_the_secret_is_admitted(identity) -> None:
    driver = Driver(identity)
    sock = connect("127.0.0.1", driver.port, SECRET, identity.fingerprint, {"slot": ["x", 0]})
    assert sock.version() == "TLSv1.3"
    big = {"units": ["x" * 100_000] * 20}  # far above the unauthenticated cap: now allowed
    send_message(sock, big)
    result = driver.join()
    sock.close()
    assert result == {"hello": {"slot": ["x", 0]}, "got": big}


def test_a_plaintext_client_is_refused(identity) -> None:
    driver = Driver(identity)
    raw = socket.create_connection(("127.0.0.1", driver.port), timeout=30)
    send_message(raw, {"proof": "0" * 64, "hello": {"slot": ["x", 0]}})  # no TLS
    with pytest.raises(ChannelClosedError):
        recv_message(raw, MAX_UNAUTHENTICATED_BYTES)  # no challenge, only a TLS alert or EOF
    raw.close()
    result = driver.join()
    assert isinstance(result["error"], ssl.SSLError) and "hello" not in result


def test_a_client_pinning_another_fingerprint_leaves_before_it_sends_anything(identity) -> None:
    driver = Driver(identity)
    with pytest.raises(HandshakeError, match="not this application's driver"):
        connect("127.0.0.1", driver.port, SECRET, "00" * 32, {"slot": ["x", 0]})
    result = driver.join()
    assert isinstance(result["error"], (ChannelClosedError, OSError))  # no proof arrived
    assert "hello" not in result


def test_a_server_with_another_certificate_gets_no_proof(identity) -> None:
    impostor = new_identity()  # e.g. a process on the cluster network posing as the driver
    server = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def pose() -> None:
        raw, _ = server.accept()
        data = b""
        try:
            tls = impostor.context.wrap_socket(raw, server_side=True)
            send_message(tls, {"challenge": "c"})
            while chunk := tls.recv(65536):
                data += chunk
        except OSError:
            pass  # the work unit hung up
        received.append(data)
        raw.close()

    thread = threading.Thread(target=pose)
    thread.start()
    port = server.getsockname()[1]
    with pytest.raises(HandshakeError, match="not this application's driver"):
        connect("127.0.0.1", port, SECRET, identity.fingerprint, {"slot": ["x", 0]})
    thread.join(30)
    server.close()
    assert received == [b""]  # the work unit hung up without answering the challenge


def test_a_wrong_secret_is_refused(identity) -> None:
    driver = Driver(identity)
    with pytest.raises(HandshakeError, match="authentication failed"):
        connect("127.0.0.1", driver.port, "another-secret", identity.fingerprint, {})
    result = driver.join()
    assert isinstance(result["error"], HandshakeError)


@pytest.mark.parametrize("announced", [1 << 30, 200 * 1024 * 1024], ids=["1GB", "200MB"])
def test_a_huge_length_prefix_before_authentication_is_cut_off_unallocated(
    identity, announced: int
) -> None:
    junk = b"\0" * 65536
    tracemalloc.start()
    try:
        driver = Driver(identity)
        peer = tls_peer(driver.port)
        recv_message(peer, MAX_UNAUTHENTICATED_BYTES)  # the challenge
        tracemalloc.reset_peak()
        peer.sendall(struct.pack(">I", announced))
        sent = _send_until_refused(peer, junk, limit=announced)
        result = driver.join()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    peer.close()
    assert isinstance(result["error"], ChannelClosedError)
    assert "exceeds the limit" in str(result["error"])
    assert sent < announced  # the driver hung up long before the announced size arrived
    assert peak < 4 * 1024 * 1024, f"the driver allocated {peak} bytes for a refused message"


def _send_until_refused(sock: ssl.SSLSocket, chunk: bytes, limit: int) -> int:
    sent = 0
    try:
        while sent < limit:
            sock.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass
    return sent


def test_a_peer_that_never_answers_the_challenge_is_timed_out(identity) -> None:
    driver = Driver(identity, timeout=1.0)
    peer = tls_peer(driver.port)
    recv_message(peer, MAX_UNAUTHENTICATED_BYTES)
    result = driver.join()  # returns although the peer keeps the connection open
    assert isinstance(result["error"], ChannelClosedError)
    with pytest.raises(ChannelClosedError):
        recv_message(peer)  # the driver closed it
    peer.close()


def test_the_deadline_covers_the_whole_handshake_not_each_read(identity) -> None:
    """A peer dribbling one byte at a time, each well within a per-read timeout, is cut
    off at the deadline of the whole exchange, before it has sent its message."""
    driver = Driver(identity, timeout=1.0)
    peer = tls_peer(driver.port)
    recv_message(peer, MAX_UNAUTHENTICATED_BYTES)
    frame = struct.pack(">I", 200) + b" " * 200
    dribbled = _dribble(peer, frame, pause=0.1, stop=lambda: "error" in driver.result)
    result = driver.join()
    peer.close()
    assert isinstance(result["error"], ChannelClosedError)
    assert dribbled < len(frame)


def _dribble(sock: ssl.SSLSocket, data: bytes, pause: float, stop: Callable[[], bool]) -> int:
    for index in range(len(data)):
        if stop():
            return index
        try:
            sock.sendall(data[index : index + 1])
        except OSError:
            return index
        time.sleep(pause)
    return len(data)


def test_the_control_server_binds_where_spark_binds_the_driver() -> None:
    local, cluster = "local[2]", "spark://master:7077"
    assert control_address(None, "192.0.2.2", local) == ("127.0.0.1", "127.0.0.1")
    assert control_address("10.0.0.5", "driver.example", cluster) == ("10.0.0.5", "driver.example")
    assert control_address(None, "10.0.0.5", cluster) == ("10.0.0.5", "10.0.0.5")
    assert control_address(None, "10.0.0.5", "local-cluster[2,1,1024]") == ("10.0.0.5",) * 2
    assert control_address("0.0.0.0", "driver.example", cluster) == ("0.0.0.0", "driver.example")
    assert control_address(None, None, cluster) == ("127.0.0.1", "127.0.0.1")
    assert control_address("127.0.0.1", "192.0.2.2", local) == ("127.0.0.1", "127.0.0.1")


def test_a_work_unit_arriving_while_the_handshakes_are_at_their_limit_waits_and_is_admitted() -> (
    None
):
    """A burst of connections above the limit of handshakes in flight (a large cluster
    launching its work units at once) waits for a free handshake instead of being refused."""
    admitted: list[dict[str, Any]] = []

    def admit(conn: socket.socket, hello: dict[str, Any]) -> None:
        admitted.append(hello)
        welcome(conn)

    server = ControlServer("127.0.0.1", admit)
    host, port = server.address
    # peers that never speak hold every handshake until its deadline
    stalled = [socket.create_connection((host, port)) for _ in range(MAX_PENDING_HANDSHAKES)]
    try:
        time.sleep(0.5)  # the server has taken them all
        sock = connect(host, port, server.secret, server.identity.fingerprint, {"slot": ["x", 0]})
        sock.close()
    finally:
        for peer in stalled:
            peer.close()
        server.close()
    assert admitted == [{"slot": ["x", 0]}]
