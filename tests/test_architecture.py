"""docs/architecture.md stays true: every room exists, every module is in a room, imports obey the
layering the page states."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "veritrail"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
TABLE = DOC.split("## The rooms", 1)[1].split("\n## ", 1)[0]


def _rooms() -> set[str]:
    """First-column names of the rooms table (`method/`, `report.py`, ...)."""
    names: set[str] = set()
    for line in TABLE.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            names.update(re.findall(r"`([^`]+)`", first))
    return names


def _top_level() -> set[str]:
    out = set()
    for p in PKG.iterdir():
        if p.name.startswith(("_", ".")) and p.name != "__init__.py":
            continue
        if p.is_dir() and (p / "__init__.py").is_file():
            out.add(p.name + "/")
        elif p.suffix == ".py":
            out.add(p.name)
    return out


def test_every_top_level_module_and_package_is_a_listed_room() -> None:
    rooms = _rooms()
    missing = sorted(_top_level() - rooms)
    assert not missing, f"not in docs/architecture.md's table: {missing}"


def test_every_listed_room_exists() -> None:
    gone = sorted(r for r in _rooms() if not (PKG / r.rstrip("/")).exists())
    assert not gone, f"docs/architecture.md names rooms that do not exist: {gone}"


def _rows() -> dict[str, str]:
    """Room folder (`method/`) -> its description cell."""
    out = {}
    for line in TABLE.splitlines():
        cells = line.split("|")
        if len(cells) >= 3 and cells[1].strip().startswith("`"):
            for room in re.findall(r"`([^`]+/)`", cells[1]):
                out[room] = cells[2]
    return out


@pytest.mark.parametrize("room", sorted(_rows()))
def test_each_room_row_names_exactly_its_modules(room: str) -> None:
    """Every public module and subpackage of a room is named in its row."""
    if room in {"cli/", "html/"}:  # one module per command / static assets: described, not listed
        return
    desc = _rows()[room]
    named = set(re.findall(r"`([a-z_0-9]+)/?`", desc))
    folder = PKG / room
    modules = {
        p.stem
        for p in folder.iterdir()
        if (p.suffix == ".py" and not p.name.startswith("_"))
        or (p.is_dir() and (p / "__init__.py").is_file())
    }
    assert not modules - named, f"{room} row does not name {sorted(modules - named)}"


def _imports(path: Path) -> set[str]:
    """Absolute names of the veritrail modules `path` imports."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    pkg = parts[:-1]  # a module's package; for __init__.py, the package itself
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("veritrail"):
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("veritrail"))
    return out


def _room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


ALLOWED = {
    "method": {
        "method",
        "dag",
        "records",
        "errors",
        "fencing",
        "redaction",
        "textio",
        "environment",
        "lm",
    },
    "lm": {"lm", "records", "errors", "fencing", "redaction", "environment", "textio"},
}


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_import_rules(room: str) -> None:
    bad = []
    for f in sorted((PKG / room).rglob("*.py")):
        for mod in _imports(f):
            target = _room_of(mod)
            is_room = (PKG / target).is_dir() or (PKG / f"{target}.py").exists()
            if target and is_room and target not in ALLOWED[room]:
                bad.append(f"{f.relative_to(PKG)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_only_cli_imports_cli() -> None:
    bad = [
        f"{f.relative_to(PKG)} imports {m}"
        for f in sorted(PKG.rglob("*.py"))
        if "cli" not in f.relative_to(PKG).parts[:1]
        for m in _imports(f)
        if _room_of(m) == "cli"
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name", ["fencing.py", "errors.py", "environment.py"])
def test_the_lowest_modules_import_nothing_of_veritrail(name: str) -> None:
    assert not _imports(PKG / name)
