"""scripts/check_docs.py runs a block naming `--model demo/...` as a newcomer would: without the
loopback server's VERITRAIL_BASE_URL (demo/ models refuse an endpoint), other blocks with it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    scripts = str(ROOT / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)  # check_docs imports check_readme from beside it
    spec = importlib.util.spec_from_file_location("check_docs", ROOT / "scripts" / "check_docs.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["check_docs"] = mod
    spec.loader.exec_module(mod)
    return mod


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
