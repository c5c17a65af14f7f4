"""Every ```python block of README.md and docs/*.md runs.

Each block runs on its own (a fresh namespace) in a temporary directory holding a copy of
`examples/`, with every model pointed at the loopback server (`loopback_model`: deterministic
answers by word overlap, no key, no network). A block that cannot run here says so on a line
containing `doctest: skip` and why (a fragment with names the reader supplies, a real service);
such blocks are still compiled when they are complete Python.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from loopback_model import loopback

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = "doctest: skip"
_FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)


def _blocks() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in _FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append((f"{doc.relative_to(ROOT)}:{line}", m.group(1)))
    return out


BLOCKS = _blocks()


def test_the_docs_have_runnable_snippets() -> None:
    runnable = [where for where, code in BLOCKS if SKIP not in code]
    assert sum(w.startswith("docs/api.md") for w in runnable) >= 5
    assert any(w.startswith("README.md") for w, _ in BLOCKS)  # found, even if a sketch


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_snippet_runs(
    where: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if SKIP in code:
        reason = next(line for line in code.splitlines() if SKIP in line)
        pytest.skip(f"{where}: {reason.strip()}")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    with loopback(monkeypatch):
        exec(compile(code, where, "exec"), {"__name__": "__snippet__"})
