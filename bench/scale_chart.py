"""The driver-scale chart: the driver's own time per batch against partitions, as a PNG.

Drawn with the standard library alone (``zlib`` and ``struct`` write the PNG, a 5x7 bitmap
font writes the labels): a line chart on log-log axes does not justify matplotlib, NumPy and
Pillow as dependencies, and the benchmark then draws its chart wherever it runs.
"""

from __future__ import annotations

import itertools
import math
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Color = tuple[int, int, int]
WIDTH, HEIGHT = 960, 600
LEFT, RIGHT, TOP, BOTTOM = 90, 250, 60, 70
SCALE = 2  # font pixels per bitmap pixel
WHITE, BLACK, GRID = (255, 255, 255), (40, 40, 40), (222, 222, 222)
#: (log, sub-topologies) -> line color
COLORS: dict[tuple[str, int], Color] = {
    ("kafka", 3): (31, 90, 200),
    ("kafka", 1): (120, 170, 240),
    ("file", 3): (220, 110, 20),
    ("file", 1): (245, 180, 110),
}
#: The targets at 1,024 partitions (ms per batch).
TARGETS = {"kafka": 50.0, "file": 100.0}

_GLYPHS = {
    "0": "01110 10001 10011 10101 11001 10001 01110",
    "1": "00100 01100 00100 00100 00100 00100 01110",
    "2": "01110 10001 00001 00010 00100 01000 11111",
    "3": "11111 00010 00100 00010 00001 10001 01110",
    "4": "00010 00110 01010 10010 11111 00010 00010",
    "5": "11111 10000 11110 00001 00001 10001 01110",
    "6": "00110 01000 10000 11110 10001 10001 01110",
    "7": "11111 00001 00010 00100 01000 01000 01000",
    "8": "01110 10001 10001 01110 10001 10001 01110",
    "9": "01110 10001 10001 01111 00001 00010 01100",
    "a": "00000 00000 01110 00001 01111 10001 01111",
    "b": "10000 10000 10110 11001 10001 10001 11110",
    "c": "00000 00000 01110 10000 10000 10001 01110",
    "d": "00001 00001 01101 10011 10001 10001 01111",
    "e": "00000 00000 01110 10001 11111 10000 01110",
    "f": "00110 01001 01000 11100 01000 01000 01000",
    "g": "00000 01111 10001 10001 01111 00001 01110",
    "h": "10000 10000 10110 11001 10001 10001 10001",
    "i": "00100 00000 01100 00100 00100 00100 01110",
    "j": "00010 00000 00110 00010 00010 10010 01100",
    "k": "10000 10000 10010 10100 11000 10100 10010",
    "l": "01100 00100 00100 00100 00100 00100 01110",
    "m": "00000 00000 11010 10101 10101 10001 10001",
    "n": "00000 00000 10110 11001 10001 10001 10001",
    "o": "00000 00000 01110 10001 10001 10001 01110",
    "p": "00000 00000 11110 10001 11110 10000 10000",
    "q": "00000 00000 01101 10011 01111 00001 00001",
    "r": "00000 00000 10110 11001 10000 10000 10000",
    "s": "00000 00000 01110 10000 01110 00001 11110",
    "t": "01000 01000 11100 01000 01000 01001 00110",
    "u": "00000 00000 10001 10001 10001 10011 01101",
    "v": "00000 00000 10001 10001 10001 01010 00100",
    "w": "00000 00000 10001 10001 10101 10101 01010",
    "x": "00000 00000 10001 01010 00100 01010 10001",
    "y": "00000 00000 10001 10001 01111 00001 01110",
    "z": "00000 00000 11111 00010 00100 01000 11111",
    " ": "00000 00000 00000 00000 00000 00000 00000",
    ",": "00000 00000 00000 00000 01100 00100 01000",
    ".": "00000 00000 00000 00000 00000 01100 01100",
    "-": "00000 00000 00000 11111 00000 00000 00000",
    "(": "00010 00100 01000 01000 01000 00100 00010",
    ")": "01000 00100 00010 00010 00010 00100 01000",
    "=": "00000 00000 11111 00000 11111 00000 00000",
    ":": "00000 01100 01100 00000 01100 01100 00000",
    "/": "00000 00001 00010 00100 01000 10000 00000",
    "<": "00010 00100 01000 10000 01000 00100 00010",
    "'": "00100 00100 01000 00000 00000 00000 00000",
}


