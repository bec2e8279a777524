"""The driver-scale benchmark's rows and table (``bench/driver_scale.py``)."""

from __future__ import annotations

import statistics
from dataclasses import asdict
from typing import Any


def summarize(
    kind: str, partitions: int, subtopologies: int, units: int, costs: list[Any]
) -> dict[str, Any]:
    """Medians per batch over the measured batches."""

    def median(values: list[float]) -> float:
        return round(statistics.median(values), 3)

    phases = sorted({p for c in costs for p in c.phases_ms})
    return {
        "log": kind,
        "partitions": partitions,
        "subtopologies": subtopologies,
        "work_units": units,
        "batches": len(costs),
        "driver_ms": median([c.own_ms for c in costs]),
        "wall_ms": median([c.wall_ms for c in costs]),
        "wait_ms": median([c.wait_ms for c in costs]),
        "cpu_ms": median([c.cpu_ms for c in costs]),
        "phases_ms": {p: median([c.phases_ms.get(p, 0.0) for c in costs]) for p in phases},
        "phases_cpu_ms": {p: median([c.phases_cpu_ms.get(p, 0.0) for c in costs]) for p in phases},
        "messages": median([c.messages for c in costs]),
        "bytes_sent": median([c.bytes_sent for c in costs]),
        "bytes_received": median([c.bytes_received for c in costs]),
        "fsyncs": median([c.fsyncs for c in costs]),
        "fsync_ms": median([c.fsync_ms for c in costs]),
        "files_written": median([c.files_written for c in costs]),
        "broker_calls": median([c.broker_calls for c in costs]),
        "gc_ms": median([c.gc_ms for c in costs]),
        "rss_mb": max(c.rss_mb for c in costs),
        "raw": [asdict(c) for c in costs],
    }


HEADER = (
    f"{'log':<6}{'parts':>6}{'subs':>5}{'units':>6}{'own ms':>10}{'wall ms':>10}{'wait ms':>9}"
    f"{'cpu ms':>9}{'msgs':>6}{'KB out':>8}{'KB in':>8}{'fsyncs':>8}{'files':>7}{'calls':>7}"
    f"{'RSS MB':>8}  top phases (own ms)"
)


def line(row: dict[str, Any]) -> str:
    top = sorted(row["phases_ms"].items(), key=lambda kv: -kv[1])[:3]
    phases = ", ".join(f"{k} {v:.0f}" for k, v in top)
    return (
        f"{row['log']:<6}{row['partitions']:>6}{row['subtopologies']:>5}{row['work_units']:>6}"
        f"{row['driver_ms']:>10.1f}{row['wall_ms']:>10.1f}{row['wait_ms']:>9.1f}"
        f"{row['cpu_ms']:>9.1f}{row['messages']:>6.0f}{row['bytes_sent'] / 1024:>8.1f}"
        f"{row['bytes_received'] / 1024:>8.1f}{row['fsyncs']:>8.0f}{row['files_written']:>7.0f}"
        f"{row['broker_calls']:>7.0f}{row['rss_mb']:>8.1f}  {phases}"
    )


def growth(rows: list[dict[str, Any]], work_units: int) -> list[str]:
    """Per log and sub-topology count, at ``work_units``: the driver's own time per task and
    batch at each partition count (flat or falling: it grows no worse than linearly)."""
    lines = []
    keys = sorted({(r["log"], r["subtopologies"]) for r in rows})
    for kind, subs in keys:
        points = sorted(
            (r["partitions"], r["driver_ms"])
            for r in rows
            if (r["log"], r["subtopologies"], r["work_units"]) == (kind, subs, work_units)
        )
        if not points:
            continue
        text = ", ".join(f"{p}: {ms * 1000 / (p * subs):.0f}" for p, ms in points)
        lines.append(f"{kind}, {subs} sub-topologies, {work_units} work units, us per task: {text}")
    return lines


def markdown(rows: list[dict[str, Any]], work_units: int) -> list[str]:
    """The table of docs/cluster.md: every point at ``work_units``, then every work-unit
    count at the largest partition count measured with all of them."""
    head = (
        "| log | partitions | sub-topologies | work units | driver's own ms | CPU ms | wait ms "
        "| messages | KB sent / received | fsyncs | files written | broker calls | RSS MB |"
    )
    rule = "|" + "---|" * 13
    lines = [head, rule]

    def cells(r: dict[str, Any]) -> str:
        log_name = "Kafka" if r["log"] == "kafka" else "file"
        return (
            f"| {log_name} | {r['partitions']:,} | {r['subtopologies']} | {r['work_units']} "
            f"| {r['driver_ms']:,.0f} | {r['cpu_ms']:,.0f} | {r['wait_ms']:,.0f} "
            f"| {r['messages']:.0f} | {r['bytes_sent'] / 1024:,.0f} / "
            f"{r['bytes_received'] / 1024:,.0f} | {r['fsyncs']:,.0f} | {r['files_written']:,.0f} "
            f"| {r['broker_calls']:.0f} | {r['rss_mb']:,.0f} |"
        )

    order = sorted(rows, key=lambda r: (r["log"] != "kafka", r["subtopologies"], r["partitions"]))
    lines += [cells(r) for r in order if r["work_units"] == work_units]
    full = [r["partitions"] for r in rows if r["work_units"] != work_units]
    if full:
        lines += ["", head, rule]
        biggest = max(full)
        lines += [
            cells(r)
            for r in sorted(order, key=lambda r: (r["log"] != "kafka", r["subtopologies"]))
            if r["partitions"] == biggest
        ]
    return lines
