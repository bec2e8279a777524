"""``JoinWindows`` and ``StreamJoined``: the options of a stream-stream join.

A record of the left stream at ``t`` joins the right stream's records with the same key whose
timestamps lie in ``[t - before, t + after]`` (so a right record at ``t'`` joins the left
records in ``[t' - after, t' + before]``). ``grace`` is how long after a window's end
out-of-order records are still joined, and how long a left or outer join waits before it
emits a record that found no partner. Both objects are immutable.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from streamtide.errors import TopologyError
from streamtide.serde import Serde
from streamtide.time import Duration, to_millis


def _time_difference(duration: Duration) -> int:
    return to_millis(duration, "time difference")


@dataclass(frozen=True)
class JoinWindows:
    """How far apart in time two records may be to join (Kafka's ``JoinWindows``)."""

    before_ms: int
    after_ms: int
    grace_ms: int = 0

    def __post_init__(self) -> None:
        if self.before_ms + self.after_ms < 0:
            raise ValueError(
                "join window interval (before + after) must not be negative, got "
                f"before={self.before_ms} ms, after={self.after_ms} ms"
            )
        if self.grace_ms < 0:
            raise ValueError(
                f"join window grace period must not be negative, got {self.grace_ms} ms"
            )

    @classmethod
    def of_time_difference_and_grace(
        cls, time_difference: Duration, grace: Duration
    ) -> JoinWindows:
        """Records at most ``time_difference`` apart join; out-of-order records are accepted
        for ``grace`` after a window's end."""
        difference = _time_difference(time_difference)
        return cls(difference, difference, to_millis(grace, "grace period"))

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference: Duration) -> JoinWindows:
        """Records at most ``time_difference`` apart join; no grace period."""
        return cls.of_time_difference_and_grace(time_difference, 0)

    def before(self, time_difference: Duration) -> JoinWindows:
        """How far the other stream's records may lie before this stream's (may be negative
        while ``before + after >= 0``); grace and ``after`` stay."""
        return replace(self, before_ms=_time_difference(time_difference))

    def after(self, time_difference: Duration) -> JoinWindows:
        """How far the other stream's records may lie after this stream's (may be negative
        while ``before + after >= 0``); grace and ``before`` stay."""
        return replace(self, after_ms=_time_difference(time_difference))

    @property
    def size_ms(self) -> int:
        """``before + after``: the width of a join window."""
        return self.before_ms + self.after_ms

    @property
    def retention_ms(self) -> int:
        """How long the join keeps a record for later partners: ``before + after + grace``."""
        return self.size_ms + self.grace_ms


@dataclass(frozen=True)
class StreamJoined:
    """Serdes and names of a stream-stream join's stores and processors.

    ``value_serde`` is the left stream's values, ``other_value_serde`` the right stream's;
    those left None come from the streams (their ``Consumed`` serdes), then the config's
    defaults. ``store_name`` prefixes the store names (``<store_name>-this-join-store``,
    ``-other-join-store``, ``-outer-shared-join-store``), ``name`` the processor names.
    """

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    other_value_serde: Serde | None = None
    name: str | None = None
    store_name: str | None = None
    logging_enabled: bool = True

    @classmethod
    def with_(
        cls,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        other_value_serde: Serde | None = None,
    ) -> StreamJoined:
        return cls(key_serde, value_serde, other_value_serde)

    @classmethod
    def as_(cls, store_name: str) -> StreamJoined:
        return cls(store_name=_non_empty(store_name, "store_name"))

    def with_name(self, name: str) -> StreamJoined:
        return replace(self, name=_non_empty(name, "name"))

    def with_store_name(self, store_name: str) -> StreamJoined:
        return replace(self, store_name=_non_empty(store_name, "store_name"))

    def with_key_serde(self, serde: Serde) -> StreamJoined:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde) -> StreamJoined:
        return replace(self, value_serde=serde)

    def with_other_value_serde(self, serde: Serde) -> StreamJoined:
        return replace(self, other_value_serde=serde)

    def with_logging_disabled(self) -> StreamJoined:
        return replace(self, logging_enabled=False)

    def with_logging_enabled(self) -> StreamJoined:
        return replace(self, logging_enabled=True)


def _non_empty(value: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise TopologyError(f"StreamJoined {what} must be a non-empty string, got {value!r}")
    return value
