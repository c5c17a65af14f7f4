"""mypy on an install without the optional extras: what `scripts/test-fast.sh` runs in its `.[dev]`
virtualenv.

    python scripts/mypy_without_extras.py        # from any directory; exits with mypy's code

pyproject's `[tool.mypy]` is strict and expects every extra installed (the frameworks' own types:
Starlette, LangChain, LlamaIndex, Ray, LiteLLM): `bash scripts/test.sh` runs it so, unchanged.
Here, the same configuration with two additions, computed from what this environment lacks:

* every top-level package that `src/veritrail` imports and this environment cannot find is
  `ignore_missing_imports` (its names become `Any`);
* the modules of `src/veritrail` that import such a package may subclass, return and keep
  `type: ignore`s about those `Any`s (`disallow_subclassing_any`, `warn_return_any`,
  `warn_unused_ignores` off for them alone).

Every other module is checked exactly as in the full run, so a type error in the core still fails
the quick check; what it cannot see (how veritrail uses a framework it does not have) the full run
checks. Nothing is written but a temporary configuration file.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = "veritrail"

RELAXED = {
    "disallow_subclassing_any": False,
    "warn_return_any": False,
    "warn_unused_ignores": False,
}
"""What a module importing a missing package may do with the `Any`s it gets."""


def imported_packages(path: Path) -> set[str]:
    """Top-level names of the absolute imports in a module (anywhere in it: lazy imports and
    `TYPE_CHECKING` blocks too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def missing_imports() -> tuple[list[str], list[str]]:
    """(the missing top-level packages, the package's modules that import one)."""
    missing: set[str] = set()
    users: list[str] = []
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        lacking = {n for n in imported_packages(path) if n != PACKAGE and not installed(n)}
        if lacking:
            missing |= lacking
            users.append(module_name(path))
    return sorted(missing), users


def ini_value(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def config_text(mypy: dict[str, Any], missing: list[str], users: list[str]) -> str:
    """pyproject's `[tool.mypy]` as an INI file, plus the two additions."""
    main = {k: v for k, v in mypy.items() if k != "overrides"}
    # A cache of its own: the full run's (`.mypy_cache`) stays valid for the full install.
    main["cache_dir"] = ".mypy_cache/without-extras"
    sections: list[tuple[str, dict[str, Any]]] = [("mypy", main)]
    for override in mypy.get("overrides", []):
        modules = override["module"]
        names = modules if isinstance(modules, list) else [modules]
        sections.append(
            ("mypy-" + ",".join(names), {k: v for k, v in override.items() if k != "module"})
        )
    if missing:
        sections.append(
            ("mypy-" + ",".join(f"{m},{m}.*" for m in missing), {"ignore_missing_imports": True})
        )
    if users:
        sections.append(("mypy-" + ",".join(users), RELAXED))
    lines: list[str] = []
    for name, options in sections:
        lines.append(f"[{name}]")
        lines += [f"{key} = {ini_value(value)}" for key, value in options.items()]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    missing, users = missing_imports()
    if missing:
        print(
            f"mypy without {', '.join(missing)} (not installed here): {len(users)} module(s) relaxed"
        )
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "mypy.ini"
        config.write_text(config_text(mypy, missing, users), encoding="utf-8")
        return subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", str(config)], cwd=ROOT, check=False
        ).returncode


if __name__ == "__main__":
    sys.exit(main())
