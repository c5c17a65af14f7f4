"""scripts/check_docs.py runs a block naming `--model demo/...` as a newcomer would: without the
loopback server's VERITRAIL_BASE_URL (demo/ models refuse an endpoint), other blocks with it; and
the example files those keyless blocks run on are what the pages say they are."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from scriptskit import load_check_docs
from veritrail.batch.manifest import load_manifest
from veritrail.cli.main import cli
from veritrail.dag_io import load_dag
from veritrail.dag_validate import DagValidationError

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


# -- the example files the keyless docs blocks run on (issue 43): what the pages say of them ----


def test_the_broken_dag_example_has_the_three_problems_dag_format_shows() -> None:
    with pytest.raises(DagValidationError) as caught:
        load_dag(ROOT / "examples" / "dag" / "broken.json")
    found = [(str(p.code), tuple(p.ids)) for p in caught.value.problems]
    assert found == [
        ("unknown_source", ("m<-ghost",)),
        ("cycle", ("a", "b", "c")),
        ("several_terminals", ("t1", "t2")),
    ]
    page = (ROOT / "docs" / "dag-format.md").read_text(encoding="utf-8")
    for line in str(caught.value).splitlines()[1:]:
        assert line.strip() in page  # the output shown is the file's


def test_the_batch_manifest_example_runs_keyless(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    manifest = tmp_path / "examples" / "batch" / "manifest.jsonl"
    assert [j.id for j in load_manifest(manifest)] == ["quickstart", "quickstart-oracle", "museum"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VERITRAIL_BASE_URL", raising=False)
    monkeypatch.setenv("VERITRAIL_CACHE", "off")
    args = ["batch", str(manifest), "--model", "demo/overlap", "--summary-dir", "out", "--quiet"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    reports = tmp_path / "examples" / "batch" / "reports"
    assert sorted(p.name for p in reports.glob("*.json")) == [
        "museum.json",
        "quickstart-oracle.json",
        "quickstart.json",
    ]
    # The reports land where the example's .gitignore keeps them out of a checkout's status.
    ignored = (ROOT / "examples" / "batch" / ".gitignore").read_text(encoding="utf-8")
    assert "reports/" in ignored.splitlines()


def test_the_example_plugin_package_declares_the_entry_point_the_docs_name() -> None:
    pyproject = ROOT / "examples" / "plugins" / "pyproject.toml"
    doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    assert doc["project"]["entry-points"]["veritrail.steps"] == {
        "overlap": "overlap_steps:make_judge"
    }
    assert doc["tool"]["setuptools"]["py-modules"] == ["overlap_steps"]
    page = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    assert "pip install -e examples/plugins" in page and "--judge overlap " in page
