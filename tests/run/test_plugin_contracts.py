"""What a plugin can do wrong never crashes a run nor ends it silently (issue 29, item 6).

* A step that returns something its protocol does not allow (a verdict that is not a `Verdict`,
  a reply that is not a `VerdictOutcome`, a selection that is not a `RawSelection`, parts that are
  not strings) ends that claim in error, the plugin named; the run goes on and exits 3.
* A plugin that calls `sys.exit` — at import, in its factory, or while it runs — is reported: at
  load time it is exit 2 before any model call with one `error:` line naming the plugin; inside a
  step it is the claim's error (exit 3). Never exit 0 with no report.

`verify` and `batch` load plugins through the same code (`run.plugins`), so both are run here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.testing.fake_openai_server import FakeOpenAIServer
from veritrail.testing.overlap import responder

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"

HEADER = (
    "import sys\n"
    "from veritrail.method.steps import RawSelection, VerdictOutcome\n"
    "from veritrail.records import Verdict\n"
)

BAD_RETURNS = {
    "judge": (
        "class J:\n"
        "    async def judge(self, claim, subclaims, evidence, *, sample=0):\n"
        "        return VerdictOutcome('supported', 'looks fine')\n",
        "not a Verdict",
    ),
    "judge-str": (
        "class J:\n"
        "    async def judge(self, claim, subclaims, evidence, *, sample=0):\n"
        "        return 'Fully Supported'\n",
        "not a VerdictOutcome",
    ),
    "selector": (
        "class J:\n"
        "    async def select(self, claim, subclaims, batch, *, sample=0):\n"
        "        return [1, 2]\n",
        "not a RawSelection",
    ),
    "decomposer": (
        "class J:\n    async def decompose(self, claim, text):\n        return [text, 42]\n",
        "not a list of strings",
    ),
}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("VERITRAIL_PRICES", "")
    for kind in ("JUDGE", "SELECTOR", "DECOMPOSER"):
        monkeypatch.delenv(f"VERITRAIL_{kind}", raising=False)


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.output


def plugin(tmp_path: Path, body: str, name: str = "plug.py") -> Path:
    f = tmp_path / name
    f.write_text(HEADER + body, encoding="utf-8")
    return f


def lm(srv: FakeOpenAIServer) -> list[str]:
    return ["--model", "openai/fake", "--base-url", srv.base_url, "--cache", "off"]


def verify(tmp_path: Path, srv: FakeOpenAIServer, *extra: str) -> tuple[int, str]:
    return run(
        "verify", str(QUICKSTART / "dag.json"), "--claims", str(QUICKSTART / "claims.json"),
        *lm(srv), "--run-dir", str(tmp_path / "run"), "--out", str(tmp_path / "report.json"),
        *extra,
    )  # fmt: skip


def manifest(tmp_path: Path, settings: dict[str, str]) -> Path:
    job = {
        "id": "j",
        "dag": str(QUICKSTART / "dag.json"),
        "claims": str(QUICKSTART / "claims.json"),
        "out": str(tmp_path / "reports" / "j.json"),
        "settings": settings,
    }
    m = tmp_path / "manifest.jsonl"
    m.write_text(json.dumps(job) + "\n")
    return m


@pytest.mark.parametrize("case", sorted(BAD_RETURNS))
def test_a_step_returning_the_wrong_thing_is_the_claims_error(tmp_path: Path, case: str) -> None:
    body, message = BAD_RETURNS[case]
    kind = case.split("-")[0]
    spec = f"{plugin(tmp_path, body)}:J"
    with FakeOpenAIServer(responder=responder) as srv:
        code, out = verify(tmp_path, srv, f"--{kind}", spec)
    assert code == 3, out
    assert "Traceback" not in out
    report = json.loads((tmp_path / "report.json").read_text())
    errors = [c for c in report["claims"] if c["termination"] == "error"]
    assert errors  # the claims whose evidence reached the plugged step
    for c in errors:
        assert c["verdict"] is None
        assert spec in c["error"] and kind in c["error"] and message in c["error"], c["error"]
        assert "Traceback" not in c["error"]


def test_the_batch_records_a_bad_verdict_against_the_claim(tmp_path: Path) -> None:
    body, message = BAD_RETURNS["judge"]
    spec = f"{plugin(tmp_path, body)}:J"
    with FakeOpenAIServer(responder=responder) as srv:
        code, out = run("batch", str(manifest(tmp_path, {"judge": spec})), *lm(srv), "--quiet")
    assert code == 3, out
    assert "Traceback" not in out
    report = json.loads((tmp_path / "reports" / "j.json").read_text())
    errors = [c["error"] for c in report["claims"] if c["termination"] == "error"]
    assert errors and all(spec in e and message in e for e in errors)


EXITS = {
    "import": "sys.exit(0)\nclass J:\n    async def judge(self, *a, **k):\n        return None\n",
    "factory": "def J(ctx):\n    sys.exit(0)\n",
}


@pytest.mark.parametrize("where", sorted(EXITS))
@pytest.mark.parametrize("command", ["verify", "batch"])
def test_a_plugin_calling_sys_exit_while_loading_is_exit_2(
    tmp_path: Path, where: str, command: str
) -> None:
    f = plugin(tmp_path, EXITS[where])
    spec = f"{f}:J"
    with FakeOpenAIServer(responder=responder) as srv:
        if command == "verify":
            code, out = verify(tmp_path, srv, "--judge", spec)
        else:
            code, out = run("batch", str(manifest(tmp_path, {"judge": spec})), *lm(srv))
        assert srv.count == 0
    assert code == 2, out
    assert "error: " in out and str(f) in out and "sys.exit" in out, out
    assert "Traceback" not in out


def test_a_judge_calling_sys_exit_ends_only_its_claim(tmp_path: Path) -> None:
    spec = (
        str(
            plugin(
                tmp_path,
                "class J:\n"
                "    async def judge(self, claim, subclaims, evidence, *, sample=0):\n"
                "        sys.exit(0)\n",
            )
        )
        + ":J"
    )
    with FakeOpenAIServer(responder=responder) as srv:
        code, out = verify(tmp_path, srv, "--judge", spec)
    assert code == 3, out
    report: dict[str, Any] = json.loads((tmp_path / "report.json").read_text())
    errors = [c["error"] for c in report["claims"] if c["termination"] == "error"]
    assert errors and all(spec in e and "sys.exit" in e for e in errors)
