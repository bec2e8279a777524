"""A join's inputs must be co-partitioned: the plan checks it, and ``repartition()`` fixes it."""

from __future__ import annotations

import pytest

from streamtide import (
    Consumed,
    JoinWindows,
    Serdes,
    StreamsBuilder,
    StreamsConfig,
    TopologyError,
)
from streamtide.engine.plan import make_plan
from streamtide.log import open_log


def _join(repartition_left: bool):
    builder = StreamsBuilder()
    left = builder.stream("orders", Consumed.with_(Serdes.string(), Serdes.string()))
    right = builder.stream("payments", Consumed.with_(Serdes.string(), Serdes.string()))
    if repartition_left:
        left = left.repartition()
    left.join(right, lambda a, b: a + b, JoinWindows.of_time_difference_with_no_grace(10)).to("out")
    return builder.build()


@pytest.fixture
def log(tmp_path):
    log = open_log(f"file://{tmp_path / 'log'}")
    log.create_topic("orders", 2)
    log.create_topic("payments", 4)
    yield log
    log.close()


def test_a_join_of_topics_with_different_partition_counts_is_refused(log):
    config = StreamsConfig(application_id="copart")
    with pytest.raises(TopologyError) as info:
        make_plan(_join(repartition_left=False), config, log)
    message = str(info.value)
    assert "join KSTREAM-JOINTHIS-" in message and "not co-partitioned" in message
    assert "'orders' has 2" in message and "'payments' has 4" in message
    assert "repartition()" in message


def test_repartition_before_the_join_takes_the_other_sides_partition_count(log):
    config = StreamsConfig(application_id="copart")
    stages = make_plan(_join(repartition_left=True), config, log)
    assert [stage.partitions for stage in stages] == [2, 4]
    assert log.partitions("copart-KSTREAM-REPARTITION-0000000002-repartition") == 4
    assert all(log.partitions(topic) == 4 for topic in stages[1].changelog_topics.values())
