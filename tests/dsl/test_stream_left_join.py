"""Left stream-stream joins: Kafka's KStreamKStreamLeftJoinTest through the test driver."""

from __future__ import annotations

from streamtide import JoinWindows
from tests.dsl.stream_join_support import KEYS, join_case, pipe_keys


def test_left_join_duplicates():
    with join_case("left_join", JoinWindows.of_time_difference_and_grace(100, 10)) as (
        pipe1,
        pipe2,
        check,
    ):
        pipe1(0, "A0", 0)
        pipe1(0, "A0-0", 0)
        pipe2(1, "a0", 111)
        pipe2(2, "dummy", 500)
        check((0, "A0+null", 0), (0, "A0-0+null", 0))
        pipe1(2, "A2", 1000)
        pipe1(2, "A2-0", 1000)
        pipe2(2, "a2", 1001)
        check((2, "A2+a2", 1001), (2, "A2-0+a2", 1001))
        pipe2(3, "a3", 315)
        check()


def test_left_expired_non_joined_records_are_emitted_by_the_left_processor():
    with join_case("left_join", JoinWindows.of_time_difference_and_grace(100, 0)) as (
        pipe1,
        pipe2,
        check,
    ):
        pipe1(0, "A0", 1)
        pipe1(1, "A1", 2)
        pipe1(0, "A0-0", 3)
        check()
        pipe2(1, "a1", 3)
        check((1, "A1+a1", 3))
        pipe1(2, "dummy", 401)
        check((0, "A0+null", 1), (0, "A0-0+null", 3))
        pipe2(2, "dummy", 401)
        check((2, "dummy+dummy", 401))


def test_left_expired_non_joined_records_are_emitted_by_the_right_processor():
    with join_case("left_join", JoinWindows.of_time_difference_and_grace(100, 0)) as (
        pipe1,
        pipe2,
        check,
    ):
        pipe1(0, "A0", 1)
        pipe1(1, "A1", 2)
        pipe1(0, "A0-0", 3)
        check()
        pipe2(1, "a1", 3)
        check((1, "A1+a1", 3))
        pipe2(2, "dummy", 401)
        check((0, "A0+null", 1), (0, "A0-0+null", 3))
        pipe1(2, "dummy", 402)
        check((2, "dummy+dummy", 402))


def test_right_non_joined_records_are_never_emitted_by_the_left_processor():
    with join_case("left_join", JoinWindows.of_time_difference_and_grace(100, 0)) as (
        pipe1,
        pipe2,
        check,
    ):
        pipe2(0, "A0", 1)
        pipe2(1, "A1", 2)
        pipe2(0, "A0-0", 3)
        check()
        pipe1(1, "a1", 3)
        check((1, "a1+A1", 3))
        pipe1(2, "dummy", 401)
        check()
        pipe2(2, "dummy", 402)
        check((2, "dummy+dummy", 402))


def test_right_non_joined_records_are_never_emitted_by_the_right_processor():
    with join_case("left_join", JoinWindows.of_time_difference_with_no_grace(100)) as (
        pipe1,
        pipe2,
        check,
    ):
        pipe2(0, "A0", 1)
        pipe2(1, "A1", 2)
        pipe2(0, "A0-0", 3)
        check()
        pipe1(1, "a1", 3)
        check((1, "a1+A1", 3))
        pipe2(2, "dummy", 401)
        check()
        pipe1(2, "dummy", 402)
        check((2, "dummy+dummy", 402))


def test_left_joined_records_with_zero_after_are_emitted():
    with join_case("left_join", JoinWindows.of_time_difference_with_no_grace(100).after(0)) as (
        pipe1,
        pipe2,
        check,
    ):
        time = 1000
        pipe_keys(pipe1, "A", time, step=1)
        check((0, "A0+null", 1000), (1, "A1+null", 1001), (2, "A2+null", 1002))
        time = 1000 - 1
        pipe_keys(pipe2, "a", time)
        check((0, "A0+a0", 1000), (1, "A1+a1", 1001), (2, "A2+a2", 1002), (3, "A3+a3", 1003))
        time += 1
        pipe_keys(pipe2, "b", time)
        check((0, "A0+b0", 1000), (1, "A1+b1", 1001), (2, "A2+b2", 1002), (3, "A3+b3", 1003))
        time += 1
        pipe_keys(pipe2, "c", time)
        check((1, "A1+c1", 1001), (2, "A2+c2", 1002), (3, "A3+c3", 1003))
        time += 1
        pipe_keys(pipe2, "d", time)
        check((2, "A2+d2", 1002), (3, "A3+d3", 1003))
        time += 1
        pipe_keys(pipe2, "e", time)
        check((3, "A3+e3", 1003))
        time = 1000 + 100
        pipe_keys(pipe2, "f", time)
        check()


def test_ordering():
    with join_case("left_join", JoinWindows.of_time_difference_with_no_grace(100)) as (
        pipe1,
        pipe2,
        check,
    ):
        pipe1(0, "A0", 0)
        pipe1(1, "A1", 100)
        check()
        pipe2(1, "a1", 110)
        check((0, "A0+null", 0), (1, "A1+a1", 110))


