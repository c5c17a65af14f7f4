"""`veritrail sirg` without its extra installed: one line naming the extra, exit 2, no
traceback (as every other optional feature does)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import veritrail
from veritrail.cli.sirg import _EXTRA_MODULES

# Runs the CLI with the named modules made unimportable (`sys.modules[name] = None` makes
# `import name` raise ImportError), as on a machine without the `sirg` extra.
_SHIM = (
    "import sys\n"
    "for name in sys.argv[1].split(','):\n"
    "    sys.modules[name] = None\n"
    "from veritrail.cli.main import main\n"
    "main(sys.argv[2:])\n"
)


def _run_without(modules: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # The checkout's source, whichever way the package was installed.
    env["PYTHONPATH"] = str(Path(veritrail.__file__).resolve().parents[1])
    return subprocess.run(
        [sys.executable, "-c", _SHIM, modules, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize("missing", ["torch", "transformers", "numpy"])
@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_sirg_detect_without_extra_names_it(tmp_path: Path, missing: str) -> None:
    (tmp_path / "c.txt").write_text("The sky is blue.\n")
    (tmp_path / "r.txt").write_text("The sky is green.\n")
    res = _run_without(
        missing,
        "sirg",
        "detect",
        "--context",
        "c.txt",
        "--response",
        "r.txt",
        cwd=tmp_path,
    )
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert "veritrail[sirg]" in res.stderr
    # The first module of the extra that is missing is named: `missing`, unless an earlier one
    # is not installed at all (torch in a `.[dev]` virtualenv, where the `transformers` case
    # finds torch missing first).
    earlier = _EXTRA_MODULES[: _EXTRA_MODULES.index(missing)]
    named = next((m for m in earlier if importlib.util.find_spec(m) is None), missing)
    assert named in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


@pytest.mark.parametrize("sub", ["train", "evaluate"])
def test_other_sirg_commands_without_torch(tmp_path: Path, sub: str) -> None:
    (tmp_path / "d.jsonl").write_text("")
    (tmp_path / "clf").mkdir()
    extra = ["--out", "o"] if sub == "train" else ["--classifier", "clf"]
    res = _run_without("torch", "sirg", sub, "--data", "d.jsonl", *extra, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert "veritrail[sirg]" in res.stderr


def test_sirg_help_needs_no_torch(tmp_path: Path) -> None:
    res = _run_without("torch", "sirg", "detect", "--help", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "--context" in res.stdout
