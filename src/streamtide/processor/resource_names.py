"""The names a topology's state lives under: its state stores (and so their changelog topics)
and its internal topics (repartition topics).

The DSL names what the user did not name with a running counter
(``KSTREAM-AGGREGATE-STATE-STORE-0000000003``), so adding an operator upstream renames every
later store and topic, and the state under the old names is silently left behind. The engine
records these names in the application directory and compares them at every start
(``name_change_error``); ``explicit_naming_error`` rejects generated names outright (Kafka's
``ensure.explicit.internal.resource.naming``, KIP-1111).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from streamtide.processor.topology import Topology

#: A name (or part of one) the DSL generated: an upper-case prefix and a 10-digit counter.
GENERATED = re.compile(r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*-\d{10}")

_HOW_TO_NAME = (
    "name stores with Materialized.as_(name) (Deduplicated.as_, Suppressed.with_name for "
    "their stores) and repartition topics with Grouped.as_(name), Repartitioned.as_(name) or "
    "Named.as_(name)"
)


@dataclass(frozen=True)
class ResourceNames:
    """Sorted store and internal topic names of a topology (before the application id
    prefix that their physical topics get)."""

    stores: tuple[str, ...]
    topics: tuple[str, ...]

    @classmethod
    def of(cls, topology: Topology) -> ResourceNames:
        return cls(tuple(sorted(topology.store_builders)), tuple(sorted(topology.internal_topics)))

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "stores": list(self.stores), "topics": list(self.topics)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResourceNames:
        return cls(tuple(data["stores"]), tuple(data["topics"]))

    def generated(self) -> tuple[list[str], list[str]]:
        """The stores and topics whose names the DSL generated."""
        return (
            [s for s in self.stores if GENERATED.search(s)],
            [t for t in self.topics if GENERATED.search(t)],
        )


def explicit_naming_error(names: ResourceNames) -> str | None:
    """Why ``ensure_explicit_internal_resource_naming`` rejects the topology, or None."""
    stores, topics = names.generated()
    if not stores and not topics:
        return None
    listed = "; ".join(
        f"{what}: {', '.join(found)}"
        for what, found in (("stores", stores), ("internal topics", topics))
        if found
    )
    return (
        "ensure_explicit_internal_resource_naming is set, but the topology has generated "
        f"names, which change whenever the topology changes ({listed}): {_HOW_TO_NAME}"
    )


def name_change_error(application_id: str, old: ResourceNames, new: ResourceNames) -> str | None:
    """Why a topology must not start over state recorded under ``old``, or None.

    Only names that disappear are refused: a new store or topic loses nothing, but state
    under a name the topology no longer has would be abandoned without a word.
    """
    gone_stores = sorted(set(old.stores) - set(new.stores))
    gone_topics = sorted(set(old.topics) - set(new.topics))
    if not gone_stores and not gone_topics:
        return None
    added_stores = sorted(set(new.stores) - set(old.stores))
    added_topics = sorted(set(new.topics) - set(old.topics))

    def listed(stores: list[str], topics: list[str]) -> str:
        parts = [
            f"{what} {', '.join(names)}"
            for what, names in (("stores", stores), ("internal topics", topics))
            if names
        ]
        return "; ".join(parts) or "none"

    return (
        f"the topology of application {application_id!r} no longer has state it ran with: "
        f"old names {listed(gone_stores, gone_topics)}; new names "
        f"{listed(added_stores, added_topics)}. Starting would abandon that state (a "
        "generated name changes when an operator is added or removed before it). To keep "
        f"it, give the operators their old names explicitly: {_HOW_TO_NAME}. To start anew "
        "under the new names, set allow_topology_name_changes=True "
        "(--allow-topology-name-changes)."
    )
