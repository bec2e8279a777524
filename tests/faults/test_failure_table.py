"""docs/engine.md's failure table names, on every line, tests that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def table_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "engine.md").read_text()
    section = text[text.index("## Failures") : text.index("## What Streamtide promises")]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ")]
    return [row for row in rows[1:] if not set(row[0].strip()) <= {"-"}]


def test_every_line_of_the_failure_table_names_existing_tests() -> None:
    rows = table_rows()
    assert len(rows) >= 15
    for what, _, tests in rows:
        refs = re.findall(r"`([^`]+)`", tests)
        assert refs, f"no test named for {what.strip()!r}"
        current = None
        for ref in refs:
            path, _, name = ref.partition("::")
            current = path or current
            source = (ROOT / "tests" / current).read_text()
            if name:
                assert f"def {name.split('[')[0]}(" in source, f"{ref} ({what.strip()!r})"
