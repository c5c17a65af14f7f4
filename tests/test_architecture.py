"""docs/architecture.md stays true: every room exists, every module is in a room, imports obey the
layering the page states, and the import graph of the package has no circles where the page says
so."""

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
    # Reads run directories as files: never the run layer (eval reads reviewed runs through it).
    "runs": {
        "runs",
        "report",
        "html",
        "records",
        "dag",
        "outcome",
        "display",
        "errors",
        "environment",
        "redaction",
        "textio",
    },
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


# -- the import graph ------------------------------------------------------------------------------
#
# Nodes are the modules of src/veritrail (a package is its `__init__.py`); there is an edge A -> B
# for every `import B` / `from B import x` / `from A's package import B` in A's file, wherever it
# stands: at the top, inside a function, or under `if TYPE_CHECKING:` (a lazy import is still a
# dependency, and a TYPE_CHECKING one still ties the two modules' designs together). A name
# imported from a module (a class, a function) is an edge to that module.


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(name: str) -> str:
    """The module `name` is or lies in (`veritrail.records.Claim` -> `veritrail.records`)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _targets_in(source: str, package: list[str]) -> set[str]:
    """The veritrail modules imported by `source`, a module of `package` (see the comment
    above)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("veritrail"):
                continue
            for alias in node.names:
                full = f"{mod}.{alias.name}"
                out.add(full if full in MODULES else _resolve(mod))
        elif isinstance(node, ast.Import):
            out.update(_resolve(a.name) for a in node.names if a.name.startswith("veritrail"))
    return out - {""}


def _import_targets(path: Path) -> set[str]:
    package = list(path.relative_to(PKG.parent).with_suffix("").parts)[:-1]
    return _targets_in(path.read_text(encoding="utf-8"), package)


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports (itself left out)."""
    return {m: _import_targets(p) - {m} for m, p in MODULES.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted: every
    import circle lies inside one of them. Edges to modules outside `graph` are ignored."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v] & graph.keys()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_circle_finder_finds_circles_and_nothing_else() -> None:
    graph = {
        "a": {"b"},
        "b": {"c", "x"},  # x is not in the graph: ignored
        "c": {"a"},
        "d": {"a", "e"},
        "e": {"d"},
        "f": {"f", "a"},  # a module importing itself is no circle between modules
    }
    assert import_circles(graph) == [["a", "b", "c"], ["d", "e"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_package() -> None:
    """Every module of src/veritrail, the run, batch and command-line layers included."""
    graph = import_graph()
    assert {
        "veritrail.detectors.base",
        "veritrail.eval.runner",
        "veritrail.records",
        "veritrail.run.job",
        "veritrail.batch.jobs",
        "veritrail.batch.summary",
        "veritrail.api",
        "veritrail.results",
    } <= set(graph)
    circles = import_circles(graph)
    assert not circles, "import circles (cut one edge of each):\n" + "\n".join(
        " <-> ".join(c) for c in circles
    )


def _edges(from_room: str, to_room: str) -> list[str]:
    return sorted(
        f"{MODULES[m].relative_to(PKG)} imports {t}"
        for m, deps in import_graph().items()
        if _room_of(m) == from_room
        for t in deps
        if _room_of(t) == to_room
    )


def test_detectors_never_import_eval() -> None:
    bad = _edges("detectors", "eval")
    assert not bad, (
        "a detector must not import the evaluation that runs it; the labelled records "
        "(GoldClaim, SentenceKey) are in veritrail.records:\n" + "\n".join(bad)
    )


def test_eval_never_imports_run() -> None:
    bad = _edges("eval", "run")
    assert not bad, (
        "the evaluation must not import the run layer; what progress displays share "
        "(CallTotals, fmt_int, fmt_duration) is in veritrail.display:\n" + "\n".join(bad)
    )


def test_results_never_import_run() -> None:
    bad = _edges("results", "run")
    assert not bad, (
        "the report's read-only view must not import the run layer; the exit policy beside the "
        "report is in veritrail.outcome:\n" + "\n".join(bad)
    )


def test_the_graph_sees_lazy_and_type_checking_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from .. import records\n"
        "from .base import Detection\n"
        "if TYPE_CHECKING:\n"
        "    from ..eval.datasets import EvalItem\n"
        "def f():\n"
        "    import veritrail.run.progress\n"
        "    from veritrail.method.segment import SentenceIndex\n"
    )
    assert _targets_in(source, ["veritrail", "detectors"]) == {
        "veritrail.records",  # a module imported from its package is an edge to the module
        "veritrail.detectors.base",
        "veritrail.eval.datasets",
        "veritrail.run.progress",
        "veritrail.method.segment",
    }


def test_run_never_imports_detectors() -> None:
    bad = _edges("run", "detectors")
    assert not bad, (
        "the run layer must not import a detector; the package's own steps named PREFIX:ARG "
        "are found by name (run.plugins.PREFIXED_STEPS):\n" + "\n".join(bad)
    )


def _layers() -> dict[str, int]:
    """Room -> its layer, from docs/architecture.md's "Layers" table."""
    text = DOC.split("## Layers", 1)[1].split("\n## ", 1)[0]
    out: dict[str, int] = {}
    for layer, rooms in re.findall(r"^\| (\d+) \| (.+?) \|$", text, re.MULTILINE):
        for room in re.findall(r"`([a-z_0-9]+)`", rooms):
            out[room] = int(layer)
    return out


def test_every_room_has_a_layer() -> None:
    rooms = {_room_of(m) or "__init__" for m in MODULES}
    missing = rooms - _layers().keys()
    assert not missing, f"rooms without a layer in docs/architecture.md: {sorted(missing)}"


def test_no_import_goes_up_a_layer() -> None:
    """At most one import in the package goes from a lower layer to a higher one (none today)."""
    layer = _layers()
    up = sorted(
        f"{MODULES[m].relative_to(PKG)} (layer {layer[_room_of(m) or '__init__']}) imports {t} "
        f"(layer {layer[_room_of(t) or '__init__']})"
        for m, deps in import_graph().items()
        for t in deps
        if layer.get(_room_of(t) or "__init__", 0) > layer.get(_room_of(m) or "__init__", 0)
    )
    assert len(up) <= 1, "imports from a lower layer to a higher one:\n" + "\n".join(up)
