"""The messages between the driver and its long-running work units, as typed records.

Every control message the driver sends (``RunUnits``, ``Settle``, ``Query``, ``Release``,
``Stop``) and every reply a work unit sends back (``UnitsRan``, ``QueryAnswered``,
``Released``, ``Ended``) is a frozen dataclass with a ``KIND`` tag. ``encode`` makes the JSON
object the control channel carries (``{"v": MESSAGES_VERSION, "kind": ..., fields}``) and
``decode`` the record again; a message without ``"v"`` is read as version 1 (the fields have
not changed since messages were plain dicts). Receivers dispatch on the record's type. See
docs/engine.md, "Continuous execution". They live in the runtime, below the engine, so that
both ends can import them.

``StandbyReport`` is what a work unit reports of each standby or warm-up task it updated."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from streamtide.errors import StreamtideError
from streamtide.runtime.store_query import StoreQuery

#: The version of the messages' encoding this release writes (and the newest it reads).
MESSAGES_VERSION = 1


class MessageError(StreamtideError):
    """A control message that is not one this release understands."""


# ---- driver -> work unit -------------------------------------------------------------------


@dataclass(frozen=True)
class RunUnits:
    """Run these work units (one slot's, of one batch); the reply is ``UnitsRan``. Each unit
    is a ``WorkUnitSpec``'s JSON object, read where it runs (a spec that cannot be read fails
    its unit alone, with a failure report)."""

    KIND: ClassVar[str] = "run"
    units: tuple[dict[str, Any], ...]

    def body(self) -> dict[str, Any]:
        return {"units": list(self.units)}

    @classmethod
    def from_body(cls, data: dict[str, Any]) -> RunUnits:
        return cls(tuple(data["units"]))


@dataclass(frozen=True)
class Settle:
    """The sealed stage took these runs (``{task: winning writer id}``); no reply."""

    KIND: ClassVar[str] = "settle"
    winners: dict[str, str]

    def body(self) -> dict[str, Any]:
        return {"winners": dict(self.winners)}

    @classmethod
    def from_body(cls, data: dict[str, Any]) -> Settle:
        return cls({str(t): str(w) for t, w in data["winners"].items()})


@dataclass(frozen=True)
class Query:
    """Answer a store query from the tasks held here; the reply is ``QueryAnswered``."""

    KIND: ClassVar[str] = "query"
    query: StoreQuery

    def body(self) -> dict[str, Any]:
        return {"query": self.query.to_dict()}

    @classmethod
    def from_body(cls, data: dict[str, Any]) -> Query:
        return cls(StoreQuery.from_dict(data["query"]))


@dataclass(frozen=True)
class Release:
    """Keep only these tasks open (the others moved away); the reply is ``Released``."""

    KIND: ClassVar[str] = "release"
    keep: tuple[str, ...]

    def body(self) -> dict[str, Any]:
        return {"keep": list(self.keep)}

    @classmethod
    def from_body(cls, data: dict[str, Any]) -> Release:
        return cls(tuple(str(t) for t in data["keep"]))


@dataclass(frozen=True)
class Stop:
    """End the work unit; no reply but ``Ended``."""

    KIND: ClassVar[str] = "stop"

    def body(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_body(cls, data: dict[str, Any]) -> Stop:
        return cls()


# ---- work unit -> driver -------------------------------------------------------------------


@dataclass(frozen=True)
class UnitsRan:
    """The reports of a ``RunUnits`` (in its order; each a work-unit report or a failure
    report), and what settling cost since the previous run."""

    KIND: ClassVar[str] = "ran"
    reports: tuple[dict[str, Any], ...]
    settle_ms: float = 0.0

    def body(self) -> dict[str, Any]:
        return {"reports": list(self.reports), "settle_ms": self.settle_ms}

    @classmethod
    def from_body(cls, data: dict[str, Any]) -> UnitsRan:
        return cls(tuple(data["reports"]), float(data.get("settle_ms", 0.0)))


@dataclass(frozen=True)
class QueryAnswered:
    """A query's answers (``{task: answer}``), or why the tasks could not answer."""

    KIND: ClassVar[str] = "answered"
    answers: dict[str, Any] | None = None
    error: str | None = None

    def body(self) -> dict[str, Any]:
        return {"error": self.error} if self.error is not None else {"answers": self.answers}

    @classmethod
    def from_body(cls, data: dict[str, Any]) -> QueryAnswered:
        if "error" in data:
            return cls(error=str(data["error"]))
        return cls(answers=dict(data["answers"]))


