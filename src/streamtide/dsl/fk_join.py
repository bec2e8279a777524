"""Foreign-key table-table joins: ``KTable.join(other, foreign_key_extractor, joiner)`` and
``left_join`` (Kafka's KIP-213, with KIP-775's ``TableJoined`` partitioners).

Each left row is joined with the foreign table's row of ``foreign_key_extractor(value)``.
The two tables need not be co-partitioned: the join sends subscriptions through the internal
topic ``<name>-subscription-registration-topic`` (keyed by foreign key, so co-partitioned with
the foreign table) to a subscription store keyed by (foreign key, primary key), and answers
through ``<name>-subscription-response-topic`` back to the left row's partition (the
partition the subscription came from, or ``TableJoined.partitioner``'s choice). A
subscription is answered with the foreign value when it arrives, and every update of a
foreign key answers all its subscribers. Each answer carries the hash of the left value it
was made for; the left side drops an answer whose hash is no longer its value's (the row
changed since), so the result never goes back to an older value. The operators are in
``dsl.fk_join_operators``, the wire format in ``dsl.fk_wire``.

A row whose foreign key changes unsubscribes from the old one: an inner join's result is
then replaced by the new foreign row's or retracted (a tombstone) if there is none; a left
join's becomes ``joiner(value, None)``. An inner join drops a row whose foreign key is None
(counted in ``dropped-records``); a left join joins it with None. A deleted left row or
foreign row makes a tombstone (a left join keeps ``joiner(value, None)`` for the rows of a
deleted foreign row). A result's timestamp is the larger of the left row's and the foreign
row's, or the foreign update's when the foreign side changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.fk_join_operators import (
    ForeignTableJoinOperator,
    ResponseJoinOperator,
    SubscriptionOperator,
    SubscriptionSendOperator,
)
from streamtide.dsl.fk_wire import Response, ResponseSerde, Subscription, SubscriptionSerde
from streamtide.dsl.params import (
    DEFAULT_STORE_TYPE,
    Materialized,
    Named,
    TableJoined,
    ensure_callable,
    named_of,
)
from streamtide.dsl.table_view import check_lookups
from streamtide.errors import TopologyError
from streamtide.processor.nodes import Partitioner
from streamtide.serde import Serdes
from streamtide.state.stores import KeyValueBytesStoreSupplier, KeyValueStoreBuilder

if TYPE_CHECKING:
    from streamtide.dsl.ktable import KTable


def foreign_key_options(
    *options: Any,
) -> tuple[TableJoined, Materialized | None]:
    """The ``TableJoined``, name and ``Materialized`` given after a foreign-key join's
    joiner, in any order (Kafka's overloads: ``TableJoined``, ``Named``, ``Materialized``)."""
    table_joined, materialized = TableJoined(), None
    for option in options:
        if option is None:
            continue
        if isinstance(option, TableJoined):
            table_joined = (
                option if table_joined.name is None else option.with_name(table_joined.name)
            )
        elif isinstance(option, Materialized):
            materialized = option
        elif isinstance(option, (Named, str)):
            table_joined = table_joined.with_name(named_of(option))  # type: ignore[arg-type]
        else:
            raise TypeError(
                "a foreign-key join takes a TableJoined, a name or a Materialized after its "
                f"joiner, got {option!r}"
            )
    return table_joined, materialized


def _subscription_partitioner(other: Partitioner | None) -> Partitioner:
    """Subscriptions go to their foreign key's partition (``other``'s choice if given); a
    left join's subscription to a None foreign key stays on the partition it came from (it
    touches no store: any partition answers it alike)."""

    def partition(key: Any, value: Subscription, key_bytes: bytes | None, n: int) -> int | None:
        if key is None:
            return None if value.primary_partition is None else value.primary_partition % n
        if other is not None:
            return other(key, None, key_bytes, n)
        return None

    return partition


def _response_partitioner(partitioner: Partitioner | None) -> Partitioner:
    """Answers go back to the partition their subscription came from, or to
    ``partitioner``'s choice for the left key (KIP-775)."""

    def partition(key: Any, value: Response, key_bytes: bytes | None, n: int) -> int | None:
        if partitioner is not None:
            return partitioner(key, None, key_bytes, n)
        return value.primary_partition

    return partition


def foreign_key_join(
    left: KTable,
    foreign: KTable,
    extractor: Callable[[Any], Any],
    joiner: Callable[[Any, Any], Any],
    left_join: bool,
    table_joined: TableJoined,
    materialized: Materialized | None,
) -> KTable:
    """See ``KTable.join`` / ``left_join`` with a foreign-key extractor."""
    from streamtide.dsl.kstream import KStream
    from streamtide.dsl.ktable import KTable
    from streamtide.dsl.table_source import stream_to_table

    ensure_callable(extractor, "foreign_key_extractor")
    ensure_callable(joiner, "joiner")
    if not isinstance(foreign, KTable) or foreign.builder is not left.builder:
        raise TopologyError("a table can only be joined with a KTable of the same StreamsBuilder")
    builder = left.builder
    topology = builder.topology
    base = table_joined.name or builder.new_name("KTABLE-FK-JOIN-")
    subscription_topic = f"{base}-subscription-registration-topic"
    response_topic = f"{base}-subscription-response-topic"
    for topic in (subscription_topic, response_topic):
        if topic in topology.internal_topics:
            raise TopologyError(
                f"internal topic {topic!r} already exists; give this join another name"
            )
        topology.add_internal_topic(topic)
    # Old values: the left side's to unsubscribe from a previous foreign key, the foreign
    # side's as Kafka asks (both tables get a store to be looked up in).
    if not left.origin.enable_sending_old_values(True):
        raise TopologyError(
            f"a foreign-key join needs a left table whose updates carry old values (to "
            f"unsubscribe from a previous foreign key); table {left.node!r} is the result of "
            f"a stream aggregation, which does not send them"
        )
    foreign.origin.enable_sending_old_values(True)
    left_view, foreign_view = left.origin.view(), foreign.origin.view()
    for view in (left_view, foreign_view):
        check_lookups(builder, view, "a foreign-key join")

    send = f"{base}-subscription-registration-processor"
    topology.add_processor(
        send,
        lambda: SubscriptionSendOperator(
            extractor, left_join, left.key_serde, left.value_serde, foreign.key_serde
        ),
        left.node,
    )
    topology.add_sink(
        f"{base}-subscription-registration-sink",
        subscription_topic,
        send,
        key_serde=foreign.key_serde,
        value_serde=SubscriptionSerde(),
        partitioner=_subscription_partitioner(table_joined.other_partitioner),
    )
    subscriptions = f"{base}-subscription-registration-source"
    topology.add_source(
        subscriptions,
        subscription_topic,
        key_serde=foreign.key_serde,
        value_serde=SubscriptionSerde(),
    )
    store_name = f"{base}-subscription-store"
    store = KeyValueStoreBuilder(
        KeyValueBytesStoreSupplier(store_name, DEFAULT_STORE_TYPE),
        Serdes.bytes(),
        Serdes.bytes(),
        timestamped=True,
    )
    receive = f"{base}-subscription-receive"
    topology.add_processor(
        receive,
        lambda: SubscriptionOperator(store_name, foreign_view, left.key_serde, foreign.key_serde),
        subscriptions,
    )
    foreign_join = f"{base}-foreign-join-subscription"
    topology.add_processor(
        foreign_join,
        lambda: ForeignTableJoinOperator(store_name, left.key_serde, foreign.key_serde),
        foreign.node,
    )
    topology.add_state_store(store, receive, foreign_join)
    topology.connect_processor_and_state_stores(receive, *foreign_view.store_names)
    response_serde = ResponseSerde(foreign.value_serde)
    topology.add_sink(
        f"{base}-subscription-response-sink",
        response_topic,
        receive,
        foreign_join,
        key_serde=left.key_serde,
        value_serde=response_serde,
        partitioner=_response_partitioner(table_joined.partitioner),
    )
    responses = f"{base}-subscription-response-source"
    topology.add_source(
        responses, response_topic, key_serde=left.key_serde, value_serde=response_serde
    )
    resolver = f"{base}-subscription-response-resolver"
    topology.add_processor(
        resolver,
        lambda: ResponseJoinOperator(left_view, left.value_serde, joiner, left_join),
        responses,
    )
    topology.connect_processor_and_state_stores(resolver, *left_view.store_names)
    topology.add_copartition_group(
        {*topology.upstream_source_topics(foreign.node), subscription_topic},
        f"foreign-key join {base!r} (subscriptions and the foreign table)",
    )
    topology.add_copartition_group(
        {*topology.upstream_source_topics(left.node), response_topic},
        f"foreign-key join {base!r} (answers and the left table)",
    )
    joined = KStream(builder, resolver, left.key_serde, None, False)
    return stream_to_table(joined, f"{base}-result", materialized)
