"""Foreign-key table joins (KIP-213), as Kafka's foreign-key join processors describe them.

A left update subscribes its row to ``extractor(value)`` through the subscription topic
(keyed by foreign key); the foreign side keeps the subscriptions per (foreign key, primary
key) and answers through the response topic, to the partition the subscription came from.
Each answer names the left value it was made for (here the value's JSON text, where the
product carries a hash of its bytes); the left side drops an answer whose value is no longer
the row's.

What a left update sends (Kafka's ``leftJoinInstructions``/``defaultJoinInstructions``):

- left join, an old value: to the old foreign key, if it differs from the new one, an
  unsubscription, answered (``delete_and_answer``) only when the new foreign key is None
  (a deletion too), else silent (Kafka answers it as well, which races with the new key's
  answer across partitions); then a subscription to the new foreign key, answered with
  None when it has no row.
- left join, no old value: a subscription to the new foreign key (may be None), answered
  with None when it has no row.
- inner join, an old value: a deletion sends ``delete_and_answer`` to the old key (to None:
  ``answer_or_none``); else a silent unsubscription from an old key that differs, and a
  subscription (to None too) answered with None when the key has no row. (Kafka drops these
  updates when the old or the new key is None, leaving a result that is no longer true.)
- inner join, no old value: dropped when the foreign key is None, else a subscription
  answered only when the key has a row.

The answer's timestamp is the larger of the subscription's and the foreign row's; a foreign
update answers every subscriber of its key (in the order of their keys' bytes) at its own
timestamp. An answer joins with the row's current value: None as the foreign value is a
tombstone, except in a left join while the row exists (``joiner(value, None)``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tests.reference.node import Node
from tests.reference.records import Change, Rec
from tests.reference.serdes import key_bytes

if TYPE_CHECKING:
    from tests.reference.task import Task

DELETE_SILENTLY, DELETE_AND_ANSWER = "delete_silently", "delete_and_answer"
ANSWER_OR_NONE, ANSWER_IF_FOUND = "answer_or_none", "answer_if_found"


def _text(value: Any) -> str | None:
    """The form in which a left value is compared (None: no value)."""
    return None if value is None else json.dumps(value, sort_keys=True)


def _to_partition(rec: Rec) -> int | None:
    """Where a subscription without foreign key or an answer goes: its left partition."""
    return None if rec.key is not None else rec.value["partition"]


def _answer_partition(rec: Rec) -> int | None:
    return rec.value["partition"]


class FkSubscribe(Node):
    """``args``: extractor, left (a left join), to_topic (the subscription topic)."""

    def process(self, rec: Rec, task: Task, port: int) -> None:
        change: Change = rec.value
        new, old = change.new, change.old
        extract, left = self.args["extractor"], self.args["left"]
        sends: list[tuple[Any, str]] = []
        if old is not None:
            old_fk = extract(old)
            new_fk = None if new is None else extract(new)
            differs = key_bytes(new_fk) != key_bytes(old_fk)
            if left:
                if old_fk is not None and differs:
                    moved = DELETE_AND_ANSWER if new_fk is None else DELETE_SILENTLY
                    sends.append((old_fk, moved))
                sends.append((new_fk, ANSWER_OR_NONE))
            elif new is None:
                sends.append(
                    (None, ANSWER_OR_NONE) if old_fk is None else (old_fk, DELETE_AND_ANSWER)
                )
            else:
                if old_fk is not None and differs:
                    sends.append((old_fk, DELETE_SILENTLY))
                sends.append((new_fk, ANSWER_OR_NONE))
        elif new is not None:
            new_fk = extract(new)
            if left:
                sends.append((new_fk, ANSWER_OR_NONE))
            elif new_fk is None:
                task.count("dropped-records")
                return
            else:
                sends.append((new_fk, ANSWER_IF_FOUND))
        sink = {"key": "string", "value": "opaque", "partition_to": _to_partition}
        for foreign_key, instruction in sends:
            subscription = {
                "left": _text(new),
                "instruction": instruction,
                "pk": rec.key,
                "partition": task.partition,
            }
            task.write(self.args["to_topic"], rec.but(key=foreign_key, value=subscription), sink)


def _answer(task: Task, topic: str, rec: Rec, subscription: dict, foreign: Any, ts: int) -> None:
    """Send the answer to ``subscription``, made from ``rec``, back to its left partition."""
    response = {"left": subscription["left"], "foreign": foreign,
                "partition": subscription["partition"]}  # fmt: skip
    sink = {"key": "string", "value": "opaque", "partition_to": _answer_partition}
    task.write(topic, rec.but(key=subscription["pk"], value=response, ts=ts), sink)


class FkSubscriptions(Node):
    """The foreign side's subscriptions; ``args``: foreign (the foreign table node), to_topic
    (the response topic)."""

    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        #: (foreign key bytes, primary key bytes) -> (primary key, subscription)
        self.store: dict[tuple[bytes, bytes], tuple[Any, dict]] = {}

    def process(self, rec: Rec, task: Task, port: int) -> None:
        subscription = rec.value
        instruction = subscription["instruction"]
        if rec.key is None:
            if instruction != ANSWER_OR_NONE:
                task.count("dropped-records")
                return
            found = None
        else:
            slot = (key_bytes(rec.key), key_bytes(subscription["pk"]))
            if instruction in (DELETE_SILENTLY, DELETE_AND_ANSWER):
                self.store.pop(slot, None)
            else:
                self.store[slot] = (subscription["pk"], subscription)
            found = task.nodes[self.args["foreign"]].lookup(rec.key)
        if instruction == DELETE_SILENTLY:
            return
        if found is None and instruction == ANSWER_IF_FOUND:
            return
        ts = rec.ts if found is None else max(rec.ts, found[1])
        foreign = None if found is None or instruction == DELETE_AND_ANSWER else found[0]
        _answer(task, self.args["to_topic"], rec, subscription, foreign, ts)

    def subscribers(self, foreign_key: Any) -> list[tuple[Any, dict]]:
        prefix = key_bytes(foreign_key)
        return [entry for (fk, _), entry in sorted(self.store.items()) if fk == prefix]


class FkForeignUpdate(Node):
    """A foreign table update answers its key's subscribers; ``args``: subscriptions (the
    ``FkSubscriptions`` node of the same task), to_topic (the response topic)."""

    def process(self, rec: Rec, task: Task, port: int) -> None:
        if rec.key is None:
            task.count("dropped-records")
            return
        for _, subscription in task.nodes[self.args["subscriptions"]].subscribers(rec.key):
            _answer(task, self.args["to_topic"], rec, subscription, rec.value.new, rec.ts)


class FkResolve(Node):
    """Joins answers with the left row's current value; ``args``: joiner, left (a left
    join), table (the left table node)."""

    def process(self, rec: Rec, task: Task, port: int) -> None:
        found = task.nodes[self.args["table"]].lookup(rec.key)
        current = None if found is None else found[0]
        if _text(current) != rec.value["left"]:
            task.count("dropped-records")
            return
        foreign = rec.value["foreign"]
        if foreign is None and (not self.args["left"] or current is None):
            result = None
        else:
            result = self.args["joiner"](current, foreign)
        self.forward(rec.but(value=result), task)
