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
    "integrations/langchain_guard.py": ("langchain",),
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


def _module_file(module: str) -> Path | None:
    """src/veritrail/... file of `veritrail.x.y` (a module or a package's __init__)."""
    parts = module.split(".")[1:]
    if not parts:
        return PACKAGE / "__init__.py"
    rel = Path(*parts)
    for candidate in (PACKAGE / rel.with_suffix(".py"), PACKAGE / rel / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _internal_top_level_imports(path: Path) -> list[tuple[str, int]]:
    """(veritrail module, line) of each import of the package that runs when `path` is imported
    (module level, not under `if TYPE_CHECKING:`), relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    package = parts if parts[-1] == "__init__" else parts[:-1]
    if package[-1] == "__init__":
        package = package[:-1]
    out: list[tuple[str, int]] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("veritrail")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("veritrail"):
                mod = node.module
            else:
                continue
            out.append((mod, node.lineno))
            # `from . import x` / `from .pkg import sub`: the names may be modules too.
            out += [(f"{mod}.{a.name}", node.lineno) for a in node.names]
    return out


def test_importing_a_core_module_needs_only_the_core_install() -> None:
    """What a core module imports at import time, followed through the package's own modules,
    never reaches a package of an extra: `veritrail detect` failed on `pip install veritrail`
    because `detectors/registry.py` imported `detectors/embeddings.py`, which imports numpy (the
    eval extra) at its top. A feature module may import its extras: importing it from a core
    module at module level is what is refused (import it inside the function that needs it)."""
    core, _ = _declared()
    files = sorted(PACKAGE.rglob("*.py"))
    edges = {
        path: [
            (target, line)
            for module, line in _internal_top_level_imports(path)
            if (target := _module_file(module)) is not None and target != path
        ]
        for path in files
    }
    heavy = {
        path: sorted(
            {top for top, _, at_top in _imports(path) if at_top and _dist(top) not in core}
        )
        for path in files
    }
    wrong: list[str] = []
    for start in files:
        rel = start.relative_to(PACKAGE).as_posix()
        if _feature(rel, FEATURES):
            continue
        # Breadth-first over import-time imports, keeping one chain to each module reached.
        chain: dict[Path, list[str]] = {start: [rel]}
        queue = [start]
        while queue:
            here = queue.pop(0)
            for target, line in edges[here]:
                if target not in chain:
                    label = f"{target.relative_to(PACKAGE).as_posix()} (line {line})"
                    chain[target] = [*chain[here], label]
                    queue.append(target)
        for reached, path_to in chain.items():
            if heavy[reached]:
                wrong.append(f"{' -> '.join(path_to)} imports {', '.join(heavy[reached])}")
                break
    assert not wrong, "\n".join(wrong)
