"""``streamtide demo --kafka``: the demo on a local Kafka-protocol broker prints the same
exactly-once check as on the embedded log."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from streamtide.cli import main
from tests.kafka_broker import BrokerUnavailable, binary

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_the_demo_runs_on_kafka(spark, tmp_path) -> None:
    try:
        binary()
    except BrokerUnavailable as exc:
        pytest.skip(f"the Kafka test broker cannot start here: {exc}")
    result = CliRunner().invoke(
        main, ["demo", "--kafka", "--users", "12", "--dir", str(tmp_path / "demo")]
    )
    assert result.exit_code == 0, (result.output[-3000:], result.exception)
    assert "broker on 127.0.0.1:" in result.output
    assert "check: every unique click is counted exactly once" in result.output
