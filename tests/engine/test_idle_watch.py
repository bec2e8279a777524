"""The watcher of idle control connections tells, over the real TLS channel, a quiet work
unit, one that said goodbye (it ends on purpose: not replaced) and one that died."""

from __future__ import annotations

import socket
import ssl
import threading
import time

import pytest

from streamtide.engine.channel import accept, connect, send_message
from streamtide.engine.channel_tls import new_identity
from streamtide.engine.idle_watch import DIED, idle_state

SECRET = "the-application-secret"


@pytest.fixture
def pair() -> tuple[ssl.SSLSocket, ssl.SSLSocket]:
    """(driver side, work-unit side) of one authenticated control connection."""
    identity = new_identity()
    server = socket.create_server(("127.0.0.1", 0))
    accepted: dict[str, ssl.SSLSocket] = {}

    def serve() -> None:
        raw, _ = server.accept()
        accepted["conn"], _ = accept(raw, identity, SECRET)
        send_message(accepted["conn"], {"ok": True})

    thread = threading.Thread(target=serve)
    thread.start()
    unit = connect("127.0.0.1", server.getsockname()[1], SECRET, identity.fingerprint, {})
    thread.join(30)
    server.close()
    driver = accepted["conn"]
    driver.settimeout(None)  # as the driver keeps it between batches
    yield driver, unit
    driver.close()
    unit.close()


def _settled(driver: ssl.SSLSocket) -> dict | None:
    """The idle state once whatever the peer sent had time to arrive."""
    time.sleep(0.3)
    return idle_state(driver)


def test_a_quiet_work_unit_is_left_alone(pair) -> None:
    driver, _ = pair
    assert _settled(driver) is None
    assert driver.gettimeout() is None  # the connection is left as it was found


def test_a_farewell_is_read_through_tls_and_not_taken_for_a_death(pair) -> None:
    driver, unit = pair
    send_message(unit, {"ended": "its driver was taken over"})
    assert _settled(driver) == {"ended": "its driver was taken over"}
    assert driver.gettimeout() is None


def test_a_work_unit_that_closes_without_a_word_died(pair) -> None:
    driver, unit = pair
    unit.close()
    assert _settled(driver) is DIED
