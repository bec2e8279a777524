"""``KTable.suppress`` against the reference: final results of time, session and sliding
windows (``until_window_closes``), and a time limit with a bounded buffer that emits early."""

from __future__ import annotations

from tests.against_reference.inputs import (
    S,
    events,
    on_driver_and_engine,
)
from tests.reference import Plan, SessionWindowSpec, SlidingWindowSpec, SuppressSpec, TimeWindowSpec


def suppress_plan() -> Plan:
    plan = Plan()
    g = plan.stream("in").group_by_key()
    final = SuppressSpec()
    g.windowed_by(TimeWindowSpec(10 * S, grace=3 * S)).count("windows").suppress(
        final
    ).to_stream().to("windows", "windowed", "long")
    g.windowed_by(SessionWindowSpec(4 * S, retention=9 * S)).count("sessions").suppress(
        final
    ).to_stream().to("sessions", "windowed", "long")
    g.windowed_by(SlidingWindowSpec(5 * S, grace=1 * S)).count("sliding").suppress(
        final
    ).to_stream().to("sliding", "windowed", "long")
    g.count("counts").suppress(SuppressSpec(time_limit=4 * S, max_records=2)).to_stream().to(
        "limited", value="long"
    )
    return plan


test_suppress_on_the_test_driver, test_suppress_on_the_engine = on_driver_and_engine(
    "suppress", suppress_plan, events()
)


def suppress_old_values_plan() -> Plan:
    """Filters above and below a time-limited suppress of a count: the buffer keeps old
    values, so neither forwards a tombstone for a key that never passed."""
    plan = Plan()
    counts = plan.stream("in").group_by_key().count("counts")
    limit = SuppressSpec(time_limit=3 * S, max_records=3)
    counts.filter(lambda k, n: n % 2 == 0).suppress(limit).to_stream().to("above", value="long")
    counts.suppress(limit).filter(lambda k, n: n % 3 == 0).to_stream().to("below", value="long")
    return plan


test_old_values_on_the_test_driver, test_old_values_on_the_engine = on_driver_and_engine(
    "suppress-old-values", suppress_old_values_plan, events()
)
