"""action.yml, run as GitHub runs a composite action's steps, against a loopback server that
speaks the part of GitHub's REST API the comment uses (list an issue's comments page by page with
`Link` headers, create one, update one; the `Authorization` header checked on every call).

Each `run:` step of action.yml is executed by `bash --noprofile --norc -eo pipefail` (GitHub's
`shell: bash`) with the env the step declares, its `${{ inputs.* }}` and `${{ github.* }}`
expressions resolved from the inputs the test gives and action.yml's defaults, and the files
GitHub provides (`GITHUB_OUTPUT`, `GITHUB_STEP_SUMMARY`). Two steps are not run: the
`uses:` steps (actions/setup-python, the SARIF upload: other people's actions; the test checks
that the upload is handed the SARIF file the verify step wrote) and the `install` step (its pip
install would download; veritrail is installed here already). The pipeline is the quick start
with its oracle: no model, no network but 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner

from veritrail.cigate import comment as comment_mod
from veritrail.cli.main import cli
from veritrail.runs.diffmd import MARKER

yaml = pytest.importorskip("yaml")  # PyYAML: langchain-core's dependency (integrations-dev)

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
QS = ROOT / "examples" / "quickstart"
TOKEN = "ghs_loopbackTEST0123456789abcdefXYZ"
REPO = "octo/pipeline"
PR = 7
PAGE = 2
"""The fake's page size (GitHub's is up to 100): a few comments already need three pages."""
C3 = "Scrooge painted over Marley's name on the warehouse door."


# -- the loopback GitHub -------------------------------------------------------------------------


@dataclass
class FakeGitHub:
    """Issue comments of one repository, and every request received."""

    comments: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    fail_status: int | None = None
    echo_token_in_errors: bool = False
    next_id: int = 1000
    base: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, body: str, login: str) -> dict[str, Any]:
        self.next_id += 1
        c = {
            "id": self.next_id,
            "body": body,
            "user": {"login": login},
            "html_url": f"https://github.test/{REPO}/pull/{PR}#issuecomment-{self.next_id}",
        }
        self.comments.append(c)
        return c


def _handler(gh: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(raw)

        def _handle(self, method: str) -> None:
            url = urlsplit(self.path)
            with gh.lock:
                gh.requests.append((method, self.path))
            auth = self.headers.get("Authorization", "")
            if gh.fail_status is not None:
                msg = "Server Error" + (f" for {auth}" if gh.echo_token_in_errors else "")
                self._send(gh.fail_status, {"message": msg})
                return
            if auth != f"Bearer {TOKEN}":
                self._send(401, {"message": "Bad credentials"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            payload = json.loads(self.rfile.read(length)) if length else None
            list_path = f"/repos/{REPO}/issues/{PR}/comments"
            m = re.fullmatch(rf"/repos/{REPO}/issues/comments/(\d+)", url.path)
            with gh.lock:
                if method == "GET" and url.path == list_path:
                    page = int(parse_qs(url.query).get("page", ["1"])[0])
                    chunk = gh.comments[(page - 1) * PAGE : page * PAGE]
                    headers = {}
                    if page * PAGE < len(gh.comments):
                        nxt = f"{gh.base}{list_path}?per_page={PAGE}&page={page + 1}"
                        headers["Link"] = f'<{nxt}>; rel="next", <{gh.base}{list_path}>; rel="last"'
                    self._send(200, chunk, headers)
                elif method == "POST" and url.path == list_path:
                    self._send(201, gh.add(payload["body"], BOT))
                elif method == "PATCH" and m:
                    found = [c for c in gh.comments if c["id"] == int(m.group(1))]
                    if not found:
                        self._send(404, {"message": "Not Found"})
                        return
                    found[0]["body"] = payload["body"]
                    self._send(200, found[0])
                else:
                    self._send(404, {"message": "Not Found"})

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

    return Handler


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    gh = FakeGitHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(gh))
    gh.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield gh
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# -- running action.yml's steps ------------------------------------------------------------------


def action() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    return doc


_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def resolve(value: object, inputs: Mapping[str, str], context: Mapping[str, Any]) -> str:
    """`${{ inputs.x }}` and `${{ github.a.b }}` in `value`, as GitHub substitutes them; any
    other expression fails the test (the test would no longer run what GitHub runs)."""

    def one(m: re.Match[str]) -> str:
        expr = m.group(1)
        if expr.startswith("inputs."):
            name = expr[len("inputs.") :]
            defaults = action()["inputs"]
            assert name in defaults, f"action.yml uses an undeclared input {name!r}"
            raw = inputs.get(name, str(defaults[name].get("default", "")))
            return resolve(raw, inputs, context)
        assert expr.startswith("github."), f"the test cannot evaluate ${{{{ {expr} }}}}"
        node: Any = context
        for part in expr.split(".")[1:]:
            node = node.get(part, "") if isinstance(node, dict) else ""
        return str(node)

    return _EXPR.sub(one, "" if value is None else str(value))


@dataclass
class StepRun:
    id: str
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]


@dataclass
class ActionRun:
    steps: list[StepRun]
    workspace: Path
    summary: str
    uses: list[dict[str, str]]

    def step(self, step_id: str) -> StepRun:
        (found,) = [s for s in self.steps if s.id == step_id]
        return found

    @property
    def text(self) -> str:
        return "\n".join(s.stdout + s.stderr for s in self.steps)


def base_env(workspace: Path, github: FakeGitHub) -> dict[str, str]:
    drop = ("PROXY", "TOKEN", "GITHUB_", "VERITRAIL_")
    env = {k: v for k, v in os.environ.items() if not any(d in k.upper() for d in drop)}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.update(
        GITHUB_ACTIONS="true",
        GITHUB_ACTION_PATH=str(ROOT),
        GITHUB_WORKSPACE=str(workspace),
        GITHUB_REPOSITORY=REPO,
        GITHUB_API_URL=github.base,
        GITHUB_STEP_SUMMARY=str(workspace.parent / "summary.md"),
        VERITRAIL_CACHE_DIR=str(workspace.parent / "cache"),
        HOME=str(workspace.parent / "home"),
    )
    return env


def run_action(
    workspace: Path, github: FakeGitHub, inputs: Mapping[str, str], *, tag: str
) -> ActionRun:
    """Every step of action.yml in order, as the runner does; stops at a failing step."""
    context = {
        "token": TOKEN,
        "action_path": str(ROOT),
        "repository": REPO,
        "event": {"pull_request": {"number": PR}},
    }
    env0 = base_env(workspace, github)
    runs: list[StepRun] = []
    uses: list[dict[str, str]] = []
    for i, step in enumerate(action()["runs"]["steps"]):
        if "uses" in step:
            uses.append(
                {"uses": step["uses"]}
                | {k: resolve(v, inputs, context) for k, v in (step.get("with") or {}).items()}
            )
            continue
        if step.get("id") == "install":
            assert "pip install" in step["run"]
            continue
        assert step.get("shell") == "bash" and "if" not in step
        out_file = workspace.parent / f"output-{tag}-{i}"
        out_file.write_text("")
        env = dict(env0, GITHUB_OUTPUT=str(out_file))
        env.update({k: resolve(v, inputs, context) for k, v in (step.get("env") or {}).items()})
        assert "${{" not in step["run"], "a run: script must read inputs from env, not ${{ }}"
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        outputs = dict(
            line.split("=", 1) for line in out_file.read_text().splitlines() if "=" in line
        )
        runs.append(StepRun(step.get("id", ""), proc.returncode, proc.stdout, proc.stderr, outputs))
        if proc.returncode != 0:
            break
    summary_file = Path(env0["GITHUB_STEP_SUMMARY"])
    summary = summary_file.read_text() if summary_file.exists() else ""
    return ActionRun(runs, workspace, summary, uses)


@pytest.fixture
def base_report(tmp_path: Path) -> Path:
    """The base branch's report: the quick start with c3 Fully Supported (its oracle edited)."""
    oracle = json.loads((QS / "oracle.json").read_text())
    (c3,) = [c for c in oracle["claims"] if c["claim"] == C3]
    c3["verdicts"] = ["Fully Supported"]
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "oracle.json").write_text(json.dumps(oracle))
    report = tmp_path / "base" / "report.json"
    args = [str(QS / "dag.json"), "--claims", str(QS / "claims.json")]
    args += ["--oracle", str(tmp_path / "base" / "oracle.json"), "--out", str(report)]
    args += ["--run-dir", str(tmp_path / "base" / "run"), "--quiet"]
    res = CliRunner().invoke(cli, ["verify", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return report


def head_inputs(base: Path, **extra: str) -> dict[str, str]:
    args = f"{QS / 'dag.json'} --claims {QS / 'claims.json'} --oracle '{QS / 'oracle.json'}'"
    return {"args": args, "base-report": str(base), "max-new-unsupported": "0"} | extra


BOT = "github-actions[bot]"


def ours(gh: FakeGitHub) -> list[dict[str, Any]]:
    return [c for c in gh.comments if c["body"].startswith(MARKER) and c["user"]["login"] == BOT]


def files_under(*roots: Path) -> Iterator[Path]:
    for root in roots:
        yield from (p for p in root.rglob("*") if p.is_file())


# -- the tests -----------------------------------------------------------------------------------


def test_action_is_yaml_with_every_input_documented_and_used() -> None:
    doc = action()
    assert doc["runs"]["using"] == "composite"
    text = ACTION.read_text(encoding="utf-8")
    docs = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")
    section = docs.split("## GitHub Action", 1)[1].split("\n## ", 1)[0]
    for name, spec in doc["inputs"].items():
        assert str(spec.get("description", "")).strip(), f"input {name} has no description"
        assert f"inputs.{name}" in text, f"input {name} is never used"
        assert f"`{name}`" in section, f"input {name} is not in docs/running.md's section"
    for name, spec in doc["outputs"].items():
        assert spec["description"] and "steps." in spec["value"], name
    step_ids = {s.get("id") for s in doc["runs"]["steps"]}
    for ref in re.findall(r"steps\.([\w-]+)\.outputs", text):
        assert ref in step_ids
    uses = [s["uses"] for s in doc["runs"]["steps"] if "uses" in s]
    assert "github/codeql-action/upload-sarif@v3" in uses
    assert "python -m veritrail.cigate.comment" in text
    assert comment_mod.MARKER == MARKER  # cigate keeps its own copy of the marker


@pytest.mark.slow  # two runs of the action: verify and diff as processes, about 15 s
def test_first_run_creates_the_comment_second_run_updates_it(
    tmp_path: Path, github: FakeGitHub, base_report: Path
) -> None:
    # Someone's comments come first: ours lands on a later page of the listing.
    others = [github.add(f"LGTM {i}, see {MARKER} below", "reviewer") for i in range(3)]
    # A marked comment by someone else: never ours to fill (its author could edit it after).
    others.append(github.add(f"{MARKER}\nAll claims verified, trust me.", "mallory"))
    kept = [dict(c) for c in others]
    workspace = tmp_path / "ws"
    workspace.mkdir()

    first = run_action(workspace, github, head_inputs(base_report), tag="1")
    # The gate of the diff fails (c3 became unsupported): the last step exits 1, after the
    # comment was posted.
    assert [s.id for s in first.steps] == ["verify", "diff", "comment", "result"], first.text
    assert first.step("verify").outputs["exit-code"] == "0"
    assert first.step("result").code == 1 and first.step("result").outputs["exit-code"] == "1"
    assert "veritrail comment created" in first.step("comment").stdout
    assert "::error " in first.step("verify").stdout  # the annotation of c3
    (posted,) = ours(github)
    body = posted["body"]
    assert body.splitlines()[0] == MARKER
    assert "Gate failed" in body and "stage 2 (summary\\-2)" in body
    assert "Marley\\'s name on the warehouse door\\." in body  # the claim, escaped Markdown
    assert "Fully Supported | Not Fully Supported" in body  # the flip
    assert re.search(r"Unsupported share B − A: \+25\.0 pp\*\* \(95% CI", body)
    assert body in first.summary  # the job summary shows the same
    sarif = workspace / "veritrail-out" / "veritrail.sarif"
    (upload,) = [u for u in first.uses if "upload-sarif" in u["uses"]]
    assert Path(workspace / upload["sarif_file"]) == sarif and sarif.is_file()
    assert [m for m, _ in github.requests] == ["GET", "GET", "POST"]  # two pages, then create

    # The second run of the same pull request, one new unsupported claim allowed now.
    github.requests.clear()
    second = run_action(
        workspace, github, head_inputs(base_report, **{"max-new-unsupported": "1"}), tag="2"
    )
    assert second.step("result").code == 0, second.text
    assert "veritrail comment updated" in second.step("comment").stdout
    assert [m for m, _ in github.requests] == ["GET", "GET", "GET", "PATCH"]  # ours on page 3
    (updated,) = ours(github)  # still one
    assert updated["id"] == posted["id"] and "Gate passed" in updated["body"]
    assert len(github.comments) == 5
    assert github.comments[:4] == kept  # someone's comments, marked or not: untouched

    # The token: in no step's output, no summary, no file the action wrote.
    assert TOKEN not in first.text + second.text + first.summary + second.summary
    for p in files_under(workspace, tmp_path / "base"):
        assert TOKEN.encode() not in p.read_bytes(), p


@pytest.mark.slow
def test_github_5xx_exits_3_with_one_line_and_no_base_says_so(
    tmp_path: Path, github: FakeGitHub
) -> None:
    github.fail_status = 502
    github.echo_token_in_errors = True  # a server that echoes the header: still never printed
    workspace = tmp_path / "ws"
    workspace.mkdir()
    res = run_action(workspace, github, head_inputs(tmp_path / "none" / "report.json"), tag="1")
    step = res.step("comment")
    (line,) = step.stderr.splitlines()
    assert line.startswith("error: GitHub API: GET /repos/octo/pipeline/issues/7/comments")
    assert "502" in line and "Traceback" not in step.stderr
    assert TOKEN not in res.text + res.summary
    # Listing is retried (idempotent), nothing is ever created.
    assert [m for m, _ in github.requests] == ["GET"] * (1 + comment_mod.RETRIES)
    assert res.step("result").code == 3, res.text
    assert "comment 3" in res.step("result").stdout, res.text
    # No base report yet (the base branch never ran): the body says so instead of a diff.
    assert res.summary.startswith(MARKER)
    assert "base report was not found" in res.summary
    assert "`veritrail verify` exited 0" in res.summary


def test_comment_module_bad_input_exits_2_and_refused_token_exits_3(
    tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    body = tmp_path / "body.md"
    body.write_text("hello\n")
    env = {"GITHUB_API_URL": github.base, "GITHUB_REPOSITORY": REPO}
    argv = ["--pr", str(PR), "--body-file", str(body)]
    assert comment_mod.main(argv, env) == 2  # no token
    assert (
        capsys.readouterr().err
        == "error: GITHUB_TOKEN is not set (the action passes `github-token`)\n"
    )
    assert (
        comment_mod.main(["--pr", "x7", "--body-file", str(body)], env | {"GITHUB_TOKEN": TOKEN})
        == 2
    )
    assert capsys.readouterr().err.startswith("error: --pr 'x7'")
    assert comment_mod.main(["--pr", "7"], env | {"GITHUB_TOKEN": TOKEN}) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert github.requests == []  # decided before any call

    wrong = "ghs_wrongTOKEN_abcdefghijklmnop"
    assert comment_mod.main(argv, env | {"GITHUB_TOKEN": wrong}) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: GitHub API: GET") and "401" in err and "not valid" in err
    assert wrong not in err

    # A body without the marker gets it as its first line; created once, then updated.
    ok = env | {"GITHUB_TOKEN": TOKEN}
    assert comment_mod.main(argv, ok) == 0
    assert comment_mod.main(argv, ok) == 0
    (c,) = github.comments
    assert c["body"] == f"{MARKER}\nhello\n"


def test_a_next_link_to_another_origin_is_refused(tmp_path: Path, github: FakeGitHub) -> None:
    client = comment_mod.GitHubClient(github.base, TOKEN)
    with pytest.raises(comment_mod.GitHubError, match="another origin"):
        client._request("GET", "http://127.0.0.2:9/x", retry=False)
    assert (
        comment_mod.next_link({"link": '<https://a/x?page=2>; rel="next"'}) == "https://a/x?page=2"
    )
    assert comment_mod.next_link({"Link": '<https://a/x?page=9>; rel="last"'}) is None


@pytest.mark.slow
def test_batch_compares_the_report_named_in_input_report(
    tmp_path: Path, github: FakeGitHub, base_report: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    job = {
        "id": "qs",
        "dag": str(QS / "dag.json"),
        "claims": str(QS / "claims.json"),
        "oracle": str(QS / "oracle.json"),
        "out": str(workspace / "jobs" / "qs.json"),
    }
    (workspace / "manifest.jsonl").write_text(json.dumps(job) + "\n")
    inputs = {
        "command": "batch",
        "args": "manifest.jsonl --runs-dir runs",
        "report": "jobs/qs.json",
        "base-report": str(base_report),
        "max-new-unsupported": "0",
    }
    res = run_action(workspace, github, inputs, tag="1")
    assert res.step("verify").outputs["exit-code"] == "0", res.text
    assert res.step("result").code == 1, res.text  # the diff's gate: c3 became unsupported
    (posted,) = ours(github)
    assert "| c3 |" in posted["body"] and "stage 2 (summary\\-2)" in posted["body"]
    assert (workspace / "veritrail-out" / "veritrail.sarif").is_file()


def test_a_quoting_error_in_args_is_bad_input(tmp_path: Path, github: FakeGitHub) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    res = run_action(workspace, github, {"args": "dag.json --claims 'unclosed"}, tag="1")
    (step,) = res.steps  # the action stops at the verify step
    assert step.id == "verify" and step.code == 2
    assert step.stderr == "error: input args: No closing quotation\n"
    assert github.requests == []
