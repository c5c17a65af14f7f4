"""Settings precedence: flags > VERITRAIL_* environment > TOML file > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veritrail.run.settings import (
    Settings,
    SettingsError,
    Source,
    resolve_settings,
    settings_table,
)


def test_defaults_follow_the_paper(tmp_path: Path) -> None:
    s = resolve_settings({}, env={}, cwd=tmp_path)
    cfg = s.verify_config()
    assert (cfg.q, cfg.evidence_sentences_root, cfg.evidence_sentences_nonroot) == (3, 40, 40)
    assert cfg.verdict_sentences == 200 and cfg.max_decomposition_calls == 20
    assert set(s.sources.values()) == {Source.DEFAULT}


def test_each_layer_overrides_the_one_below(tmp_path: Path) -> None:
    cfg = tmp_path / "v.toml"
    cfg.write_text(
        'model = "openai/from-file"\nq = 1\nsamples = 3\nthreshold = 2\nruns_dir = "file-runs"\n'
    )
    env = {"VERITRAIL_Q": "2", "VERITRAIL_MODEL": "openai/from-env"}
    s = resolve_settings({"q": 5}, config_path=cfg, env=env, cwd=tmp_path)
    assert s.q == 5 and s.sources["q"] == Source.FLAG
    assert s.model == "openai/from-env" and s.sources["model"] == Source.ENV
    assert (s.samples, s.threshold, s.runs_dir) == (3, 2, "file-runs")
    assert s.sources["samples"] == Source.FILE
    assert s.verdict_sentences == 200 and s.sources["verdict_sentences"] == Source.DEFAULT
    rows = {name: (value, src) for name, value, src in settings_table(s)}
    assert rows["q"] == ("5", "flag") and rows["model"] == ("'openai/from-env'", "env")


@given(
    st.one_of(st.none(), st.integers(1, 9)),
    st.one_of(st.none(), st.integers(1, 9)),
    st.one_of(st.none(), st.integers(1, 9)),
)
def test_highest_layer_that_sets_a_value_wins(
    file_q: int | None, env_q: int | None, flag_q: int | None
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        cwd = Path(d)
        if file_q is not None:
            (cwd / "veritrail.toml").write_text(f"[verify]\nq = {file_q}\n")
        env = {"VERITRAIL_Q": str(env_q)} if env_q is not None else {}
        flags = {"q": flag_q} if flag_q is not None else {}
        s = resolve_settings(flags, env=env, cwd=cwd)
    expected = next((v for v in (flag_q, env_q, file_q) if v is not None), 3)
    assert s.q == expected


def test_config_file_discovery(tmp_path: Path) -> None:
    (tmp_path / "veritrail.toml").write_text("q = 1\n")
    other = tmp_path / "other.toml"
    other.write_text("q = 2\n")
    assert resolve_settings({}, env={}, cwd=tmp_path).q == 1  # ./veritrail.toml found
    assert resolve_settings({}, env={"VERITRAIL_CONFIG": str(other)}, cwd=tmp_path).q == 2
    assert resolve_settings({}, config_path=other, env={}, cwd=tmp_path).q == 2
    with pytest.raises(SettingsError, match="not found"):
        resolve_settings({}, config_path=tmp_path / "missing.toml", env={}, cwd=tmp_path)


def test_unknown_and_bad_values_name_their_origin(tmp_path: Path) -> None:
    cfg = tmp_path / "v.toml"
    cfg.write_text("qq = 1\n")
    with pytest.raises(SettingsError, match=r"config file .*v\.toml: unknown setting 'qq'"):
        resolve_settings({}, config_path=cfg, env={}, cwd=tmp_path)
    cfg.write_text('q = "three"\n')
    with pytest.raises(SettingsError, match=r"config file .*q = 'three'"):
        resolve_settings({}, config_path=cfg, env={}, cwd=tmp_path)
    cfg.write_text("q = true\n")
    with pytest.raises(SettingsError, match="q = True"):
        resolve_settings({}, config_path=cfg, env={}, cwd=tmp_path)
    cfg.write_text("sample_temperature = 1\n")  # an integer is a fine float
    assert resolve_settings({}, config_path=cfg, env={}, cwd=tmp_path).sample_temperature == 1.0
    with pytest.raises(SettingsError, match="environment VERITRAIL_SAMPLES"):
        resolve_settings({}, env={"VERITRAIL_SAMPLES": "many"}, cwd=tmp_path)
    with pytest.raises(SettingsError, match="must not be negative"):
        resolve_settings({"concurrency": -1}, env={}, cwd=tmp_path)
    with pytest.raises(SettingsError, match="threshold"):
        resolve_settings({"samples": 2, "threshold": 3}, env={}, cwd=tmp_path)
    cfg.write_text("this is = not toml\n")
    with pytest.raises(SettingsError, match="config file"):
        resolve_settings({}, config_path=cfg, env={}, cwd=tmp_path)


def test_env_none_clears_an_optional_limit(tmp_path: Path) -> None:
    (tmp_path / "veritrail.toml").write_text("verdict_sentences = 50\n")
    s = resolve_settings({}, env={"VERITRAIL_VERDICT_SENTENCES": "none"}, cwd=tmp_path)
    assert s.verdict_sentences is None and s.verify_config().verdict_sentences is None


def test_specific_evidence_limits_win_over_the_shared_one(tmp_path: Path) -> None:
    s = resolve_settings(
        {"evidence_sentences": 20}, env={"VERITRAIL_EVIDENCE_SENTENCES_ROOT": "160"}, cwd=tmp_path
    )
    cfg = s.verify_config()
    assert (cfg.evidence_sentences_root, cfg.evidence_sentences_nonroot) == (160, 20)


def test_settings_carry_no_secret_fields() -> None:
    names = " ".join(Settings().to_dict())
    assert "key" not in names and "secret" not in names and "password" not in names


def test_verify_cli_applies_the_layers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through `veritrail verify --dry-run`: each setting shows its value and the layer it came from."""
    from click.testing import CliRunner

    from veritrail.cli.main import cli

    dag = tmp_path / "dag.json"
    dag.write_text(
        '{"nodes": [{"id": "r", "text": "A fact."}, {"id": "t", "text": "A claim.", "sources": ["r"]}]}'
    )
    (tmp_path / "claims.json").write_text('["A claim."]')
    (tmp_path / "veritrail.toml").write_text(
        'model = "openai/gpt-4o-mini"\nq = 1\nsamples = 3\n[verify]\nthreshold = 2\n'
    )
    monkeypatch.chdir(tmp_path)
    env = {"VERITRAIL_Q": "2", "VERITRAIL_SAMPLES": "5", "VERITRAIL_MODEL": ""}
    args = ["verify", "dag.json", "--claims", "claims.json", "--dry-run", "--samples", "4"]
    got = CliRunner().invoke(cli, args, env=env)
    assert got.exit_code == 0, got.output
    rows = {
        parts[0]: (parts[1], parts[2])
        for line in got.output.splitlines()
        if len(parts := line.split()) == 3 and line.startswith("  ")
    }
    assert rows["q"] == ("2", "env")
    assert rows["samples"] == ("4", "flag")
    assert rows["threshold"] == ("2", "file")
    assert rows["model"] == ("'openai/gpt-4o-mini'", "file")  # an empty variable is unset
    assert rows["verdict_sentences"] == ("200", "default")
    (tmp_path / "bad.toml").write_text("q = 0.5\n")
    got = CliRunner().invoke(cli, [*args, "--config", "bad.toml"], env=env)
    assert got.exit_code == 2 and "bad.toml: q = 0.5" in got.output


def test_an_endpoint_from_the_environment_is_ignored_by_a_model_that_takes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`VERITRAIL_BASE_URL` is for the models that have an endpoint: the demonstration model
    runs with it set (the docs check sets it for every block), `--base-url` with it stays exit 2."""
    from click.testing import CliRunner

    from veritrail.cli.main import cli

    monkeypatch.setenv("VERITRAIL_BASE_URL", "http://127.0.0.1:9/v1")
    qs = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
    args = [
        "verify", str(qs / "dag.json"), "--claims", str(qs / "claims.json"),
        "--model", "demo/overlap", "--cache", "off", "--quiet",
        "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "r.json"),
    ]  # fmt: skip
    assert CliRunner().invoke(cli, args).exit_code == 0
    flagged = CliRunner().invoke(cli, [*args, "--base-url", "http://127.0.0.1:9/v1"])
    assert flagged.exit_code == 2
    assert "do not take the option(s) base_url" in flagged.output
