"""Step names are spelled once, in `records.Step` (issue 15, point 6): no module spells one as a
bare string where a step is meant (a call's `step=`/`schema_name=`, an issue's step, a
comparison with a `.step`, a constant named like a step)."""

from __future__ import annotations

import ast
from pathlib import Path

from veritrail.records import Step

SRC = Path(__file__).resolve().parents[2] / "src" / "veritrail"
NAMES = {s.value for s in Step}
STEP_CONSTANTS = {"DECOMPOSITION", "EVIDENCE", "VERDICT"}  # run/estimate's short names


def _is_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in NAMES


def _mentions_step(node: ast.AST) -> bool:
    name = getattr(node, "attr", None) or getattr(node, "id", None) or ""
    return isinstance(name, str) and "step" in name.lower()


def _spelled(tree: ast.AST) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("step", "schema_name"):
            if _is_name(node.value):
                out.append((node.value.lineno, f"{node.arg}={node.value.value!r}"))  # type: ignore[attr-defined]
        elif isinstance(node, ast.Call):
            fn = node.func
            called = getattr(fn, "attr", None) or getattr(fn, "id", None)
            if called == "unreadable_issues" and node.args and _is_name(node.args[0]):
                out.append((node.lineno, "unreadable_issues(<bare step name>)"))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_mentions_step(s) for s in sides) and any(_is_name(s) for s in sides):
                out.append((node.lineno, "comparison of a step with a bare name"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if not isinstance(t, ast.Name) or not _is_name(node.value):
                    continue
                if "STEP" in t.id or t.id in STEP_CONSTANTS:
                    out.append((node.lineno, f"{t.id} = {node.value.value!r}"))  # type: ignore[attr-defined]
    return out


def test_no_module_spells_a_step_name_as_a_bare_string() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "records.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(SRC)}:{line}: {what}" for line, what in _spelled(tree)]
    assert found == []


def test_the_checker_finds_what_it_looks_for() -> None:
    sample = ast.parse(
        "STEP = 'verdict'\n"
        "VERDICT = 'verdict'\n"
        "m.generate(x, step='decomposition')\n"
        "GenerateConfig(schema_name='claim_selection')\n"
        "unreadable_issues('evidence_selection', u)\n"
        "if event.step == 'verdict': pass\n"
        # Not step names: a JSON key, a prompt file, a step of another component.
        "d['verdict']\nload_prompt('claim_selection')\nTREE_STEP = 'g2l_tree'\n"
    )
    assert sorted(line for line, _ in _spelled(sample)) == [1, 2, 3, 4, 5, 6]


def test_step_values_are_the_names_of_reports_and_cost_tables() -> None:
    # A StrEnum: the strings in reports, cost tables, issues and run files stay identical.
    assert [s.value for s in Step] == [
        "decomposition",
        "evidence_selection",
        "verdict",
        "claim_selection",
        "claim_disambiguation",
    ]
    assert f"{Step.VERDICT}: try 1" == "verdict: try 1"
    assert {Step.EVIDENCE_SELECTION: 1} == {"evidence_selection": 1}
