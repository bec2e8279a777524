"""Outer stream-stream joins: Kafka's KStreamKStreamOuterJoinTest through the test driver."""

from __future__ import annotations

from streamtide import JoinWindows, Serdes
from tests.dsl.stream_join_support import KEYS, join_case, pipe_keys


def test_outer_join_duplicates():
    with join_case(
        "outer_join", JoinWindows.of_time_difference_and_grace(100, 10), Serdes.long()
    ) as (pipe1, pipe2, check):
        pipe1(0, "A0", 0)
        pipe1(0, "A0-0", 0)
        pipe2(1, 11, 0)
        pipe2(1, 12, 0)
        pipe2(1, 10, 111)
        pipe2(3, 100, 211)
        check((1, "null+11", 0), (1, "null+12", 0), (0, "A0+null", 0), (0, "A0-0+null", 0))
        pipe1(2, "A2", 200)
        pipe1(2, "A2-0", 200)
        pipe2(2, 13, 201)
        pipe2(2, 14, 201)
        check((2, "A2+13", 201), (2, "A2-0+13", 201), (2, "A2+14", 201), (2, "A2-0+14", 201))
        pipe2(3, 100, 1500)
        check((1, "null+10", 111), (3, "null+100", 211))


def test_left_expired_non_joined_records_are_emitted_by_the_left_processor():
    with join_case(
        "outer_join", JoinWindows.of_time_difference_with_no_grace(100), Serdes.long()
    ) as (pipe1, pipe2, check):
        pipe1(0, "A0", 1)
        pipe1(1, "A1", 2)
        pipe1(0, "A0-0", 3)
        check()
        pipe2(1, 11, 3)
        check((1, "A1+11", 3))
        pipe1(2, "dummy", 401)
        check((0, "A0+null", 1), (0, "A0-0+null", 3))
        pipe2(2, 100, 401)
        check((2, "dummy+100", 401))


def test_left_expired_non_joined_records_are_emitted_by_the_right_processor():
    with join_case(
        "outer_join", JoinWindows.of_time_difference_and_grace(100, 0), Serdes.long()
    ) as (pipe1, pipe2, check):
        pipe1(0, "A0", 1)
        pipe1(1, "A1", 2)
        pipe1(0, "A0-0", 3)
        check()
        pipe2(1, 11, 3)
        check((1, "A1+11", 3))
        pipe2(2, 100, 401)
        check((0, "A0+null", 1), (0, "A0-0+null", 3))
        pipe1(2, "dummy", 402)
        check((2, "dummy+100", 402))


def test_right_expired_non_joined_records_are_emitted_by_the_left_processor():
    with join_case(
        "outer_join", JoinWindows.of_time_difference_with_no_grace(100), Serdes.long()
    ) as (pipe1, pipe2, check):
        pipe2(0, 10, 1)
        pipe2(1, 11, 2)
        pipe2(0, 12, 3)
        check()
        pipe1(1, "A1", 3)
        check((1, "A1+11", 3))
        pipe1(2, "dummy", 401)
        check((0, "null+10", 1), (0, "null+12", 3))
        pipe2(2, 100, 402)
        check((2, "dummy+100", 402))


def test_right_expired_non_joined_records_are_emitted_by_the_right_processor():
    with join_case(
        "outer_join", JoinWindows.of_time_difference_and_grace(100, 0), Serdes.long()
    ) as (pipe1, pipe2, check):
        pipe2(0, 10, 1)
        pipe2(1, 11, 2)
        pipe2(0, 12, 3)
        check()
        pipe1(1, "A1", 3)
        check((1, "A1+11", 3))
        pipe2(2, 100, 401)
        check((0, "null+10", 1), (0, "null+12", 3))
        pipe1(2, "dummy", 402)
        check((2, "dummy+100", 402))


def test_ordering():
    with join_case(
        "outer_join", JoinWindows.of_time_difference_with_no_grace(100), Serdes.long()
    ) as (pipe1, pipe2, check):
        pipe1(0, "A0", 0)
        pipe1(1, "A1", 100)
        check()
        pipe2(1, 11, 110)
        check((0, "A0+null", 0), (1, "A1+11", 110))


def test_grace_period():
    with join_case(
        "outer_join", JoinWindows.of_time_difference_and_grace(100, 10), Serdes.long()
    ) as (pipe1, pipe2, check):
        pipe1(0, "A0", 0)
        pipe2(1, 11, 0)
        check()
        pipe1(1, "A1", 101)
        pipe2(0, 10, 101)
        check()
        pipe2(0, 100, 112)
        check((1, "null+11", 0), (0, "A0+null", 0))


def test_emit_all_non_joined_results_for_asymmetric_window():
    with join_case(
        "outer_join", JoinWindows.of_time_difference_with_no_grace(5).after(20), Serdes.long()
    ) as (pipe1, pipe2, check):
        pipe1(0, "A0", 29)
        check()
        pipe1(1, "A1", 30)
        check()
        pipe2(2, 12, 31)
        check()
        pipe2(3, 13, 36)
        check()
        pipe2(4, 14, 37)
        check((2, "null+12", 31))
        pipe2(5, 15, 50)
        check((0, "A0+null", 29), (3, "null+13", 36), (4, "null+14", 37))


