"""Environment variables are read in one module (`veritrail.environment`), and its table is the
one docs/running.md shows (issue 15)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from veritrail import environment

SRC = Path(environment.__file__).resolve().parent
DOCS = SRC.parents[1] / "docs" / "running.md"

WHOLE_ENVIRONMENT_READERS = {"redaction.py"}
"""Modules that scan every variable (for secret-looking names, not a `VERITRAIL_` one)."""


def _veritrail_name(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith(environment.PREFIX)
    )


def _is_os_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _violations(path: Path) -> list[str]:
    rel = path.relative_to(SRC).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call):
            func = node.func
            # x.get("VERITRAIL_..."), os.getenv("VERITRAIL_..."), env.pop(...), ...: only
            # `environment.get(...)` may name a variable.
            if (
                isinstance(func, ast.Attribute)
                and func.attr in ("get", "getenv", "pop", "setdefault")
                and node.args
                and _veritrail_name(node.args[0])
                and not (isinstance(func.value, ast.Name) and func.value.id == "environment")
            ):
                found.append(f"{where}: reads {node.args[0].value}")  # type: ignore[attr-defined]
            # click's envvar= reads the variable behind our back.
            for kw in node.keywords:
                if kw.arg in ("envvar", "auto_envvar_prefix") and kw.value is not None:
                    found.append(f"{where}: {kw.arg}=")
            # Handing the whole environment to a reader (`read_env(os.environ)`).
            if rel not in WHOLE_ENVIRONMENT_READERS and any(
                _is_os_environ(a) for a in [*node.args, *(k.value for k in node.keywords)]
            ):
                found.append(f"{where}: passes os.environ")
        elif isinstance(node, ast.Subscript) and _veritrail_name(node.slice):
            found.append(f"{where}: reads {node.slice.value}")  # type: ignore[attr-defined]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "getenv"
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.append(f"{where}: os.getenv")
    return found


def test_no_module_but_environment_reads_a_veritrail_variable() -> None:
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "environment.py" and path.parent == SRC:
            continue
        found += _violations(path)
    assert found == []


def test_the_check_catches_a_direct_read(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os, click\n"
        "a = os.environ.get('VERITRAIL_PROMPT_DIR')\n"
        "env = os.environ\n"
        "b = env['VERITRAIL_MODEL']\n"
        "c = click.option('--x', envvar='VERITRAIL_X')\n"
        "d = read_env(os.environ)\n"
        "e = os.getenv('VERITRAIL_Q')\n",
        encoding="utf-8",
    )
    global SRC
    saved, SRC = SRC, tmp_path
    try:
        found = _violations(bad)
    finally:
        SRC = saved
    assert len(found) >= 5, found


def test_docs_show_the_table() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    assert environment.markdown_table() in docs


def test_every_variable_is_listed_and_read_live(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KeyError):
        environment.get("VERITRAIL_NO_SUCH_VARIABLE")
    monkeypatch.setenv("VERITRAIL_EMBED_THREADS", "3")
    assert environment.get_int("VERITRAIL_EMBED_THREADS", 1) == 3
    monkeypatch.setenv("VERITRAIL_EMBED_THREADS", "")
    assert environment.get_int("VERITRAIL_EMBED_THREADS", 1) == 1
    assert environment.setting_value("q", {"VERITRAIL_Q": "2"}) == "2"
    names = [v.name for v in environment.VARIABLES]
    assert len(names) == len(set(names))
    # Every VERITRAIL_ name the package mentions in its code is in the table or is a setting's.
    from veritrail.run.settings import SETTING_NAMES

    known = set(names) | {environment.setting_variable(n) for n in SETTING_NAMES}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and re.fullmatch(r"VERITRAIL_[A-Z][A-Z_]*", value):
                assert value in known, (path, value)