@dataclass(frozen=True)
class Released:
    """The tasks a ``Release`` closed."""

    KIND: ClassVar[str] = "released"
    tasks: tuple[str, ...]

    def body(self) -> dict[str, Any]:
        return {"released": list(self.tasks)}

    @classmethod
    def from_body(cls, data: dict[str, Any]) -> Released:
        return cls(tuple(str(t) for t in data["released"]))


@dataclass(frozen=True)
class Ended:
    """The work unit ends, and why (its last message, instead of a reply)."""

    KIND: ClassVar[str] = "ended"
    why: str

    def body(self) -> dict[str, Any]:
        return {"ended": self.why}

    @classmethod
    def from_body(cls, data: dict[str, Any]) -> Ended:
        return cls(str(data["ended"]))


#: What the driver sends.
Control = RunUnits | Settle | Query | Release | Stop
#: What a work unit sends back.
Reply = UnitsRan | QueryAnswered | Released | Ended
Message = Control | Reply

_TYPES: dict[str, Any] = {
    t.KIND: t
    for t in (RunUnits, Settle, Query, Release, Stop, UnitsRan, QueryAnswered, Released, Ended)
}
#: Replies of messages without a ``"kind"`` (as they were before they had one): the field
#: each is told apart by.
_UNTAGGED = (("ended", Ended), ("reports", UnitsRan), ("released", Released))


def encode(message: Message) -> dict[str, Any]:
    """The JSON object the control channel carries for ``message``."""
    return {"v": MESSAGES_VERSION, "kind": message.KIND, **message.body()}


def decode_reply(data: dict[str, Any]) -> Reply:
    """A work unit's reply to the driver; MessageError if ``data`` is another message."""
    message = decode(data)
    if not isinstance(message, UnitsRan | QueryAnswered | Released | Ended):
        raise MessageError(f"expected a work unit's reply, got {type(message).__name__}")
    return message


def decode(data: dict[str, Any]) -> Message:
    """The record a JSON object of the control channel stands for; ``MessageError`` if it is
    none this release understands."""
    version = data.get("v", 1)
    if not isinstance(version, int) or version > MESSAGES_VERSION:
        raise MessageError(
            f"control message of version {version!r}: this release reads up to "
            f"{MESSAGES_VERSION} (driver and work units of different releases?)"
        )
    kind = data.get("kind")
    if kind is None:
        kind = next((t.KIND for key, t in _UNTAGGED if key in data), None)
        if kind is None and ("answers" in data or "error" in data):
            kind = QueryAnswered.KIND
    cls = _TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise MessageError(f"unknown control message kind {kind!r}")
    try:
        return cls.from_body(data)  # type: ignore[no-any-return]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MessageError(f"control message {kind!r} is malformed: {exc!r}") from exc


# ---- reports -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StandbyReport:
    """What a work unit did for one standby or warm-up task: its stores' local changelog
    offsets (and their sum, for the assignor), the records it applied, its lag behind the
    committed changelog end and the records it restored."""

    local_offsets: dict[str, int] = field(default_factory=dict)
    offset_sum: int = 0
    applied: int = 0
    lag: int | None = None
    restored_records: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "local_offsets": dict(self.local_offsets),
            "offset_sum": self.offset_sum,
            "applied": self.applied,
            "lag": self.lag,
            "restored_records": self.restored_records,
        }
