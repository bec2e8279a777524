"""The reported exactly-once scenario on real Spark: a clickstream deduplicated into one topic
and counted in user sessions into another, 4 partitions, small batches
(``max_records_per_batch=20``). ``python -m tests.faults.spark_app LOG STATE APP EXECUTION``
runs it in a driver process of its own (a local SparkSession) until caught up, so a harness
can SIGKILL it at any moment and start it again."""

from __future__ import annotations

import sys
from datetime import timedelta

from streamtide import (
    Consumed,
    Deduplicated,
    Materialized,
    Produced,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    StreamsConfig,
    Topology,
)
from tests.engine.scenarios import by_user_key, log_options_for

CLICKS, UNIQUE, SESSIONS = "clicks", "unique-clicks", "session-counts"
PARTITIONS = 4
STRING, JSON, LONG = Serdes.string(), Serdes.json(), Serdes.long()
SESSION_KEY = Serdes.session_windowed(STRING)


def dedup_and_sessions() -> Topology:
    """clicks -> dedup by user and event id -> unique-clicks, and -> session counts per user."""
    builder = StreamsBuilder()
    unique = builder.stream(CLICKS, Consumed.with_(STRING, JSON)).deduplicate_by_key_value(
        lambda user, click: click["event_id"],
        timedelta(seconds=30),
        Deduplicated.as_("unique").with_id_serde(STRING),
    )
    unique.to(UNIQUE, Produced.with_(STRING, JSON, by_user_key))
    (
        unique.group_by_key()
        .windowed_by(SessionWindows.with_inactivity_gap(timedelta(minutes=5)))
        .count(Materialized.as_("sessions"))
        .to_stream()
        .to(SESSIONS, Produced.with_(SESSION_KEY, LONG, by_user_key))
    )
    return builder.build()


def app_config(log_url: str, state_dir: str, app: str, execution: str) -> StreamsConfig:
    return StreamsConfig(
        application_id=app,
        log=log_url,
        log_options=log_options_for(log_url),
        state_dir=state_dir,
        processing_guarantee="exactly_once",
        max_records_per_batch=20,
        adaptive_batch_size=False,
        execution=execution,
        commit_interval=100,
        cache_enabled=False,
    )


def main() -> None:
    """``LOG STATE APP EXECUTION [MASTER] [--forever]``: run until caught up and exit, or
    (``--forever``) keep running batches as input arrives until killed."""
    import time

    from streamtide import StreamsApp
    from streamtide.engine.interop import build_session
    from streamtide.testing.local_cluster import start_local_cluster

    log_url, state_dir, app, execution = sys.argv[1:5]
    master = next((a for a in sys.argv[5:] if not a.startswith("--")), "local[2]")
    if master.startswith("local-cluster"):
        executors = int(master.split("[")[1].split(",")[0])
        spark = start_local_cluster(executors, f"faults-{app}")
    else:
        spark = build_session(master, f"faults-{app}")
    config = app_config(log_url, state_dir, app, execution)
    streams = StreamsApp(dedup_and_sessions(), config, spark=spark)
    if "--forever" in sys.argv:
        while True:
            streams.run_until_caught_up(timeout=600)
            time.sleep(0.05)
    progress = streams.run_until_caught_up(timeout=600)
    streams.stop()
    print(f"caught up after batch {progress[-1].batch if progress else None}", flush=True)


if __name__ == "__main__":
    main()
