"""Round trip of a control message: the TLS channel against the same framing in plaintext.

``python -m bench control_channel [--messages N] [--rounds R]``. A driver-side server and a
work unit in a child process (the real ``engine.worker.answer_driver`` loop) exchange ``run``
messages of a batch's size (about 2 KB out, 4 KB back) on loopback. Each round connects once
per mode, plaintext (the channel's framing without TLS, as before TLS) and TLS (certificate
pinning and the HMAC challenge), alternating, so both see the same load; the figures are
medians over rounds of each round's median round trip, and of the work unit's connection
set-up (TCP connect; with TLS also the handshake, the pinning check and the challenge).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

from streamtide.engine.channel import accept, connect, new_secret, recv_message, send_message
from streamtide.engine.channel_tls import ServerIdentity, new_identity

#: A batch's message to one slot: the specs of a few tasks with their ranges and states.
RUN = {
    "kind": "run",
    "units": [
        {
            "batch": 1234,
            "stage": 0,
            "client": "3",
            "active": [
                {
                    "task_id": f"0_{p}",
                    "ranges": {"clicks": [p * 100_000, p * 100_000 + 5_000]},
                    "state": {"offsets": {f"clicks:{p}": p * 100_000}, "stream_time": 1_700_000},
                }
                for p in range(8)
            ],
            "standby": ["1_0", "1_1"],
        }
    ],
}
REPORT = {"tasks": [{"task": f"0_{p}", "input_records": 5000, "metrics": {}} for p in range(8)]}


def work_unit(host: str, port: str, mode: str, secret: str, fingerprint: str) -> None:
    """The child: connect, then answer ``run`` messages as a work unit does."""
    from streamtide.engine.worker import answer_driver

    began = time.perf_counter()
    if mode == "tls":
        sock = connect(host, int(port), secret, fingerprint, {"slot": ["bench", 0]})
    else:
        sock = socket.create_connection((host, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print(json.dumps({"connect_ms": (time.perf_counter() - began) * 1000}), flush=True)
    answer_driver(sock, None, lambda units: [REPORT for _ in units], lambda: None)
    sock.close()


def one_round(mode: str, messages: int, identity: ServerIdentity, secret: str) -> dict[str, Any]:
    """Connect one work unit in ``mode`` and time ``messages`` round trips."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    child = subprocess.Popen(
        [
            *(sys.executable, "-m", "bench.control_channel", "--work-unit"),
            *("127.0.0.1", str(port), mode, secret, identity.fingerprint),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    raw, _ = server.accept()
    if mode == "tls":
        sock, _ = accept(raw, identity, secret)
        sock.settimeout(None)
        send_message(sock, {"ok": True})
    else:
        sock = raw
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    send_message(sock, {"kind": "run", "units": []})  # the connection is ready at its reply
    recv_message(sock)
    times = []
    for _ in range(messages):
        start = time.perf_counter()
        send_message(sock, RUN)
        recv_message(sock)
        times.append(time.perf_counter() - start)
    send_message(sock, {"kind": "stop"})
    out, _ = child.communicate(timeout=30)
    sock.close()
    server.close()
    setup_ms = json.loads(out.splitlines()[0])["connect_ms"]
    return {"median_us": statistics.median(times) * 1e6, "setup_ms": setup_ms}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench control_channel")
    parser.add_argument("--messages", type=int, default=2000, help="round trips per round")
    parser.add_argument("--rounds", type=int, default=6, help="rounds per mode, alternating")
    args = parser.parse_args(argv)
    identity, secret = new_identity(), new_secret()
    results: dict[str, list[dict[str, Any]]] = {"plaintext": [], "tls": []}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for mode in ("plaintext", "tls"):
            results[mode].append(one_round(mode, args.messages, identity, secret))
    summary = {
        mode: {
            "round_trip_us": round(statistics.median(r["median_us"] for r in rounds), 1),
            "round_trip_us_per_round": [round(r["median_us"], 1) for r in rounds],
            "connect_ms": round(statistics.median(r["setup_ms"] for r in rounds), 2),
        }
        for mode, rounds in results.items()
    }
    summary["tls_over_plaintext"] = round(
        summary["tls"]["round_trip_us"] / summary["plaintext"]["round_trip_us"], 3
    )
    summary["message_bytes"] = {"run": len(json.dumps(RUN)), "reply": len(json.dumps(REPORT))}
    summary["load_average_at_start"] = round(load, 2)
    summary["load_average_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--work-unit"]:
        work_unit(*sys.argv[2:7])
    else:
        main()
