"""What the CLI tests that run against a loopback OpenAI-compatible server share.

`loopback_model_env` clears what would point a model elsewhere (a caller's `VERITRAIL_*` model,
base URL and proxies) and sets a placeholder key; the test starts its own `FakeOpenAIServer` and
passes `--base-url`. `TINY_EVAL_DATASET` is a one-claim dataset in our eval format;
`oracle_args` runs the quick start with its oracle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def loopback_model_env(monkeypatch: pytest.MonkeyPatch, *, no_prices: bool = False) -> None:
    """A clean model environment for a test against 127.0.0.1 (`no_prices`: no price file, so a
    model outside the built-in table has no known price)."""
    for name in ("VERITRAIL_BASE_URL", "OPENAI_BASE_URL", "VERITRAIL_MODEL"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loopback")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    if no_prices:
        monkeypatch.setenv("VERITRAIL_PRICES", "")


TINY_EVAL_DATASET: dict[str, Any] = {
    "format": "veritrail-eval",
    "version": 1,
    "name": "tiny",
    "items": [
        {
            "id": "i1",
            "dag": {
                "nodes": [
                    {"id": "r1", "text": "Acme was founded in 1990 in Oslo.", "sources": []},
                    {"id": "t", "text": "Acme was founded in 1990.", "sources": ["r1"]},
                ]
            },
            "claims": [
                {"id": "c1", "text": "Acme was founded in 1990.", "label": "Fully Supported"}
            ],
        }
    ],
}
"""One item, one claim (Fully Supported by its one root)."""


QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"


def oracle_args(t: Path, *extra: str) -> list[str]:
    """`veritrail verify` of the quick start with its oracle (no model), run directory and report
    under `t`, then `extra`."""
    return [
        "verify",
        str(QUICKSTART / "dag.json"),
        "--claims",
        str(QUICKSTART / "claims.json"),
        "--oracle",
        str(QUICKSTART / "oracle.json"),
        "--run-dir",
        str(t / "run"),
        "--out",
        str(t / "report.json"),
        *extra,
    ]
