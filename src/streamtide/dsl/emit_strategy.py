"""When a windowed aggregation emits (Kafka's KIP-825): on every update, or once per window."""

from __future__ import annotations

import enum


class EmitStrategy(enum.Enum):
    """``on_window_update()`` (the default) emits every change of a window's result;
    ``on_window_close()`` emits each window's final result once, when the window closes
    (time windows at ``stream_time >= end + grace``; sessions once stream time is strictly
    past ``end + gap + grace``), and nothing for windows still open."""

    ON_WINDOW_UPDATE = "on_window_update"
    ON_WINDOW_CLOSE = "on_window_close"

    @classmethod
    def on_window_update(cls) -> EmitStrategy:
        return cls.ON_WINDOW_UPDATE

    @classmethod
    def on_window_close(cls) -> EmitStrategy:
        return cls.ON_WINDOW_CLOSE
