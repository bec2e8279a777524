"""What ``bench latency`` prints: the sweep's table, the highest rate held at each p99
bound, and a run's per-phase breakdown."""

from __future__ import annotations

from typing import Any

from bench.phases import phase_lines


def held(results: list[dict[str, Any]], execution: str, bound_ms: float) -> int | None:
    """The highest rate whose p99 stayed within ``bound_ms`` while the engine kept up (and
    every lower rate's did too)."""
    best = None
    for r in sorted((r for r in results if r["execution"] == execution), key=lambda r: r["rate"]):
        if r["p99_ms"] is None or r["p99_ms"] > bound_ms or not r["kept_up"]:
            break
        best = r["rate"]
    return best


def print_sweep(results: list[dict[str, Any]], executions: list[str]) -> None:
    print(
        f"{'execution':<12}{'rate/s':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'outputs':>10}"
        f"{'batches':>9}{'batch ms':>10}{'rec/batch':>10}{'drain s':>9}"
    )
    for r in results:
        outputs = sum(r["outputs_counted"].values())
        print(
            f"{r['execution']:<12}{r['rate']:>8,}{_f(r['p50_ms'])}{_f(r['p99_ms'])}"
            f"{_f(r['max_ms'])}{outputs:>10,}{r['batches']:>9}{_f(r['mean_batch_ms'], 10)}"
            f"{_f(r['mean_batch_records'], 10)}{r['drain_s']:>9.1f}"
            + ("" if r["kept_up"] else "  (fell behind)")
        )
    for execution in executions:
        within_500, within_1000 = held(results, execution, 500), held(results, execution, 1000)
        print(
            f"{execution}: highest rate held at p99 <= 500 ms: {_rate(within_500)}; "
            f"at p99 <= 1 s: {_rate(within_1000)}"
        )


def _f(value: float | None, width: int = 9) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width},.0f}"


def _rate(rate: int | None) -> str:
    return "none" if rate is None else f"{rate:,} records/s"


def print_breakdown(result: dict[str, Any], slots: int) -> None:
    print(
        f"where a batch's time goes, {result['execution']}, {result['rate']:,} records/s "
        f"({result['batches']} batches, mean {result['mean_batch_ms']} ms, "
        f"{result['mean_batch_records']} records per batch):"
    )
    for line in phase_lines(result["phases_ms"], result["writes_per_batch"], slots):
        print("  " + line)
