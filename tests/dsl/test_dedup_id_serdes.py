"""Dedup ids without an id serde: str, int and bytes ids work; other types fail clearly."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from streamtide import (
    Consumed,
    Produced,
    Serdes,
    StreamsBuilder,
    StreamsConfig,
    StreamsProcessingError,
)
from streamtide.dsl.deduplicate import default_id_bytes
from streamtide.testing import TopologyTestDriver

OPERATORS = pytest.mark.parametrize("operator", ["by_key_value", "deduplicate"])
IDS = pytest.mark.parametrize(
    "ids",
    [["a", "a", "b", "a"], [7, 7, 8, 7], [b"a", b"a", b"b", b"a"]],
    ids=["str", "int", "bytes"],
)


def forwarded(operator: str, ids: list[Any]) -> list[int]:
    """Pipe one record per id (value ``n``, the id chosen by ``n``); the forwarded ``n``s."""
    builder = StreamsBuilder()
    stream = builder.stream("input", Consumed.with_(Serdes.string(), Serdes.long()))

    def id_of(_key: str, n: int) -> Any:
        return ids[n]

    method = getattr(
        stream, "deduplicate" if operator == "deduplicate" else f"deduplicate_{operator}"
    )
    method(id_of, timedelta(seconds=10)).to(
        "output", Produced.with_(Serdes.string(), Serdes.long())
    )
    config = StreamsConfig(application_id="dedup-ids")
    with TopologyTestDriver(builder.build(), config) as driver:
        source = driver.create_input_topic("input", Serdes.string(), Serdes.long())
        sink = driver.create_output_topic("output", Serdes.string(), Serdes.long())
        for n in range(len(ids)):
            source.pipe_input("user", n, 1000 + n)
        return sink.read_values()


@OPERATORS
@IDS
def test_ids_of_the_basic_types_need_no_serde(operator: str, ids: list) -> None:
    assert forwarded(operator, ids) == [0, 2]


@OPERATORS
def test_an_id_of_another_type_names_the_operator_and_the_serde_to_set(operator: str) -> None:
    name = "deduplicate" if operator == "deduplicate" else f"deduplicate_{operator}"
    with pytest.raises(StreamsProcessingError) as info:
        forwarded(operator, [1.5, 1.5])
    message = str(info.value)
    assert f"{name}: cannot serialize the dedup id 1.5 of type float" in message
    assert "Deduplicated.with_id_serde(...)" in message
    assert "ids must be str, int or bytes" in message


def test_default_id_bytes_match_the_string_and_long_serdes() -> None:
    assert default_id_bytes("é") == Serdes.string().serialize("é")
    assert default_id_bytes(-3) == Serdes.long().serialize(-3)
    assert default_id_bytes(bytearray(b"x")) == b"x"
    assert default_id_bytes(2**63) is None  # beyond a long: the fallback serde decides
    assert default_id_bytes(True) is None and default_id_bytes(1.5) is None


def test_the_worked_example_of_the_docs_runs_with_str_ids(capsys: pytest.CaptureFixture) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "deduplication.md").read_text()
    example = text.split("## Worked example", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert "with_id_serde" not in example
    exec(compile(example, "docs/deduplication.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert [key for key, _ in ast.literal_eval(lines[0])] == ["alice", "bob", "alice", "carol"]
    assert lines[1] == "1"
