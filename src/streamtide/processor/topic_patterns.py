"""Sources that read every topic whose name matches a regular expression (Kafka Streams'
``StreamsBuilder.stream(Pattern)``).

A pattern source has no topics until they are matched against the topics that exist: the
engine does so when it plans, and again before every batch (a new matching topic is read from
the next batch on, its partitions given to tasks by the assignor); the test driver when a
record is piped to a topic the pattern matches. Until then a co-partition group names the
pattern source by a mark that no topic name can have.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from streamtide.errors import TopologyError

#: Stands for a pattern source's topics in a co-partition group (NUL is in no topic name).
_MARK = "\0pattern-source:"


def pattern_mark(source: str) -> str:
    """The mark of pattern source ``source``'s topics in a co-partition group."""
    return _MARK + source


def marked_source(topic: str) -> str | None:
    """The pattern source ``topic`` marks, or None for a real topic name."""
    return topic[len(_MARK) :] if topic.startswith(_MARK) else None


def check_pattern(name: str, pattern: object) -> re.Pattern[str]:
    """``pattern`` as a compiled expression (a ``re.Pattern`` or the text of one)."""
    if isinstance(pattern, re.Pattern):
        return pattern
    if isinstance(pattern, str) and pattern:
        try:
            return re.compile(pattern)
        except re.error as exc:
            raise TopologyError(
                f"source {name!r}: invalid topic pattern {pattern!r}: {exc}"
            ) from exc
    raise TopologyError(
        f"source {name!r}: a topic pattern must be a re.Pattern or a non-empty string, "
        f"got {pattern!r}"
    )


def match_patterns(
    patterns: dict[str, re.Pattern[str]],
    available: Iterable[str],
    taken: dict[str, str],
    excluded: set[str],
) -> dict[str, list[str]]:
    """The topics each pattern source reads: those of ``available`` its pattern matches in
    full, except ``excluded`` (the application's own internal topics) and topics ``taken``
    by named sources. A topic two sources would read is an error, as in Kafka Streams."""
    matched: dict[str, list[str]] = {name: [] for name in patterns}
    owner: dict[str, str] = {}
    for topic in sorted(set(available) - excluded):
        for name, pattern in patterns.items():
            if not pattern.fullmatch(topic):
                continue
            other = taken.get(topic) or owner.get(topic)
            if other is not None:
                raise TopologyError(
                    f"topic {topic!r} matches the pattern {pattern.pattern!r} of source "
                    f"{name!r} and is also read by source {other!r}: a topic can be read by "
                    "one source only"
                )
            owner[topic] = name
            matched[name].append(topic)
    return matched
