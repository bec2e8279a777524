"""``open_log`` URL handling."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamtide.log import DEFAULT_LOG_URL, FileLog, KafkaLog, LogError, log_path, open_log


def test_file_urls_and_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cases = {
        f"file://{tmp_path}/a": tmp_path / "a",
        f"file://localhost{tmp_path}/b": tmp_path / "b",
        "file://./c": tmp_path / "c",
        "file://d": tmp_path / "d",
        "e/f": tmp_path / "e" / "f",
        str(tmp_path / "g"): tmp_path / "g",
        f"file://{tmp_path}/with%20space": tmp_path / "with space",
        None: tmp_path / "streamtide-data",
        "": tmp_path / "streamtide-data",
        DEFAULT_LOG_URL: tmp_path / "streamtide-data",
    }
    for url, expected in cases.items():
        log = open_log(url)
        assert isinstance(log, FileLog)
        assert log.root == str(expected), url
        assert open_log(log.url).root == log.root


def test_home_is_expanded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert log_path("~/x") == os.path.join(str(tmp_path), "x")


def test_options_are_passed_on(tmp_path: Path) -> None:
    log = open_log(str(tmp_path), fsync=False, checkpoint_every=5)
    log.create_topic("t", 1)
    assert log.end_offset("t", 0) == 0
    with pytest.raises(ValueError):
        open_log(str(tmp_path), checkpoint_every=0)


def test_kafka_urls_open_the_kafka_log_without_connecting() -> None:
    log = open_log("kafka://127.0.0.1:9092,broker-2:9093/", **{"security.protocol": "SSL"})
    assert isinstance(log, KafkaLog)
    assert log.url == "kafka://127.0.0.1:9092,broker-2:9093"
    assert log.options == {"security.protocol": "SSL"}
    assert open_log(log.url).url == log.url


@pytest.mark.parametrize(
    "url", ["kafka://", "kafka://host", "kafka://h:0", "kafka://h:x,", "kafka://:9"]
)
def test_bad_kafka_urls(url: str) -> None:
    with pytest.raises(LogError, match="host:port"):
        open_log(url)


def test_kafka_urls_have_no_local_directory() -> None:
    with pytest.raises(LogError, match="no local directory"):
        log_path("kafka://127.0.0.1:9092")


@pytest.mark.parametrize("url", ["s3://bucket/x", "http://x", "file://"])
def test_unsupported_urls(url: str) -> None:
    with pytest.raises(LogError):
        open_log(url)


def test_the_connect_timeout_is_a_log_option_of_its_own() -> None:
    from streamtide.log import LogUnavailableError

    assert KafkaLog("127.0.0.1:1").connect_timeout_s == 10.0  # the default
    log = open_log("kafka://127.0.0.1:1", **{"streamtide.connect.timeout.ms": "300"})
    assert log.connect_timeout_s == 0.3
    with pytest.raises(LogUnavailableError, match=r"^cannot reach Kafka at 127\.0\.0\.1:1 within"):
        log.list_topics()
    for bad in ("soon", 0, -5, True):
        with pytest.raises(LogError, match=r"streamtide\.connect\.timeout\.ms must be a positive"):
            open_log("kafka://127.0.0.1:1", **{"streamtide.connect.timeout.ms": bad})
    with pytest.raises(LogError, match=r"unknown log option 'streamtide\.conect\.timeout\.ms'"):
        open_log("kafka://127.0.0.1:1", **{"streamtide.conect.timeout.ms": 5})