class Canvas:
    """An RGB raster with the few drawing operations the chart needs."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(WHITE * (width * height))

    def dot(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            at = (y * self.width + x) * 3
            self.pixels[at : at + 3] = bytes(color)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        for y in range(min(y0, y1), max(y0, y1) + 1):
            for x in range(min(x0, x1), max(x0, x1) + 1):
                self.dot(x, y, color)

    def line(
        self, x0: int, y0: int, x1: int, y1: int, color: Color, width: int = 1, dash: int = 0
    ) -> None:
        """A straight line (Bresenham), ``width`` pixels thick, dashed every ``dash``."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err, step = dx + dy, 0
        while True:
            if not dash or (step // dash) % 2 == 0:
                self.rect(x0, y0, x0 + width - 1, y0 + width - 1, color)
            if x0 == x1 and y0 == y1:
                return
            step += 1
            doubled = 2 * err
            if doubled >= dy:
                err, x0 = err + dy, x0 + sx
            if doubled <= dx:
                err, y0 = err + dx, y0 + sy

    def text(self, x: int, y: int, text: str, color: Color = BLACK) -> None:
        """``text`` (lower case) with its top left corner at (x, y)."""
        for char in text.lower():
            rows = _GLYPHS.get(char, _GLYPHS[" "]).split()
            for row, bits in enumerate(rows):
                for col, bit in enumerate(bits):
                    if bit == "1":
                        self.rect(
                            x + col * SCALE,
                            y + row * SCALE,
                            x + col * SCALE + SCALE - 1,
                            y + row * SCALE + SCALE - 1,
                            color,
                        )
            x += 6 * SCALE

    def png(self) -> bytes:
        raw = b"".join(
            b"\x00" + bytes(self.pixels[y * self.width * 3 : (y + 1) * self.width * 3])
            for y in range(self.height)
        )

        def chunk(kind: bytes, data: bytes) -> bytes:
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


def text_width(text: str) -> int:
    return len(text) * 6 * SCALE


def draw_chart(rows: Iterable[dict[str, Any]], path: Path, target: dict[str, int]) -> None:
    """The driver's own time per batch (median) against partitions at ``target``'s work
    units, one line per log and sub-topology count, with the targets as dashed lines."""
    rows = list(rows)
    counts = {row["work_units"] for row in rows}
    units = target["work_units"] if target["work_units"] in counts or not counts else max(counts)
    series: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for row in rows:
        if row["work_units"] == units and row["driver_ms"] > 0:
            key = (row["log"], row["subtopologies"])
            series.setdefault(key, []).append((row["partitions"], row["driver_ms"]))
    canvas = Canvas(WIDTH, HEIGHT)
    points = [p for values in series.values() for p in values]
    xs = [x for x, _ in points] or [4, 4096]
    ys = [y for _, y in points] + list(TARGETS.values())
    x_lo, x_hi = math.log2(min(xs)), math.log2(max(max(xs), min(xs) * 2))
    y_lo, y_hi = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    if y_hi <= y_lo:
        y_hi = y_lo + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> int:
        return LEFT + round((math.log2(x) - x_lo) / (x_hi - x_lo) * plot_w)

    def py(y: float) -> int:
        return TOP + plot_h - round((math.log10(y) - y_lo) / (y_hi - y_lo) * plot_h)

    for decade in range(y_lo, y_hi + 1):
        y = py(10**decade)
        canvas.line(LEFT, y, LEFT + plot_w, y, GRID)
        label = f"{10**decade:g}" if decade >= 0 else f"{10**decade:.{-decade}f}"
        canvas.text(LEFT - 10 - text_width(label), y - 7, label)
    for x in sorted(set(xs)):
        canvas.line(px(x), TOP, px(x), TOP + plot_h, GRID)
        canvas.text(px(x) - text_width(str(x)) // 2, TOP + plot_h + 10, str(x))
    canvas.line(LEFT, TOP, LEFT, TOP + plot_h, BLACK)
    canvas.line(LEFT, TOP + plot_h, LEFT + plot_w, TOP + plot_h, BLACK)
    for kind, value in TARGETS.items():
        color = COLORS[(kind, 3)]
        canvas.line(LEFT, py(value), LEFT + plot_w, py(value), color, dash=6)
    legend_y = TOP
    for key in sorted(series, key=lambda k: (k[0] != "kafka", -k[1])):
        color = COLORS.get(key, BLACK)
        values = sorted(series[key])
        for (xa, ya), (xb, yb) in itertools.pairwise(values):
            canvas.line(px(xa), py(ya), px(xb), py(yb), color, width=2)
        for x, y in values:
            canvas.rect(px(x) - 3, py(y) - 3, px(x) + 3, py(y) + 3, color)
        log_name = "kafka" if key[0] == "kafka" else "file log"
        canvas.rect(WIDTH - RIGHT + 20, legend_y + 4, WIDTH - RIGHT + 40, legend_y + 8, color)
        canvas.text(WIDTH - RIGHT + 48, legend_y, f"{log_name}, {key[1]} sub")
        legend_y += 24
    for kind, value in TARGETS.items():
        color = COLORS[(kind, 3)]
        canvas.line(WIDTH - RIGHT + 20, legend_y + 6, WIDTH - RIGHT + 40, legend_y + 6, color, 1, 3)
        canvas.text(WIDTH - RIGHT + 48, legend_y, f"target {kind} {value:g}")
        legend_y += 24
    canvas.text(LEFT, 20, f"driver's own time per batch (ms), {units} work units")
    canvas.text(LEFT + plot_w // 2 - text_width("partitions") // 2, HEIGHT - 30, "partitions")
    path.write_bytes(canvas.png())
