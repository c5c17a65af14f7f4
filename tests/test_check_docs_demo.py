"""scripts/check_docs.py runs a block naming `--model demo/...` as a newcomer would: without the
loopback server's VERITRAIL_BASE_URL (demo/ models refuse an endpoint), other blocks with it."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from scriptskit import load_check_docs

ROOT = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    return load_check_docs()


def test_a_demo_block_runs_without_the_loopback_endpoint(tmp_path: Path) -> None:
    cd = _load()
    env = {"PATH": "/usr/bin:/bin", "VERITRAIL_BASE_URL": "http://127.0.0.1:9/v1"}
    said = tmp_path / "said.txt"
    # `:` takes the demo flag as arguments and does nothing; the echo shows the endpoint seen.
    show = f'echo "${{VERITRAIL_BASE_URL:-none}}" >> {said}'
    demo = cd.Block("docs/x.md", 1, "bash", [": --model demo/overlap", show])
    other = cd.Block("docs/x.md", 5, "bash", [": --model openai/gpt-4o-mini", show])
    assert cd.run_block(demo, tmp_path, env).status == "ran"
    assert cd.run_block(other, tmp_path, env).status == "ran"
    assert said.read_text().splitlines() == ["none", "http://127.0.0.1:9/v1"]
