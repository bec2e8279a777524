"""An "executor" for the random-kill runs: runs one work unit read as JSON from stdin and
writes its report as JSON to stdout (``python -m tests.faults.executor_process``)."""

from __future__ import annotations

import json
import sys

from streamtide.log import open_log
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.work_unit import WorkUnitSpec, run_work_unit
from tests.engine.scenarios import session_topology
from tests.faults.driver_process import make_config


def main() -> None:
    message = json.loads(sys.stdin.read())
    config = make_config(message["config"])
    spec = WorkUnitSpec.from_dict(message["spec"])
    log = open_log(config.log)
    report = run_work_unit(session_topology(), config, log, spec, make_task_stores)
    try:
        sys.stdout.write(json.dumps(report))
        sys.stdout.flush()
    except BrokenPipeError:  # the driver that asked was killed meanwhile: nobody listens
        sys.stdout = None  # type: ignore[assignment]  # no second error at interpreter exit


if __name__ == "__main__":
    main()
