"""`veritrail cache clear --step NAME`: a name that is neither one of the method's steps nor a
namespace in the cache is a usage error (exit 2, the known steps listed), never a silent
"deleted 0 entries"."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.lm.base import ModelOutput
from veritrail.lm.cache import ResponseCache
from veritrail.records import Step


def _cache(path: Path) -> Path:
    c = ResponseCache(path)
    out = ModelOutput(text="{}", input_tokens=3, output_tokens=1, finish_reason="stop")
    c.put(Step.VERDICT.value, "k1", "m", out)
    c.put("global_map", "k2", "m", out)  # a pipeline's own step
    c.close()
    return path


def test_unknown_step_exits_2_and_lists_known_steps(tmp_path: Path) -> None:
    path = _cache(tmp_path / "c.sqlite")
    res = CliRunner().invoke(cli, ["cache", "clear", "--cache", str(path), "--step", "bogus"])
    assert res.exit_code == 2, res.output
    assert "bogus" in res.output
    for step in Step:
        assert step.value in res.output
    assert "global_map" in res.output  # namespaces present in the file are known too
    assert "Traceback" not in res.output
    c = ResponseCache(path)
    try:
        assert c.stats().entries == 2  # nothing deleted
    finally:
        c.close()


def test_unknown_step_without_a_cache_file_exits_2(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        cli, ["cache", "clear", "--cache", str(tmp_path / "none.sqlite"), "--step", "bogus"]
    )
    assert res.exit_code == 2, res.output
    assert "verdict" in res.output


def test_known_steps_are_cleared(tmp_path: Path) -> None:
    path = _cache(tmp_path / "c.sqlite")
    runner = CliRunner()
    res = runner.invoke(cli, ["cache", "clear", "--cache", str(path), "--step", "verdict"])
    assert res.exit_code == 0, res.output
    assert "deleted 1 entries of step verdict" in res.output
    # A method step with nothing cached is still a known name: exit 0, nothing deleted.
    res = runner.invoke(cli, ["cache", "clear", "--cache", str(path), "--step", "claim_selection"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["cache", "clear", "--cache", str(path), "--step", "global_map"])
    assert res.exit_code == 0 and "deleted 1 entries" in res.output
