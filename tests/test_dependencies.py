"""Every import of the package is declared by the install that uses it.

`deptry src` (run by scripts/test.sh) checks that every third-party module src/veritrail imports
is declared somewhere in pyproject.toml and is not a transitive-only import. This test adds what
deptry cannot know: *which* install a module belongs to. A module of a feature behind an extra
may import that extra's packages (and the core's); every other module may import only the core's
at its top level, and an extra's package only inside a function (so `pip install veritrail` can
import it, and the feature says which extra to install when it is used).
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "veritrail"

# The modules that are a feature behind extras: they may import those extras' packages. A
# module not listed is core. Paths are relative to src/veritrail; a folder covers its modules.
FEATURES: dict[str, tuple[str, ...]] = {
    "lm/local.py": ("local",),
    "lm/local_server.py": ("local",),
    "lm/litellm.py": ("litellm",),
    "runs/view/": ("view",),
    "adapters/graphrag/index.py": ("graphrag",),
    "integrations/langchain.py": ("langchain",),
    "integrations/llamaindex.py": ("llamaindex",),
    "batch/ray_cluster.py": ("ray",),
    "batch/ray_executor.py": ("ray",),
    "batch/ray_worker.py": ("ray",),
    "eval/": ("eval",),
    "detectors/embeddings.py": ("eval", "minilm-st"),
    "detectors/nli.py": ("sirg",),
    "detectors/sirg/": ("sirg",),
    "testing/fixtures.py": ("pytest",),
}

# Core modules that reach a feature's package lazily (inside a function), and the extras that
# may provide it.
LAZY: dict[str, tuple[str, ...]] = {
    "cli/batch.py": ("ray",),
}


PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

# Import name -> distribution where they differ beyond `_` and `-`: deptry's own map.
MODULE_TO_DIST = {
    module: dist for dist, module in PYPROJECT["tool"]["deptry"]["package_module_name_map"].items()
}


def _dist(name: str) -> str:
    return MODULE_TO_DIST.get(name, name).lower().replace("_", "-")


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = PYPROJECT["project"]
    norm = lambda spec: Requirement(spec).name.lower().replace("_", "-")  # noqa: E731
    core = {norm(s) for s in project["dependencies"]}
    extras = {k: {norm(s) for s in v} for k, v in project["optional-dependencies"].items()}
    return core, extras


def _feature(rel: str, table: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    for prefix, extras in table.items():
        if rel == prefix or (prefix.endswith("/") and rel.startswith(prefix)):
            return extras
    return ()


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(top-level module, line, at module level) of each absolute third-party import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(n) for n in tree.body}
    # Imports under `if TYPE_CHECKING:` never run.
    for n in tree.body:
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            top_level.discard(id(n))
            for sub in ast.walk(n):
                top_level.discard(id(sub))
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in ("veritrail", "__future__"):
                continue
            out.append((top, node.lineno, id(node) in top_level))
    return out


def test_every_import_is_declared_by_the_install_of_its_feature() -> None:
    core, extras = _declared()
    wrong: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        feature = _feature(rel, FEATURES)
        lazy = _feature(rel, LAZY)
        for top, line, at_top in _imports(path):
            dist = _dist(top)
            if dist in core:
                continue
            allowed: set[str] = set().union(*(extras[e] for e in feature))
            if dist in allowed:
                continue
            lazily: set[str] = set().union(*(extras[e] for e in lazy))
            if not at_top and dist in lazily:
                continue
            where = f"{rel}:{line}"
            if not any(dist in deps for deps in extras.values()):
                wrong.append(f"{where}: {top} ({dist}) is declared by no install")
            elif feature:
                wrong.append(f"{where}: {top} ({dist}) is not in the extras {feature}")
            elif at_top:
                wrong.append(f"{where}: core module imports {top} ({dist}) at import time")
            else:
                wrong.append(f"{where}: {top} ({dist}) is in no extra this module is mapped to")
    assert not wrong, "\n".join(wrong)


def test_the_feature_table_names_real_modules_and_extras() -> None:
    _, extras = _declared()
    for table in (FEATURES, LAZY):
        for prefix, names in table.items():
            assert (PACKAGE / prefix).exists(), prefix
            assert set(names) <= set(extras), (prefix, names)


def test_the_checker_sees_an_undeclared_import(tmp_path: Path) -> None:
    # The rule above, on a module that imports idna (a package installs bring along through
    # others, as the openai SDK once brought httpx): found, with its line.
    mod = tmp_path / "m.py"
    mod.write_text("import json\n\ndef f():\n    import idna\n", encoding="utf-8")
    assert _imports(mod) == [("idna", 4, False)]
    core, extras = _declared()
    assert "idna" not in core and not any("idna" in d for d in extras.values())
