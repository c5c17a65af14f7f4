"""`--model demo/overlap`: the word-overlap demonstration model, in-process, keyless and free."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from veritrail.errors import InputProblem
from veritrail.lm.demo import DEMO_LABEL, DemoProvider, is_demonstration
from veritrail.lm.registry import get_model, get_provider

ROOT = Path(__file__).resolve().parents[2]


def test_demo_provider_is_registered_and_free() -> None:
    assert isinstance(get_provider("demo/overlap"), DemoProvider)
    model = get_model("demo/overlap")
    price = model.prices.lookup("demo", "overlap")
    assert price is not None and price.input == 0 and price.output == 0
    assert is_demonstration("demo/overlap") and not is_demonstration("openai/gpt-4o")
    assert DEMO_LABEL == "demonstration, not a judge"


def test_unknown_demo_model_is_bad_input() -> None:
    with pytest.raises(InputProblem, match="unknown demonstration model demo/nope"):
        get_provider("demo/nope")


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_check_runs_keyless_with_the_demo_model(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "VERITRAIL_CACHE": "0"}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from veritrail.cli.main import main; main()",
            "check",
            str(ROOT / "examples/check/answer.txt"),
            str(ROOT / "examples/check/sources/*.txt"),
            "--model",
            "demo/overlap",
            "--out",
            str(out),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr  # no gate: an unsupported claim is not an error
    report = json.loads(out.read_text(encoding="utf-8"))
    verdicts = {c["id"]: c["verdict"] for c in report["claims"]}
    assert "Not Fully Supported" in verdicts.values()
