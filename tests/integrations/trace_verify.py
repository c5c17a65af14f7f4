"""Verifying an imported or recorded DAG end to end: `veritrail verify` in its own process against
the loopback fake OpenAI server, with a deterministic responder (no network)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from veritrail.dag import Dag
from veritrail.testing.fake_openai_server import FakeOpenAIServer


def _fenced(text: str, label: str) -> str:
    m = re.search(rf"<<< {label}\n(.*?)\n>>> end {label}", text, re.S)
    return m.group(1) if m else ""


def keyword_responder(keys: Sequence[str]) -> Callable[[dict[str, Any]], str]:
    """A verifier that keeps, as evidence, the sentences holding the claim's key word (the
    first of `keys` the claim contains) and calls every claim Fully Supported."""

    def one(system: str, user: str, claim: str) -> dict[str, Any]:
        if system.startswith("You split factual"):
            return {"parts": [claim]}
        key = next(k for k in keys if k in claim.lower())
        if system.startswith("You find evidence"):
            ids = [
                int(i) for i, s in re.findall(r"^\[(\d+)\] (.*)$", user, re.M) if key in s.lower()
            ]
            return {
                "selected_ids": ids,
                "context_ids": [],
                "summary": f"About {key}.",
                "missing": "",
            }
        if system.startswith("You judge"):
            return {"reasoning": f"The {key} facts are stated.", "verdict": "Fully Supported"}
        raise AssertionError(system[:60])

    def respond(request: dict[str, Any]) -> str:
        system, user = request["messages"][0]["content"], request["messages"][-1]["content"]
        label = "statement" if system.startswith("You split factual") else "claim"
        if f"<<< {label} c1\n" in user:  # a shared prompt (docs/method.md#shared-prompts)
            entries, k = [], 1
            while f"<<< {label} c{k}\n" in user:
                got = one(system, user, _fenced(user, f"{label} c{k}"))
                entries.append({"claim": f"c{k}", **got})
                k += 1
            return json.dumps({"claims": entries})
        return json.dumps(one(system, user, _fenced(user, label)))

    return respond


def verify_dag(
    dag_path: Path, claims: Sequence[str], keys: Sequence[str], tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], int]:
    """Run `veritrail verify` on `dag_path` against the loopback server; (process, report,
    number of model requests)."""
    (tmp_path / "claims.json").write_text(json.dumps(list(claims)))
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "VERITRAIL_PRICES": ""}
    with FakeOpenAIServer(responder=keyword_responder(keys)) as srv:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                "from veritrail.cli.main import main; main()",
                "verify",
                str(dag_path),
                "--claims",
                str(tmp_path / "claims.json"),
                "--model",
                "openai/fake-model",
                "--base-url",
                srv.base_url,
                "--run-dir",
                str(tmp_path / "run"),
                "--cache",
                str(tmp_path / "cache.sqlite"),
                "--out",
                str(tmp_path / "report.json"),
                "-q",
                "2",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=tmp_path,
        )
        n_requests = len(srv.requests)
    report = (
        json.loads((tmp_path / "report.json").read_text())
        if (tmp_path / "report.json").exists()
        else {}
    )
    return proc, report, n_requests


def provenance_roots(report: dict[str, Any], dag: Dag) -> list[set[str]]:
    """Per claim: the texts of the roots its provenance paths reach."""
    out = []
    for c in report["claims"]:
        ends = {p[-1] for p in c["provenance"] if p}
        assert all(dag.is_root(e) for e in ends), ends
        out.append({dag.node(e).text for e in ends})
    return out
