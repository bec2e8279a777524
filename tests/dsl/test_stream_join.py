"""Inner stream-stream joins: Kafka's KStreamKStreamJoinTest through the test driver."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamtide import JoinWindows
from tests.dsl.stream_join_support import join_case, pipe_keys


@pytest.mark.parametrize(
    "kind, windows",
    [
        ("join", JoinWindows.of_time_difference_with_no_grace(100)),
        ("outer_join", JoinWindows.of_time_difference_and_grace(100, timedelta(hours=24))),
    ],
    ids=["join", "outer_join"],
)
def test_join(kind, windows):
    """Kafka's testJoin and testOuterJoin: with a day of grace, the outer join emits nothing
    unjoined while the test runs, so both give the same results."""
    with join_case(kind, windows) as (pipe1, pipe2, check):
        pipe_keys(pipe1, "A", count=2)
        check()
        pipe_keys(pipe2, "a", count=2)
        check((0, "A0+a0", 0), (1, "A1+a1", 0))
        pipe_keys(pipe1, "B")
        check((0, "B0+a0", 0), (1, "B1+a1", 0))
        pipe_keys(pipe2, "b")
        check(
            (0, "A0+b0", 0),
            (0, "B0+b0", 0),
            (1, "A1+b1", 0),
            (1, "B1+b1", 0),
            (2, "B2+b2", 0),
            (3, "B3+b3", 0),
        )
        pipe_keys(pipe1, "C")
        check(
            (0, "C0+a0", 0),
            (0, "C0+b0", 0),
            (1, "C1+a1", 0),
            (1, "C1+b1", 0),
            (2, "C2+b2", 0),
            (3, "C3+b3", 0),
        )
        pipe_keys(pipe2, "c", count=2)
        check(
            (0, "A0+c0", 0),
            (0, "B0+c0", 0),
            (0, "C0+c0", 0),
            (1, "A1+c1", 0),
            (1, "B1+c1", 0),
            (1, "C1+c1", 0),
        )


def test_windowing():
    with join_case("join", JoinWindows.of_time_difference_with_no_grace(100)) as (
        pipe1,
        pipe2,
        check,
    ):
        time = 0
        pipe_keys(pipe1, "A", time, count=2)
        check()
        pipe_keys(pipe2, "a", time, count=2)
        check((0, "A0+a0", 0), (1, "A1+a1", 0))
        time = 1000
        pipe_keys(pipe1, "B", time, step=1)
        check()
        time += 100
        pipe_keys(pipe2, "b", time)
        check((0, "B0+b0", 1100), (1, "B1+b1", 1100), (2, "B2+b2", 1100), (3, "B3+b3", 1100))
        time += 1
        pipe_keys(pipe2, "c", time)
        check((1, "B1+c1", 1101), (2, "B2+c2", 1101), (3, "B3+c3", 1101))
        time += 1
        pipe_keys(pipe2, "d", time)
        check((2, "B2+d2", 1102), (3, "B3+d3", 1102))
        time += 1
        pipe_keys(pipe2, "e", time)
        check((3, "B3+e3", 1103))
        time += 1
        pipe_keys(pipe2, "f", time)
        check()
        time = 1000 - 100 - 1
        pipe_keys(pipe2, "g", time)
        check()
        time += 1
        pipe_keys(pipe2, "h", time)
        check((0, "B0+h0", 1000))
        time += 1
        pipe_keys(pipe2, "i", time)
        check((0, "B0+i0", 1000), (1, "B1+i1", 1001))
        time += 1
        pipe_keys(pipe2, "j", time)
        check((0, "B0+j0", 1000), (1, "B1+j1", 1001), (2, "B2+j2", 1002))
        time += 1
        pipe_keys(pipe2, "k", time)
        check((0, "B0+k0", 1000), (1, "B1+k1", 1001), (2, "B2+k2", 1002), (3, "B3+k3", 1003))
        time = 2000
        pipe_keys(pipe2, "l", time, step=1)
        check()
        time = 2000 + 100
        pipe_keys(pipe1, "C", time)
        check((0, "C0+l0", 2100), (1, "C1+l1", 2100), (2, "C2+l2", 2100), (3, "C3+l3", 2100))
        time += 1
        pipe_keys(pipe1, "D", time)
        check((1, "D1+l1", 2101), (2, "D2+l2", 2101), (3, "D3+l3", 2101))
        time += 1
        pipe_keys(pipe1, "E", time)
        check((2, "E2+l2", 2102), (3, "E3+l3", 2102))
        time += 1
        pipe_keys(pipe1, "F", time)
        check((3, "F3+l3", 2103))
        time += 1
        pipe_keys(pipe1, "G", time)
        check()
        time = 2000 - 100 - 1
        pipe_keys(pipe1, "H", time)
        check()
        time += 1
        pipe_keys(pipe1, "I", time)
        check((0, "I0+l0", 2000))
        time += 1
        pipe_keys(pipe1, "J", time)
        check((0, "J0+l0", 2000), (1, "J1+l1", 2001))
        time += 1
        pipe_keys(pipe1, "K", time)
        check((0, "K0+l0", 2000), (1, "K1+l1", 2001), (2, "K2+l2", 2002))


def test_asymmetric_windowing_after():
    with join_case("join", JoinWindows.of_time_difference_with_no_grace(0).after(100)) as (
        pipe1,
        pipe2,
        check,
    ):
        time = 1000
        pipe_keys(pipe1, "A", time, step=1)
        check()
        time = 1000 - 1
        pipe_keys(pipe2, "a", time)
        check()
        time += 1
        pipe_keys(pipe2, "b", time)
        check((0, "A0+b0", 1000))
        time += 1
        pipe_keys(pipe2, "c", time)
        check((0, "A0+c0", 1001), (1, "A1+c1", 1001))
        time += 1
        pipe_keys(pipe2, "d", time)
        check((0, "A0+d0", 1002), (1, "A1+d1", 1002), (2, "A2+d2", 1002))
        time += 1
        pipe_keys(pipe2, "e", time)
        check((0, "A0+e0", 1003), (1, "A1+e1", 1003), (2, "A2+e2", 1003), (3, "A3+e3", 1003))
        time = 1000 + 100
        pipe_keys(pipe2, "f", time)
        check((0, "A0+f0", 1100), (1, "A1+f1", 1100), (2, "A2+f2", 1100), (3, "A3+f3", 1100))
        time += 1
        pipe_keys(pipe2, "g", time)
        check((1, "A1+g1", 1101), (2, "A2+g2", 1101), (3, "A3+g3", 1101))
        time += 1
        pipe_keys(pipe2, "h", time)
        check((2, "A2+h2", 1102), (3, "A3+h3", 1102))
        time += 1
        pipe_keys(pipe2, "i", time)
        check((3, "A3+i3", 1103))
        time += 1
        pipe_keys(pipe2, "j", time)
        check()


def test_asymmetric_windowing_before():
    with join_case("join", JoinWindows.of_time_difference_with_no_grace(0).before(100)) as (
        pipe1,
        pipe2,
        check,
    ):
        time = 1000
        pipe_keys(pipe1, "A", time, step=1)
        check()
        time = 1000 - 100 - 1
        pipe_keys(pipe2, "a", time)
        check()
        time += 1
        pipe_keys(pipe2, "b", time)
        check((0, "A0+b0", 1000))
        time += 1
        pipe_keys(pipe2, "c", time)
        check((0, "A0+c0", 1000), (1, "A1+c1", 1001))
        time += 1
        pipe_keys(pipe2, "d", time)
        check((0, "A0+d0", 1000), (1, "A1+d1", 1001), (2, "A2+d2", 1002))
        time += 1
        pipe_keys(pipe2, "e", time)
        check((0, "A0+e0", 1000), (1, "A1+e1", 1001), (2, "A2+e2", 1002), (3, "A3+e3", 1003))
        time = 1000
        pipe_keys(pipe2, "f", time)
        check((0, "A0+f0", 1000), (1, "A1+f1", 1001), (2, "A2+f2", 1002), (3, "A3+f3", 1003))
        time += 1
        pipe_keys(pipe2, "g", time)
        check((1, "A1+g1", 1001), (2, "A2+g2", 1002), (3, "A3+g3", 1003))
        time += 1
        pipe_keys(pipe2, "h", time)
        check((2, "A2+h2", 1002), (3, "A3+h3", 1003))
        time += 1
        pipe_keys(pipe2, "i", time)
        check((3, "A3+i3", 1003))
        time += 1
        pipe_keys(pipe2, "j", time)
        check()