def test_grace_period():
    with join_case("left_join", JoinWindows.of_time_difference_and_grace(100, 10)) as (
        pipe1,
        pipe2,
        check,
    ):
        time = 0
        pipe_keys(pipe1, "A", time, count=2)
        check()
        time += 101
        pipe_keys(pipe2, "a", time)
        check()
        time += 1100
        pipe2(0, "dummy", time)
        check((0, "A0+null", 0), (1, "A1+null", 0))


def test_windowing():
    with join_case("left_join", JoinWindows.of_time_difference_with_no_grace(100)) as (
        pipe1,
        pipe2,
        check,
    ):
        time = 0
        pipe_keys(pipe1, "A", time, count=2)
        check()
        pipe_keys(pipe2, "a", time)
        check((0, "A0+a0", 0), (1, "A1+a1", 0))
        upper_window_bound(pipe1, pipe2, check)
        lower_window_bound(pipe1, pipe2, check)


def test_should_not_emit_left_join_result_for_asymmetric_window():
    with join_case("left_join", JoinWindows.of_time_difference_with_no_grace(100).before(0)) as (
        pipe1,
        pipe2,
        check,
    ):
        time = 0
        pipe_keys(pipe1, "A", time, count=2, step=1)
        check()
        time += 100
        pipe2(KEYS[0], f"a{KEYS[0]}", time)
        check((0, "A0+a0", 100))
        time += 2
        pipe2(KEYS[1], f"a{KEYS[1]}", time)
        check((1, "A1+null", 1))


def upper_window_bound(pipe1, pipe2, check):
    time = 1000
    pipe_keys(pipe2, "b", time, step=1)
    check()
    time = 1000 + 100
    pipe_keys(pipe1, "B", time)
    check((0, "B0+b0", 1100), (1, "B1+b1", 1100), (2, "B2+b2", 1100), (3, "B3+b3", 1100))
    time += 1
    pipe_keys(pipe1, "C", time)
    check((1, "C1+b1", 1101), (2, "C2+b2", 1101), (3, "C3+b3", 1101))
    time += 1
    pipe_keys(pipe1, "D", time)
    check((2, "D2+b2", 1102), (3, "D3+b3", 1102))
    time += 1
    pipe_keys(pipe1, "E", time)
    check((3, "E3+b3", 1103))
    time += 1
    pipe_keys(pipe1, "F", time)
    check()
    time += 301
    pipe1(0, "dummy", time)
    check(
        (0, "C0+null", 1101),
        (0, "D0+null", 1102),
        (1, "D1+null", 1102),
        (0, "E0+null", 1103),
        (1, "E1+null", 1103),
        (2, "E2+null", 1103),
        (0, "F0+null", 1104),
        (1, "F1+null", 1104),
        (2, "F2+null", 1104),
        (3, "F3+null", 1104),
    )


def lower_window_bound(pipe1, pipe2, check):
    time = 1000 - 100 - 1
    pipe_keys(pipe1, "G", time)
    check((0, "G0+null", 899), (1, "G1+null", 899), (2, "G2+null", 899), (3, "G3+null", 899))
    time += 1
    pipe_keys(pipe1, "H", time)
    check((0, "H0+b0", 1000), (1, "H1+null", 900), (2, "H2+null", 900), (3, "H3+null", 900))
    time += 1
    pipe_keys(pipe1, "I", time)
    check((0, "I0+b0", 1000), (1, "I1+b1", 1001), (2, "I2+null", 901), (3, "I3+null", 901))
    time += 1
    pipe_keys(pipe1, "J", time)
    check((0, "J0+b0", 1000), (1, "J1+b1", 1001), (2, "J2+b2", 1002), (3, "J3+null", 902))
    time += 1
    pipe_keys(pipe1, "K", time)
    check((0, "K0+b0", 1000), (1, "K1+b1", 1001), (2, "K2+b2", 1002), (3, "K3+b3", 1003))
    pipe1(0, "dummy", time + 300)
    check((0, "dummy+null", 1203))


def test_left_join_with_default_suppliers():
    with join_case("left_join", JoinWindows.of_time_difference_with_no_grace(100)) as (
        pipe1,
        pipe2,
        check,
    ):
        pipe_keys(pipe1, "A", count=2)
        check()
        pipe_keys(pipe2, "a", count=2)
        check((0, "A0+a0", 0), (1, "A1+a1", 0))
        pipe_keys(pipe1, "B", count=3)
        check((0, "B0+a0", 0), (1, "B1+a1", 0))
        pipe_keys(pipe2, "b")
        check((0, "A0+b0", 0), (0, "B0+b0", 0), (1, "A1+b1", 0), (1, "B1+b1", 0), (2, "B2+b2", 0))
        pipe_keys(pipe1, "C")
        check(
            (0, "C0+a0", 0),
            (0, "C0+b0", 0),
            (1, "C1+a1", 0),
            (1, "C1+b1", 0),
            (2, "C2+b2", 0),
            (3, "C3+b3", 0),
        )
        pipe1(0, "dummy", 1000)
        check()
