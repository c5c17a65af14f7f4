"""What the embedded model is asked is pinned (issue 38: "no quality lost").

The embedded model's quality figures (docs/evaluation.md: the WiCE slices; the README's quick
start) were measured with what its provider sends: one-claim prompts in their measured wording,
concise reply schemas, its token caps. Re-measuring them takes hours on two cores, so any change
to those requests must be seen and decided on, not slip in with a change meant for other models
(issue 38 shortened the shared prompts; a shortened batched-disambiguation prompt cost the
embedded model every extraction). This test runs the quick start through the embedded provider,
with llama.cpp replaced by the loopback fake answering by the word-overlap rules, and compares a
hash of every request (messages, schema, token cap, temperature) with the pinned one.

When it fails because you meant to change what the embedded model reads: re-measure (README
command 1's verdicts and c3's stage with `scripts/check_readme.py`, the WiCE slices with
`benchmarks/wice_slice.py`; `benchmarks/embedded_requests.py` compares two checkouts' requests),
put the figures in benchmarks/README.md, then update PINNED below.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.lm import local_server, local_weights, overlap
from veritrail.testing.fake_openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
FIELDS = ("messages", "response_format", "max_tokens", "temperature", "n")

PINNED = {
    "requests": 20,
    "sha256": "235f2b2db31133ccf785f99b841af8b9f9a9d5a71bc47bb638aba1539c7b0726",
}


def test_the_embedded_models_requests_on_the_quick_start_are_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def responder(request: dict[str, Any]) -> str:
        seen.append(json.dumps({k: request.get(k) for k in FIELDS}, sort_keys=True))
        return overlap.responder(request)

    srv = FakeOpenAIServer(responder=responder).start()

    def fake_start(config: local_server.ServerConfig) -> local_server.StartedServer:
        return local_server.StartedServer(None, srv.base_url, "sk-fake", None)

    async def fake_stop(box: list[Any]) -> None:
        return None

    monkeypatch.setattr(local_server, "start_server", fake_start)
    monkeypatch.setattr(local_server, "stop_server", fake_stop)
    # Only the requests matter here: an install without the weights (the fast tier's `.[dev]`)
    # runs this test too.
    monkeypatch.setattr(local_weights, "missing_model", lambda name: None)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("VERITRAIL_CACHE_DIR", str(tmp_path / "cache"))
    try:
        result = CliRunner().invoke(
            cli,
            [
                "verify",
                str(QUICKSTART / "dag.json"),
                "--claims",
                str(QUICKSTART / "claims.json"),
                "--model",
                "local/qwen2.5-coder-1.5b",
                "--threads",
                "2",
                "--cache",
                "off",
                "--out",
                str(tmp_path / "report.json"),
                "--run-dir",
                str(tmp_path / "run"),
                "--quiet",
            ],
        )
    finally:
        srv.stop()
    assert result.exit_code in (0, 1), result.output
    # Sorted: claims run concurrently, so the order of their calls is not part of the contract.
    digest = hashlib.sha256("\n".join(sorted(seen)).encode()).hexdigest()
    assert {"requests": len(seen), "sha256": digest} == PINNED, (
        "what the embedded model is asked changed: re-measure its figures (this module's "
        "docstring says how), then update PINNED"
    )
