"""The README's `veritrail check` command runs without a model, a key or a download: the example
ships its claims and an oracle (examples/check), and gives the documented verdicts."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

from click.testing import CliRunner

from veritrail.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def _readme_check_command() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    line = next(x for b in blocks for x in b.splitlines() if x.startswith("veritrail check "))
    return shlex.split(line)[1:]


def test_readme_check_command_is_keyless(tmp_path: Path) -> None:
    # As the README runs it: from the repository's root (here a copy, so nothing is written
    # into the checkout); the conftest has made tmp_path the current directory.
    shutil.copytree(ROOT / "examples" / "check", tmp_path / "examples" / "check")
    args = _readme_check_command()
    assert "--oracle" in args and "--claims" in args
    res = CliRunner().invoke(cli, args, env={"VERITRAIL_MODEL": None, "OPENAI_API_KEY": None})
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "report.json").read_text())
    got = {c["id"]: c["verdict"] for c in report["claims"]}
    assert got == {
        "c1": "Fully Supported",
        "c2": "Fully Supported",
        "c3": "Fully Supported",
        "c4": "Not Fully Supported",
    }
    by_id = {c["id"]: c for c in report["claims"]}
    assert by_id["c4"]["error_stages"] == [2]
    assert by_id["c1"]["provenance"] == [["examples/check/sources/museum.txt#1"]]
    assert (tmp_path / "report.html").is_file()
    assert report["summary"]["cost"]["lm_calls"] == 0  # no model was called
