"""The adaptive batch size controller."""

from __future__ import annotations

from streamtide.engine.batch_size import BatchSizeController


def test_full_fast_batches_double_the_cap_up_to_the_limit() -> None:
    control = BatchSizeController(initial=1_000, limit=5_000, commit_interval_ms=1_000)
    assert [control.observe(100, full=True) for _ in range(4)] == [2_000, 4_000, 5_000, 5_000]


def test_batches_that_are_not_full_keep_the_cap() -> None:
    control = BatchSizeController(initial=1_000, limit=5_000, commit_interval_ms=1_000)
    assert control.observe(10, full=False) == 1_000


def test_slow_batches_halve_the_cap_down_to_the_configured_size() -> None:
    control = BatchSizeController(initial=1_000, limit=8_000, commit_interval_ms=1_000)
    for _ in range(3):
        control.observe(100, full=True)
    assert control.cap == 8_000
    assert [control.observe(2_500, full=True) for _ in range(4)] == [4_000, 2_000, 1_000, 1_000]


def test_between_one_and_two_intervals_the_cap_holds() -> None:
    control = BatchSizeController(initial=1_000, limit=8_000, commit_interval_ms=1_000)
    assert control.observe(1_500, full=True) == 1_000


def test_disabled_controller_never_moves() -> None:
    control = BatchSizeController(1_000, 8_000, 1_000, enabled=False)
    assert control.observe(1, full=True) == 1_000
    assert control.observe(10_000, full=True) == 1_000
