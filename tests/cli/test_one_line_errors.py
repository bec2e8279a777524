"""Mistakes a newcomer makes with the installed ``streamtide`` command each get one line (exit
status 1) instead of a stack trace, a long wait, or silence."""

from __future__ import annotations

import subprocess
from pathlib import Path

from streamtide.log import open_log
from tests.cli.installed import command_env, error_lines, streamtide

APP = (
    "from streamtide import StreamsBuilder\n"
    "builder = StreamsBuilder()\n"
    "builder.stream('clicks').to('out')\n"
    "topology = builder.build()\n"
)
FORMS = (
    "local, local[N], local[*], local[N,F], local-cluster[N,C,M], spark://HOST:PORT, yarn, "
    "k8s://https://HOST:PORT"
)


def test_a_bad_spark_master_is_one_line_naming_it_and_the_accepted_forms(tmp_path: Path) -> None:
    (tmp_path / "myapp.py").write_text(APP)
    open_log(f"file://{tmp_path / 'streamtide-data'}").create_topic("clicks", 1)
    flag = streamtide(
        "run", "myapp:topology", "--application-id", "a", "--master", "locl[2]", cwd=tmp_path
    )
    assert flag.returncode == 1
    assert error_lines(flag) == [
        f"Error: --master: master must be a Spark master URL ({FORMS}), got 'locl[2]'"
    ]
    (tmp_path / "app.toml").write_text('application_id = "a"\nmaster = 4\n')
    in_file = streamtide("run", "myapp:topology", "--config", "app.toml", cwd=tmp_path)
    assert in_file.returncode == 1
    assert error_lines(in_file) == [
        f"Error: app.toml: master must be a Spark master URL ({FORMS}), got 4"
    ]
    demo = streamtide("demo", "--master", "mesos://host:5050", "--dir", "d", cwd=tmp_path)
    assert demo.returncode == 1
    (line,) = error_lines(demo)
    assert "got 'mesos://host:5050' (Spark 4 has no Mesos support)" in line


def test_an_unreachable_kafka_broker_is_one_line_after_the_connect_timeout(
    tmp_path: Path,
) -> None:
    def one_line(result: subprocess.CompletedProcess[str], wait: str) -> str:
        assert result.returncode == 1
        (line,) = error_lines(result)
        assert line.startswith(f"Error: cannot reach Kafka at 127.0.0.1:1 within {wait} ("), line
        assert "check that the brokers run" in line and "streamtide.connect.timeout.ms" in line
        assert "KafkaError{" not in line
        return line

    one_line(streamtide("topics", "list", "--log", "kafka://127.0.0.1:1"), "10 s")  # the default
    settings = tmp_path / "client.properties"
    settings.write_text(
        "# a shorter wait than the default 10 s\nstreamtide.connect.timeout.ms=1500\n"
    )
    env = command_env(STREAMTIDE_LOG_CONFIG=str(settings))
    one_line(streamtide("topics", "list", "--log", "kafka://127.0.0.1:1", env=env), "1.5 s")
    (tmp_path / "myapp.py").write_text(APP)
    ran = streamtide(
        "run", "myapp:topology", "--application-id", "a", "--log", "kafka://127.0.0.1:1",
        "--log-option", "streamtide.connect.timeout.ms=1500", cwd=tmp_path,
    )  # fmt: skip
    one_line(ran, "1.5 s")  # before Spark starts: no line of Spark's


def test_listing_topics_of_a_log_that_does_not_exist_says_so(tmp_path: Path) -> None:
    result = streamtide("topics", "list", "--log", "./no-such-log", cwd=tmp_path)
    assert result.returncode == 1
    assert error_lines(result) == [
        f"Error: no log at ./no-such-log: the directory {tmp_path / 'no-such-log'} does not exist "
        "(check --log or $STREAMTIDE_LOG; `streamtide topics create` starts a new log)"
    ]
    assert not (tmp_path / "no-such-log").exists()
    streamtide("topics", "create", "t", "--log", "./log", cwd=tmp_path)
    listed = streamtide("topics", "list", "--log", "./log", cwd=tmp_path)
    assert listed.returncode == 0 and listed.stdout == "t\n"


def test_status_of_an_application_that_never_ran_says_so(tmp_path: Path) -> None:
    log = tmp_path / "log"
    result = streamtide("status", "--application-id", "nosuchapp", "--log", str(log))
    assert result.returncode == 1
    assert error_lines(result) == [
        f"Error: application 'nosuchapp' has never run with the log {log} "
        f"({log / '_apps' / 'nosuchapp'} does not exist); no application ran there"
    ]
    assert not log.exists()  # looking creates nothing
    (log / "_apps" / "clickstats").mkdir(parents=True)
    other = streamtide("status", "--application-id", "clickstat", "--log", str(log))
    assert other.returncode == 1
    assert error_lines(other)[0].endswith("; applications found there: clickstats")
