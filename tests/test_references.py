"""Docs and docstrings name only files that exist in the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py"))

#: Markdown links to local files: ](path) without a scheme or an anchor-only target.
LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s#]+)")
#: A path inside the repository: starts with one of its top-level folders.
REPO_PATH = re.compile(r"(?<![\w/.:-])((?:docs|src|tests|bench|\.ci)/[\w./-]*\w)")
#: A Markdown file named anywhere (e.g. in a docstring): must be one of the repository's.
MARKDOWN_NAME = re.compile(r"(?<![\w/.-])([\w./-]*\.md)\b")


def _exists(name: str, relative_to: Path) -> bool:
    candidates = [relative_to / name, ROOT / name, ROOT / "docs" / name, ROOT / "src" / name]
    return any(c.exists() for c in candidates)


def _named_files(text: str) -> set[str]:
    return set(REPO_PATH.findall(text)) | set(MARKDOWN_NAME.findall(text))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_name_only_existing_files(doc: Path) -> None:
    text = doc.read_text()
    named = set(LINK.findall(text)) | _named_files(text)
    missing = sorted(n for n in named if not _exists(n, doc.parent))
    assert not missing, f"{doc.relative_to(ROOT)} names missing files: {missing}"


def test_docstrings_and_comments_name_only_existing_files() -> None:
    missing = []
    for source in SOURCES:
        if source == Path(__file__).resolve():
            continue
        for name in _named_files(source.read_text()):
            if not _exists(name, source.parent):
                missing.append(f"{source.relative_to(ROOT)}: {name}")
    assert not missing, "\n".join(missing)


def test_the_checker_notices_a_missing_file(tmp_path: Path) -> None:
    text = "See [the guide](docs/nope.md), `bench/gone.py` and SPEC.md."
    named = set(LINK.findall(text)) | _named_files(text)
    assert named == {"docs/nope.md", "bench/gone.py", "SPEC.md"}
    assert not any(_exists(n, tmp_path) for n in named)
