"""``KStream.print``: one ``[label]: key, value`` line per record, to stdout or a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtide import Printed, Serdes, StreamsBuilder, StreamsConfig
from streamtide.testing import TopologyTestDriver

STRING, INT = Serdes.string(), Serdes.int()


def run(printed: Printed) -> None:
    builder = StreamsBuilder()
    builder.stream("in").map_values(lambda v: None if v == 0 else v * 10).print(printed)
    config = StreamsConfig(
        application_id="print", default_key_serde=STRING, default_value_serde=INT
    )
    with TopologyTestDriver(builder.build(), config) as driver:
        inp = driver.create_input_topic("in", STRING, INT)
        inp.pipe_input("a", 1, timestamp=1)
        inp.pipe_input(None, 2, timestamp=2)
        inp.pipe_input("c", 0, timestamp=3)


def test_print_to_sys_out_with_a_label(capsys: pytest.CaptureFixture) -> None:
    run(Printed.to_sys_out().with_label("clicks"))
    assert capsys.readouterr().out == "[clicks]: a, 10\n[clicks]: null, 20\n[clicks]: c, null\n"


def test_the_label_defaults_to_the_node_name(capsys: pytest.CaptureFixture) -> None:
    run(Printed.to_sys_out())
    assert capsys.readouterr().out.splitlines()[0] == "[KSTREAM-PRINTER-0000000002]: a, 10"


def test_print_to_a_file_appends_lines(tmp_path: Path) -> None:
    path = tmp_path / "printed.txt"
    path.write_text("earlier\n")
    run(Printed.to_file(str(path)).with_label("x"))
    assert path.read_text() == "earlier\n[x]: a, 10\n[x]: null, 20\n[x]: c, null\n"


def test_a_key_value_mapper_and_a_name(capsys: pytest.CaptureFixture) -> None:
    printed = Printed.to_sys_out().with_key_value_mapper(lambda k, v: f"{k}={v}")
    run(printed.with_name("show"))
    assert capsys.readouterr().out.splitlines() == [
        "[show]: a=10",
        "[show]: None=20",
        "[show]: c=None",
    ]


def test_print_needs_a_printed() -> None:
    with pytest.raises(TypeError, match="Printed"):
        StreamsBuilder().stream("in").print("stdout")  # type: ignore[arg-type]
