"""Result rows, ratios, the printed table and ``bench/results/latest.json``."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

SYSTEMS = ("streamtide", "spark-native", "python-ceiling", "python-hand-loop", "log-read")


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100), linearly interpolated between the nearest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    value = ordered[low] + (ordered[high] - ordered[low]) * (position - low)
    return round(value, 1)


@dataclass
class Result:
    """One row: a system running one operation over the workload."""

    system: str
    operation: str
    records: int
    seconds: float | None
    batch_ms: list[float] | None = None
    output_records: int | None = None
    note: str | None = None

    @property
    def records_per_s(self) -> float | None:
        if not self.seconds:
            return None
        return round(self.records / self.seconds, 1)

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "system": self.system,
            "operation": self.operation,
            "records_per_s": self.records_per_s,
            "p50_batch_ms": percentile(self.batch_ms or [], 50),
            "p99_batch_ms": percentile(self.batch_ms or [], 99),
            "seconds": None if self.seconds is None else round(self.seconds, 3),
            "batches": None if self.batch_ms is None else len(self.batch_ms),
            "input_records": self.records,
            "output_records": self.output_records,
        }
        if self.note:
            data["note"] = self.note
        if self.batch_ms is not None:
            data["batch_ms"] = [round(ms, 1) for ms in self.batch_ms]
        return data


def _rate(results: list[Result], system: str, operation: str) -> float | None:
    for r in results:
        if r.system == system and r.operation == operation:
            return r.records_per_s
    return None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def ratios(results: list[Result]) -> dict[str, dict[str, float | None]]:
    """Per operation: Streamtide's records/s over Spark native's, the ceiling's, the hand
    loop's (the pipeline) and the raw log read's (above 1: Streamtide is faster)."""
    read = _rate(results, "log-read", "read")
    out = {}
    for op in dict.fromkeys(r.operation for r in results if r.system == "streamtide"):
        mine = _rate(results, "streamtide", op)
        out[op] = {
            "streamtide_vs_spark_native": _ratio(mine, _rate(results, "spark-native", op)),
            "streamtide_vs_python_ceiling": _ratio(mine, _rate(results, "python-ceiling", op)),
            "streamtide_vs_hand_loop": _ratio(mine, _rate(results, "python-hand-loop", op)),
            "streamtide_vs_log_read": _ratio(mine, read),
        }
    return out


def _fmt(value: float | None, spec: str = ",.0f", suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


def print_table(console: Console, results: list[Result], title: str) -> None:
    """The results as a rich table, Streamtide rows with their ratios."""
    table = Table(title=title, title_justify="left")
    for name, justify in [
        ("system", "left"),
        ("operation", "left"),
        ("records/s", "right"),
        ("p50 batch ms", "right"),
        ("p99 batch ms", "right"),
        ("batches", "right"),
        ("out records", "right"),
        ("ST / Spark", "right"),
        ("ST / ceiling", "right"),
        ("ST / hand loop", "right"),
    ]:
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    by_op = ratios(results)
    order = {s: i for i, s in enumerate(SYSTEMS)}
    for r in sorted(results, key=lambda r: (order.get(r.system, 9), r.operation)):
        row = r.as_json()
        mine = by_op.get(r.operation, {}) if r.system == "streamtide" else {}
        table.add_row(
            r.system,
            r.operation,
            _fmt(row["records_per_s"]),
            _fmt(row["p50_batch_ms"]),
            _fmt(row["p99_batch_ms"]),
            _fmt(row["batches"], ","),
            _fmt(row["output_records"], ","),
            _fmt(mine.get("streamtide_vs_spark_native"), ".2f", "x") if mine else "",
            _fmt(mine.get("streamtide_vs_python_ceiling"), ".3f", "x") if mine else "",
            _fmt(mine.get("streamtide_vs_hand_loop"), ".2f", "x") if mine else "",
        )
    console.print(table)


def print_notes(console: Console, results: list[Result]) -> None:
    """Each distinct note once, after the system and operations it applies to."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for r in results:
        if r.note:
            grouped.setdefault((r.system, r.note), []).append(r.operation)
    for (system, text), operations in grouped.items():
        console.print(f"[bold]{system} {', '.join(operations)}[/]: {escape(text)}", highlight=False)


def write_json(
    path: Path, workload: dict[str, Any], results: list[Result], extra: dict[str, Any]
) -> None:
    """``{"workload": ..., "results": [...], "ratios": ...}`` plus ``extra`` top-level keys."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "workload": workload,
        "results": [r.as_json() for r in results],
        "ratios": ratios(results),
        **extra,
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