def test_windowing():
    with join_case(
        "outer_join", JoinWindows.of_time_difference_with_no_grace(100), Serdes.long()
    ) as (pipe1, pipe2, check):
        time = 0
        pipe_keys(pipe1, "A", time, count=2)
        check()
        for key in KEYS:
            pipe2(key, key + 10, time)
        check((0, "A0+10", 0), (1, "A1+11", 0))
        upper_window_bound(pipe1, pipe2, check)
        lower_window_bound(pipe1, pipe2, check)


def test_should_not_emit_left_join_result_for_asymmetric_before_window():
    with join_case(
        "outer_join", JoinWindows.of_time_difference_with_no_grace(100).before(0), Serdes.long()
    ) as (pipe1, pipe2, check):
        time = 0
        pipe_keys(pipe1, "A", time, count=2, step=1)
        check()
        time += 100
        pipe2(KEYS[0], KEYS[0] + 10, time)
        check((0, "A0+10", 100))
        time += 2
        pipe2(KEYS[1], KEYS[1] + 10, time)
        check((1, "A1+null", 1))
        time += 1
        pipe2(KEYS[2], KEYS[2] + 10, time)
        check((1, "null+11", 102))
        pipe1(KEYS[2], f"A{KEYS[2]}", time)
        check((2, "A2+12", 103))


def test_should_not_emit_left_join_result_for_asymmetric_after_window():
    with join_case(
        "outer_join", JoinWindows.of_time_difference_with_no_grace(100).after(0), Serdes.long()
    ) as (pipe1, pipe2, check):
        time = 0
        pipe_keys(pipe1, "A", time, count=2, step=1)
        check((0, "A0+null", 0))
        time += 1
        pipe2(KEYS[1], KEYS[1] + 10, time)
        check((1, "A1+11", 1))
        time += 100
        pipe2(KEYS[2], KEYS[2] + 10, time)
        check()
        pipe2(KEYS[3], KEYS[3] + 10, time)
        check()
        time += 100
        pipe1(KEYS[2], f"A{KEYS[2]}", time)
        check((2, "A2+12", 201))


def upper_window_bound(pipe1, pipe2, check):
    time = 1000
    for i in range(len(KEYS)):
        pipe2(KEYS[i], KEYS[i] + 20, time + i)
    check((2, "null+12", 0), (3, "null+13", 0))
    time = 1000 + 100
    pipe_keys(pipe1, "B", time)
    check((0, "B0+20", 1100), (1, "B1+21", 1100), (2, "B2+22", 1100), (3, "B3+23", 1100))
    time += 1
    pipe_keys(pipe1, "C", time)
    check((1, "C1+21", 1101), (2, "C2+22", 1101), (3, "C3+23", 1101))
    time += 1
    pipe_keys(pipe1, "D", time)
    check((2, "D2+22", 1102), (3, "D3+23", 1102))
    time += 1
    pipe_keys(pipe1, "E", time)
    check((3, "E3+23", 1103))
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
    check((0, "H0+20", 1000), (1, "H1+null", 900), (2, "H2+null", 900), (3, "H3+null", 900))
    time += 1
    pipe_keys(pipe1, "I", time)
    check((0, "I0+20", 1000), (1, "I1+21", 1001), (2, "I2+null", 901), (3, "I3+null", 901))
    time += 1
    pipe_keys(pipe1, "J", time)
    check((0, "J0+20", 1000), (1, "J1+21", 1001), (2, "J2+22", 1002), (3, "J3+null", 902))
    time += 1
    pipe_keys(pipe1, "K", time)
    check((0, "K0+20", 1000), (1, "K1+21", 1001), (2, "K2+22", 1002), (3, "K3+23", 1003))
    pipe1(0, "dummy", time + 200)
    check((0, "dummy+null", 1103))


def test_outer_join_with_default_suppliers():
    with join_case(
        "outer_join", JoinWindows.of_time_difference_with_no_grace(100), Serdes.long()
    ) as (pipe1, pipe2, check):
        pipe_keys(pipe1, "A", count=2)
        check()
        for i in range(2):
            pipe2(KEYS[i], KEYS[i] + 10)
        check((0, "A0+10", 0), (1, "A1+11", 0))
        pipe_keys(pipe1, "B", count=3)
        check((0, "B0+10", 0), (1, "B1+11", 0))
        for key in KEYS:
            pipe2(key, key + 20)
        check((0, "A0+20", 0), (0, "B0+20", 0), (1, "A1+21", 0), (1, "B1+21", 0), (2, "B2+22", 0))
        pipe_keys(pipe1, "C")
        check(
            (0, "C0+10", 0),
            (0, "C0+20", 0),
            (1, "C1+11", 0),
            (1, "C1+21", 0),
            (2, "C2+22", 0),
            (3, "C3+23", 0),
        )
        pipe1(0, "dummy", 400)
        check()
