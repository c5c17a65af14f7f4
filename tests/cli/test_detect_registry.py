"""`veritrail detect --method g2l` goes through the detector registry like every method (issue
40): the factory registered for `g2l` builds the detector, the tree options are the method's own
options, and a bad one is exit 2 with one line. Keyless: the `demo/overlap` model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.detectors import registry
from veritrail.detectors.base import Detector

REF = "Acme was founded in 1990 in Oslo. It makes bicycles."
TEXT = "Acme was founded in 1990. Acme sells submarines worldwide."


def _detect(tmp_path: Path, *extra: str, text: str = TEXT) -> tuple[int, str]:
    (tmp_path / "text.txt").write_text(text)
    (tmp_path / "ref.txt").write_text(REF)
    res = CliRunner().invoke(
        cli,
        [
            "detect",
            "--text",
            str(tmp_path / "text.txt"),
            "--refs",
            str(tmp_path / "ref.txt"),
            "--model",
            "demo/overlap",
            "--cache",
            "off",
            "--out",
            str(tmp_path / "out.json"),
            *extra,
        ],
    )
    return res.exit_code, res.output


def test_g2l_is_built_by_its_registered_factory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[registry.MethodSpec] = []
    real = registry._KINDS["g2l"]

    def spy(spec: registry.MethodSpec, ctx: registry.BuildContext) -> Detector:
        seen.append(spec)
        return real.factory(spec, ctx)

    monkeypatch.setitem(registry._KINDS, "g2l", registry._Kind(spy, True, False))
    code, out = _detect(tmp_path, "--method", "g2l", "--max-depth", "5")
    assert code == 0, out
    assert len(seen) == 1 and seen[0].get("max_depth") == "5"
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["format"] == "veritrail-g2l-report"  # G2LDetect's own report, as before
    assert doc["references"] == [str(tmp_path / "ref.txt")]


def test_a_bad_tree_option_is_exit_2(tmp_path: Path) -> None:
    code, out = _detect(tmp_path, "--method", "g2l:max_depth=0")
    assert code == 2, out
    assert "max_depth" in out and "Traceback" not in out


def test_a_failing_path_is_printed_on_one_line_with_controls_shown(tmp_path: Path) -> None:
    """A path's nodes are text from the text and the model: a newline inside one stays on the
    path's line, and an escape character is shown, not sent to the terminal."""
    text = "Acme was founded in 1990.\nAcme sells \x1b[31msubmarines\x1b[0m worldwide."
    _, out = _detect(tmp_path, "--method", "g2l", text=text)
    failing = [line for line in out.splitlines() if line.startswith("  ✗ ")]
    assert failing, out
    assert "\x1b" not in out
    assert any("submarines" in line and "\\x1b" in line for line in failing), out
