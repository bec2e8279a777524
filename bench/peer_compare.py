"""Do Streamtide and its peer compute the same thing? Their outputs, normalised: the dedup's
survivors, and each window's final count.

A run's emitted rows come in output order per partition (a key's rows in order): surviving
``[key, event id]``, or ``[key, start, end, count]`` with ``count`` None for a tombstone.
Session outputs are reduced to the sessions still standing at the end: a row replaces every
session of its key it overlaps (a merge emits the merged session; Streamtide also emits
tombstones for the replaced ones, Quix does not), so the two systems' streams of updates
reduce to the same final sessions when they agree. Windows are compared by key and start
(Quix's session end is exclusive, Streamtide's the last record's time).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

Final = dict[tuple[str, int], int]


def final_windows(rows: list[list[Any]]) -> Final:
    """Tumbling windows: the last count of each (key, start)."""
    out: Final = {}
    for key, start, _end, count in rows:
        if count is None:
            out.pop((key, start), None)
        else:
            out[(key, start)] = count
    return out


def final_sessions(rows: list[list[Any]]) -> Final:
    """Sessions: each row replaces the sessions of its key it overlaps (ends inclusive)."""
    by_key: dict[str, dict[int, tuple[int, int]]] = {}
    for key, start, end, count in rows:
        sessions = by_key.setdefault(key, {})
        if count is None:
            if sessions.get(start, (None,))[0] == end:
                del sessions[start]
            continue
        for other in [s for s, (e, _) in sessions.items() if s <= end and start <= e]:
            del sessions[other]
        sessions[start] = (end, count)
    return {(k, s): c for k, sessions in by_key.items() for s, (_, c) in sessions.items()}


def compare(operation: str, mine: list[list[Any]], peer: list[list[Any]]) -> dict[str, Any]:
    """How far Streamtide's outputs (``mine``) and the peer's agree."""
    if operation == "dedup":
        a = Counter((k, i) for k, i in mine)
        b = Counter((k, i) for k, i in peer)
        return {
            "survivors": sum(a.values()),
            "peer_survivors": sum(b.values()),
            "only_streamtide": sum((a - b).values()),
            "only_peer": sum((b - a).values()),
            "agree": a == b,
        }
    final = final_sessions if operation == "session-count" else final_windows
    x, y = final(mine), final(peer)
    both = x.keys() & y.keys()
    differ = sorted(w for w in both if x[w] != y[w])
    return {
        "windows": len(x),
        "peer_windows": len(y),
        "counted": sum(x.values()),
        "peer_counted": sum(y.values()),
        "same_count": len(both) - len(differ),
        "different_count": len(differ),
        "only_streamtide": len(x.keys() - y.keys()),
        "only_peer": len(y.keys() - x.keys()),
        "examples": [[*w, x[w], y[w]] for w in differ[:3]],
        "agree": x == y,
    }


def describe(operation: str, c: dict[str, Any]) -> str:
    """One line saying whether and where the outputs differ."""
    if operation == "dedup":
        return (
            f"survivors: Streamtide {c['survivors']:,}, Quix {c['peer_survivors']:,} "
            f"({'identical' if c['agree'] else 'differ'}: {c['only_streamtide']:,} only in "
            f"Streamtide's, {c['only_peer']:,} only in Quix's)"
        )
    return (
        f"final windows: Streamtide {c['windows']:,} ({c['counted']:,} records counted), Quix "
        f"{c['peer_windows']:,} ({c['peer_counted']:,}); {c['same_count']:,} with the same "
        f"count, {c['different_count']:,} different, {c['only_streamtide']:,} only in "
        f"Streamtide's, {c['only_peer']:,} only in Quix's"
        + ("" if c["agree"] else f"; e.g. (key, start, Streamtide, Quix) {c['examples']}")
    )
