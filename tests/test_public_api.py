"""The supported Python API (docs/api.md, "What is supported"): each module of the table exists,
lists its names in `__all__`, and every name there is importable; the names the table mentions for
a module are in its `__all__`."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _table() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("## What is supported", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `(veritrail[\w.]*)` \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = re.findall(r"`(\w+)`", m.group(2))
    return rows


def test_the_table_is_there() -> None:
    assert "veritrail" in _table() and len(_table()) >= 10


@pytest.mark.parametrize("module", sorted(_table()))
def test_each_supported_module_lists_its_names(module: str) -> None:
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        # An extra `.[dev]` lacks (scripts/test-fast.sh); the full suite fails this skip.
        pytest.skip(f"could not import {module!r}: {exc}")
    names = getattr(mod, "__all__", None)
    assert names, f"{module} has no __all__"
    for name in names:
        assert hasattr(mod, name) or name == "__version__", f"{module}.{name} is not importable"
    for name in _table()[module]:
        assert name in names, f"docs/api.md names {module}.{name}, which is not in its __all__"
