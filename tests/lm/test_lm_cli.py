"""`veritrail cache` and `veritrail prompts` through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.lm.base import ModelOutput
from veritrail.lm.cache import ResponseCache
from veritrail.method.prompting import packaged_prompt_names, prompt_source, set_prompt_dir


def test_cache_stats_and_clear(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    r = CliRunner().invoke(cli, ["cache", "stats", "--cache", str(path)])
    assert r.exit_code == 0 and "no cache yet" in r.output
    c = ResponseCache(path)
    c.put("evidence_selection", "k1", "openai/m", ModelOutput("a", 10, 2))
    c.put("evidence_selection", "k2", "openai/m", ModelOutput("b", 5, 1))
    c.put("verdict", "k3", "openai/m", ModelOutput("c", 7, 3))
    c.close()
    r = CliRunner().invoke(cli, ["cache", "stats", "--cache", str(path)])
    assert r.exit_code == 0, r.output
    assert "3 entries" in r.output
    line = next(ln for ln in r.output.splitlines() if "evidence_selection" in ln)
    assert line.split()[1:2] == ["2"] and "15 input tokens" in " ".join(line.split())
    r = CliRunner().invoke(cli, ["cache", "clear", "--cache", str(path), "--step", "verdict"])
    assert r.exit_code == 0 and "deleted 1 entries of step verdict" in r.output
    r = CliRunner().invoke(cli, ["cache", "clear", "--cache", str(path)])
    assert "deleted 2 entries" in r.output
    assert ResponseCache(path).stats().entries == 0


def test_cache_default_path_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERITRAIL_CACHE_DIR", str(tmp_path))
    ResponseCache().put("s", "k", "m", ModelOutput("x"))
    r = CliRunner().invoke(cli, ["cache", "stats"])
    assert str(tmp_path / "cache.sqlite") in r.output and "1 entries" in r.output


def test_prompts_export_list_show_and_override(tmp_path: Path) -> None:
    names = packaged_prompt_names()
    assert names
    r = CliRunner().invoke(cli, ["prompts", "list"])
    assert r.output.split() == names
    dest = tmp_path / "prompts"
    r = CliRunner().invoke(cli, ["prompts", "export", str(dest)])
    assert r.exit_code == 0 and f"wrote {len(names)} templates" in r.output
    assert sorted(p.stem for p in dest.glob("*.md")) == names
    name = names[0]
    assert (dest / f"{name}.md").read_text() == prompt_source(name)
    r = CliRunner().invoke(cli, ["prompts", "show", name])
    assert r.output == prompt_source(name)
    (dest / f"{name}.md").write_text("## user\nedited {{x}}\n")
    set_prompt_dir(dest)
    try:
        assert prompt_source(name) == "## user\nedited {{x}}\n"
    finally:
        set_prompt_dir(None)
