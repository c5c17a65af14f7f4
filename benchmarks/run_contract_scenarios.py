"""The "runs you can trust" scenarios (issue 14) through the real CLI, for a person to read.

    python benchmarks/run_contract_scenarios.py

Each scenario runs `veritrail` in a subprocess, in a temporary directory, against the loopback
`FakeOpenAIServer` (8 claims over the 13-node, 3-stage DAG of tests/run/test_resume.py, whose
deterministic responder answers every step) and prints the exit code, the wall time and the last
lines of the output. Nothing is asserted here: tests/run/test_run_contract.py and
tests/run/test_bad_inputs.py hold the assertions; this shows what a user sees.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from runkit import CLAIMS, build_dag, responder
from veritrail.testing import FakeOpenAIServer, Fault

KEY = "sk-scenario-secret-0123456789abcdef"


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, float, str]:
    t = time.perf_counter()
    p = subprocess.run(
        ["veritrail", *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    return p.returncode, time.perf_counter() - t, (p.stdout + p.stderr).strip()


def show(title: str, result: tuple[int, float, str], lines: int = 6) -> None:
    code, t, out = result
    print(f"\n== {title}: exit {code} in {t:.1f}s")
    print("\n".join(out.splitlines()[-lines:]))


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="vt-scenarios-"))
    os.chdir(work)
    dag = build_dag()
    nodes = [{"id": n.id, "text": n.text, "sources": list(n.sources)} for n in dag]
    Path("dag.json").write_text(json.dumps({"nodes": nodes}), encoding="utf-8")
    claims = [{"id": f"c{i}", "text": t} for i, t in enumerate(CLAIMS)]
    Path("claims.json").write_text(json.dumps(claims), encoding="utf-8")
    base = ["verify", "dag.json", "--claims", "claims.json", "--model", "openai/fake"]
    base += ["--cache", "off", "--quiet"]
    refused = f"http://127.0.0.1:{free_port()}/v1"

    show("refused (aiohttp)", run(*base, "--base-url", refused, "--out", "r.json"))
    show(
        "refused (httpx)",
        run(
            *base,
            "--base-url",
            refused,
            "--out",
            "rh.json",
            "--run-dir",
            "rh",
            env={"VERITRAIL_HTTP_CLIENT": "httpx"},
        ),
    )
    # DNS failures: tests/lm/test_lm_failures.py (the OS resolver replaced for one host name, so
    # no lookup leaves the machine).
    with FakeOpenAIServer(responder=responder) as srv:
        show(
            "endpoint fixed: resume retries the errored claims",
            run("resume", "rh", "--base-url", srv.base_url),
        )
        print(f"   requests: {srv.count}")
        show("resume again", run("resume", "rh", "--base-url", srv.base_url))
        print(f"   requests: {srv.count}")
    with FakeOpenAIServer(responder=lambda r: Fault.unauthorized(echo_key=True)) as srv:
        code, t, out = run(
            *base, "--base-url", srv.base_url, "--html", "r401.html", "--out", "r401.json",
            "--run-dir", "r401", env={"OPENAI_API_KEY": KEY},
        )  # fmt: skip
        show(f"HTTP 401 echoing the key ({srv.count} requests)", (code, t, out))
        leaks = [
            str(p) for p in work.rglob("*") if p.is_file() and KEY in p.read_text(errors="replace")
        ]
        print(f"   files holding the key: {leaks}; terminal holds it: {KEY in out}")
    code, t, out = run(*base, "--base-url", "http://alice:hunter2pass@127.0.0.1:9/v1", "--dry-run")
    print(f"\n== dry run with URL credentials: password printed: {'hunter2pass' in out}")
    show("--out is the input DAG", run(*base, "--base-url", refused, "--out", "dag.json"))
    with FakeOpenAIServer(responder=responder) as srv:
        show(
            "--out in a missing directory",
            run(*base, "--base-url", srv.base_url, "--out", "new/dir/r.json", "--run-dir", "r5"),
        )
        procs = [
            subprocess.Popen(
                [
                    "veritrail",
                    *base,
                    "--base-url",
                    srv.base_url,
                    "--out",
                    f"race{i}.json",
                    "--run-dir",
                    "race",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for i in range(8)
        ]
        outs = [(p.wait(), p.stdout.read() if p.stdout else "") for p in procs]
        codes = sorted(c for c, _ in outs)
        tracebacks = sum("Traceback" in o for _, o in outs)
        print(f"\n== eight identical runs at once: exit codes {codes}, tracebacks {tracebacks}")
    Path("deep.json").write_text("[" * 100000 + "]" * 100000, encoding="utf-8")
    show("deeply nested DAG", run("verify", "deep.json", "--claims", "claims.json"), 1)
    latin1 = '[{"id": "c1", "text": "Caf\u00e9 costs 3 dollars."}]'.encode("latin-1")
    Path("latin1.json").write_bytes(latin1)
    show("latin-1 claims", run(*base[:2], "--claims", "latin1.json", *base[4:]), 1)
    Path("plain").write_text("x", encoding="utf-8")
    show("unusable cache", run(*base[:6], "--base-url", refused, "--cache", "plain/c.sqlite"), 1)
    Path("outdir").mkdir()
    show("--html is a directory", run(*base, "--base-url", refused, "--html", "outdir"), 1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
