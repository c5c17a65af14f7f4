"""Pluggable steps: module:attribute, file.py:attribute and entry points; the example plugin runs
through the real loop; bad specs are refused with a message."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from loopback_model import loopback
from veritrail.dag import load_dag
from veritrail.method.config import VerifyConfig
from veritrail.method.loop import verify_claims
from veritrail.method.steps import Steps
from veritrail.records import Claim, Verdict
from veritrail.run.plugins import (
    GROUP,
    PluginError,
    StepContext,
    apply_steps,
    fingerprints,
    load_step,
    load_steps,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "plugins" / "overlap_steps.py"
QUICKSTART = ROOT / "examples" / "quickstart"


def _claims() -> list[Claim]:
    raw = json.loads((QUICKSTART / "claims.json").read_text(encoding="utf-8"))
    return [Claim(c["id"], c["text"], tuple(c.get("sentence_indices", ()))) for c in raw]


def test_example_plugin_runs_through_the_loop() -> None:
    loaded = load_steps(
        {
            "decomposer": f"{EXAMPLE}:AndDecomposer",
            "selector": f"{EXAMPLE}:OverlapSelector",
            "judge": f"{EXAMPLE}:make_judge",
        }
    )
    assert {k: type(v.step).__name__ for k, v in loaded.items()} == {
        "decomposer": "AndDecomposer",
        "selector": "OverlapSelector",
        "judge": "OverlapJudge",
    }
    steps = Steps(loaded["decomposer"].step, loaded["selector"].step, loaded["judge"].step)
    dag = load_dag(QUICKSTART / "dag.json")
    made_up = Claim("c5", "Scrooge sold the warehouse to Bob Cratchit in Paris.")
    results = asyncio.run(verify_claims(dag, [*_claims(), made_up], steps, VerifyConfig(q=1)))
    verdicts = {r.claim.id: r.verdict for r in results}
    assert verdicts.pop("c5") == Verdict.NOT_FULLY_SUPPORTED
    assert verdicts == dict.fromkeys(("c1", "c2", "c3", "c4"), Verdict.FULLY_SUPPORTED)
    assert all(r.error is None for r in results)
    # The judge's reasoning is the plugin's own.
    assert all("of the claim's words found" in r.reasoning for r in results if r.reasoning)
    # Evidence came from the plugin selector (sentences sharing words with the claim).
    assert any(it.evidence for r in results for it in r.iterations)


def test_apply_steps_replaces_only_the_named_steps() -> None:
    base = Steps(object(), object(), object())  # type: ignore[arg-type]
    loaded = {"judge": load_step("judge", f"{EXAMPLE}:OverlapJudge")}
    got = apply_steps(base, loaded)
    assert got.decomposer is base.decomposer and got.selector is base.selector
    assert type(got.judge).__name__ == "OverlapJudge"


def test_module_attribute_and_factory_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_checks.py").write_text(
        "from veritrail.records import Verdict\n"
        "from veritrail.method.steps import VerdictOutcome\n"
        "seen = []\n"
        "class Always:\n"
        "    def __init__(self, ctx):\n"
        "        seen.append(ctx)\n"
        "    async def judge(self, claim, subclaims, evidence, *, sample=0):\n"
        "        return VerdictOutcome(Verdict.FULLY_SUPPORTED, 'always')\n"
        "class Holder:\n"
        "    ready = Always(None)\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    got = load_step("judge", "my_checks:Always")
    mod = sys.modules["my_checks"]
    assert isinstance(mod.seen[-1], StepContext) and mod.seen[-1].kind == "judge"
    assert got.source == "my_checks:Always" and len(got.digest) == 16
    assert load_step("judge", "my_checks:Holder.ready").step is mod.Holder.ready  # dotted, ready


def test_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real installed distribution as importlib.metadata sees one: a .dist-info on sys.path.
    (tmp_path / "ep_judges.py").write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    info = tmp_path / "ep_judges-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-judges\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\noverlap = ep_judges:make_judge\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    got = load_step("judge", "overlap")
    assert type(got.step).__name__ == "OverlapJudge"
    assert got.source == "ep_judges:make_judge (ep-judges 1.2)"
    with pytest.raises(PluginError, match="overlap"):  # the error lists what is installed
        load_step("judge", "no-such-step")


def test_fingerprint_follows_the_plugin_file(tmp_path: Path) -> None:
    f = tmp_path / "plug.py"
    f.write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    a = fingerprints({"judge": load_step("judge", f"{f}:OverlapJudge")})
    f2 = tmp_path / "plug2.py"
    f2.write_text(EXAMPLE.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    b = fingerprints({"judge": load_step("judge", f"{f2}:OverlapJudge")})
    assert a["judge"]["digest"] != b["judge"]["digest"]
    assert a["judge"]["spec"] == f"{f}:OverlapJudge"


@pytest.mark.parametrize(
    ("kind", "spec", "message"),
    [
        ("judge", "no_such_module_xyz:Judge", "cannot import plugin module"),
        ("judge", "veritrail.records:NoSuchThing", "has no attribute"),
        ("judge", "missing/file.py:Judge", "does not exist"),
        ("judge", "veritrail.records:Verdict", "does not implement the judge protocol"),
        ("selector", f"{EXAMPLE}:OverlapJudge", "does not implement the selector protocol"),
        ("decomposer", "nli:/tmp/x", "is a judge"),
        ("judge", "nli:/nonexistent/model", "no config.json"),
        ("judge", "  ", "empty"),
        ("verifier", "x:y", "unknown step kind"),
    ],
)
def test_bad_specs_are_refused_with_a_message(kind: str, spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_step(kind, spec)


def test_sync_method_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "sync_judge.py"
    f.write_text(
        "class J:\n    def judge(self, claim, subclaims, evidence, *, sample=0):\n        return None\n",
        encoding="utf-8",
    )
    with pytest.raises(PluginError, match="async def judge"):
        load_step("judge", f"{f}:J")


def test_plugin_import_error_is_a_plugin_error(tmp_path: Path) -> None:
    f = tmp_path / "broken.py"
    f.write_text("raise RuntimeError('boom')\n", encoding="utf-8")
    with pytest.raises(PluginError, match="failed to import: RuntimeError: boom"):
        load_step("judge", f"{f}:J")


# -- the command line ------------------------------------------------------------------------------


def _verify(tmp_path: Path, *extra: str) -> tuple[int, str, dict[str, Any] | None]:
    from click.testing import CliRunner

    from veritrail.cli.main import cli

    out = tmp_path / "report.json"
    args = [
        "verify",
        str(QUICKSTART / "dag.json"),
        "--claims",
        str(QUICKSTART / "claims.json"),
        "--out",
        str(out),
        "--run-dir",
        str(tmp_path / "run"),
        *extra,
    ]
    res = CliRunner().invoke(cli, args)
    report = json.loads(out.read_text(encoding="utf-8")) if out.exists() else None
    return res.exit_code, res.output, report


def test_cli_judge_plugin_with_the_loopback_model_for_the_other_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with loopback(monkeypatch) as srv:
        code, out, report = _verify(tmp_path, "--judge", f"{EXAMPLE}:make_judge")
        prompts = [m["content"] for r in srv.requests for m in r["messages"]]
    assert code == 0, out
    assert report is not None
    assert all("of the claim's words found" in c["reasoning"] for c in report["claims"])
    assert not any(
        p.startswith("Evidence:") or "\nEvidence:\n" in p for p in prompts
    )  # no LM verdict
    assert any(p.startswith("Excerpts") for p in prompts)  # the LM selector ran
    run = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    plug = run["config"]["step_plugins"]["judge"]  # part of the run fingerprint
    assert plug["spec"] == f"{EXAMPLE}:make_judge" and len(plug["digest"]) == 16
    assert run["config"]["judge"] == f"{EXAMPLE}:make_judge"
    # Another judge is another run: the same run directory refuses it.
    with loopback(monkeypatch):
        code2, out2, _ = _verify(tmp_path, "--judge", f"{EXAMPLE}:OverlapJudge")
    assert code2 == 2 and "error:" in out2, out2


def test_cli_all_three_plugins_and_settings_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "veritrail.toml").write_text(
        f'decomposer = "{EXAMPLE}:AndDecomposer"\nselector = "{EXAMPLE}:OverlapSelector"\n',
        encoding="utf-8",
    )
    with loopback(monkeypatch) as srv:
        monkeypatch.setenv("VERITRAIL_JUDGE", f"{EXAMPLE}:OverlapJudge")
        code, out, report = _verify(tmp_path)
        assert srv.count == 0  # every step was a plugin: no model call
    assert code == 0, out
    run = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    assert report is not None and set(run["config"]["step_plugins"]) == {
        "decomposer",
        "selector",
        "judge",
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--judge", "no_such_module_xyz:J"), "cannot import plugin module"),
        (("--selector", "nli:/x"), "is a judge"),
        (("--judge", "nope"), "no step named 'nope'"),
        (
            ("--judge", f"{EXAMPLE}:make_judge", "--oracle", str(QUICKSTART / "oracle.json")),
            "--oracle answers every step",
        ),
    ],
)
def test_cli_bad_plugin_is_exit_2_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: tuple[str, ...], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with loopback(monkeypatch) as srv:
        code, out, _ = _verify(tmp_path, *extra)
        assert srv.count == 0
    assert code == 2, out
    assert "error: " in out and message in out and "Traceback" not in out


def test_the_entry_point_group_is_the_published_name() -> None:
    # The group is a contract with installed plugin packages (their pyproject.toml names it), not
    # a module path: moving `veritrail.steps` into `veritrail.method` (issue 15) must not rename it.
    assert GROUP == "veritrail.steps"
