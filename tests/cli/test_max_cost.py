"""`--max-cost` / `--max-tokens` through the command line, against the loopback server answering
with the word-overlap rules: the cap stops new calls (exit 3, one line saying how far the run got
and how to go on), a resume with a higher cap makes only the calls that were left, a batch's jobs
share one budget, and a dollar cap on a model with no known price is refused before any call."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from clikit import loopback_model_env
from veritrail.cli.main import cli
from veritrail.run.store import RunStore
from veritrail.testing import FakeOpenAIServer
from veritrail.testing.overlap import responder

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
DAG = str(QUICKSTART / "dag.json")
CLAIMS = str(QUICKSTART / "claims.json")
SERIAL = ["--concurrency", "1", "--max-parallel-claims", "1", "--claims-per-prompt", "1"]
"""One call at a time: the calls a run makes, and their order, are the same every time."""


@pytest.fixture()
def priced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback model at $1000 per million tokens in and out: $0.001 a token."""
    loopback_model_env(monkeypatch)
    for name in ("VERITRAIL_MAX_COST", "VERITRAIL_MAX_TOKENS", "VERITRAIL_CACHE"):
        monkeypatch.delenv(name, raising=False)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/loopback": {"input": 1000, "output": 1000}}))
    monkeypatch.setenv("VERITRAIL_PRICES", str(prices))
    monkeypatch.chdir(tmp_path)


def _verify(srv: FakeOpenAIServer, *args: str) -> Result:
    return CliRunner().invoke(
        cli,
        [
            "verify",
            DAG,
            "--claims",
            CLAIMS,
            "--model",
            "openai/loopback",
            "--base-url",
            srv.base_url,
            "--quiet",
            *SERIAL,
            *args,
        ],
    )


def _spent(run_dir: Path) -> float:
    """Dollars of every claim a run directory holds (their last results)."""
    return sum(r.cost.dollars for r in RunStore.open(run_dir).results_in_order())


def _last_line(res: Result) -> str:
    return res.stderr.strip().splitlines()[-1]


@pytest.mark.usefixtures("priced")
def test_the_cap_stops_the_run_and_a_resume_with_a_higher_cap_finishes_it(
    tmp_path: Path,
) -> None:
    with FakeOpenAIServer(responder=responder) as srv:
        full = _verify(srv, "--cache", "off", "--run-dir", str(tmp_path / "full"))
        assert full.exit_code in (0, 1), full.output
        calls, cost = srv.count, _spent(tmp_path / "full")
        assert calls > 4 and cost > 0

        srv.reset_counters()
        cap = cost / 2
        run = tmp_path / "capped"
        cache = str(tmp_path / "cache.sqlite")
        res = _verify(srv, "--cache", cache, "--run-dir", str(run), "--max-cost", f"{cap}")
        assert res.exit_code == 3, res.output
        line = _last_line(res)
        prefix = "budget reached: "
        hint = f"claims verified; resume with a higher cap (veritrail resume {run} --max-cost "
        assert line.startswith(prefix) and hint in line and line.endswith(")"), line
        suggested = float(line[line.index(hint) + len(hint) : -1])
        assert suggested >= 2 * cap
        done = int(line.split()[2])
        assert 0 <= done < 4
        capped_calls = srv.count
        assert 0 < capped_calls < calls
        assert _spent(run) <= cap  # no call started that would pass it
        store = RunStore.open(run)
        assert len(store.done) == done
        # Claims left unverified name the budget as their cause (and the next run verifies them).
        assert store.errored and all(
            "budget reached" in (r.error or "") for r in store.errored.values()
        )
        report = json.loads((run / "report.json").read_text())
        assert any("budget reached" in n for n in report["run"].get("notes", []))

        srv.reset_counters()
        # The cap the line suggests is enough to finish.
        again = CliRunner().invoke(
            cli, ["resume", str(run), "--max-cost", f"{suggested}", "--quiet"]
        )
        assert again.exit_code in (0, 1), again.output
        # Only what was left: the capped run's calls are answered by the cache.
        assert srv.count == calls - capped_calls
        assert len(RunStore.open(run).done) == 4


@pytest.mark.usefixtures("priced")
def test_a_token_cap_from_the_environment_or_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAIServer(responder=responder) as srv:
        monkeypatch.setenv("VERITRAIL_MAX_TOKENS", "0")
        res = _verify(srv, "--cache", "off", "--run-dir", str(tmp_path / "env"))
        assert res.exit_code == 3, res.output
        assert "budget reached: 0 of 4 claims verified" in _last_line(res)
        assert "--max-tokens 1000" in _last_line(res)
        assert srv.count == 0
        monkeypatch.delenv("VERITRAIL_MAX_TOKENS")
        config = tmp_path / "veritrail.toml"
        config.write_text("[verify]\nmax_tokens = 0\n")
        res = _verify(srv, "--cache", "off", "--run-dir", str(tmp_path / "toml"))
        assert res.exit_code == 3 and srv.count == 0, res.output
        # The flag wins over the file.
        res = _verify(
            srv, "--cache", "off", "--run-dir", str(tmp_path / "flag"), "--max-tokens", "10000000"
        )
        assert res.exit_code in (0, 1), res.output
        assert srv.count > 0


def _manifest(tmp_path: Path) -> Path:
    lines = [
        {"id": j, "dag": DAG, "claims": CLAIMS, "out": f"{j}.json", "run_dir": f"run-{j}"}
        for j in ("a", "b")
    ]
    path = tmp_path / "batch.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _batch(
    srv: FakeOpenAIServer, manifest: Path, *args: str, pace: tuple[str, ...] = tuple(SERIAL)
) -> Result:
    return CliRunner().invoke(
        cli,
        [
            "batch",
            str(manifest),
            "--model",
            "openai/loopback",
            "--base-url",
            srv.base_url,
            "--cache",
            "off",
            "--quiet",
            *pace,
            *args,
        ],
    )


@pytest.mark.usefixtures("priced")
@pytest.mark.parametrize(
    "pace",
    [tuple(SERIAL), ("--concurrency", "4")],
    ids=["one call at a time", "4 calls at once, shared prompts"],
)
def test_a_batch_shares_one_budget_across_its_jobs(tmp_path: Path, pace: tuple[str, ...]) -> None:
    """Each job alone costs `one`; with a cap of 0.6 × `one` the two jobs together stay within
    it (one budget per job would let them spend up to 1.2 × `one`), and end close to it."""
    with FakeOpenAIServer(responder=responder) as srv:
        full = _batch(srv, _manifest(tmp_path), pace=pace)
        assert full.exit_code in (0, 1), full.output
        one, calls = _spent(tmp_path / "run-a"), srv.count / 2
        for d in ("run-a", "run-b"):
            shutil.rmtree(tmp_path / d)
        srv.reset_counters()
        cap = 0.6 * one
        res = _batch(srv, _manifest(tmp_path), "--max-cost", f"{cap}", pace=pace)
        assert res.exit_code == 3, res.output
        line = _last_line(res)
        assert line.startswith("budget reached: ") and "of 8 claims verified" in line, line
        both = _spent(tmp_path / "run-a") + _spent(tmp_path / "run-b")
        assert 0 < both <= cap
        # ... and stops within about one call's price of it (the reservation of the refused
        # call is an upper estimate: its prompt at 3 bytes a token, its reply at the longest).
        assert cap - both < 1.5 * one / calls
        # Once the cap was reached no claim of either job started.
        errored = [
            r for d in ("run-a", "run-b") for r in RunStore.open(tmp_path / d).errored.values()
        ]
        assert errored and all("budget reached" in (r.error or "") for r in errored)
        # The same command with a higher cap resumes both jobs: only the claims left are
        # verified (finished ones are kept), and every claim ends with a verdict.
        kept = {
            d: {
                cid: r
                for cid, r in RunStore.open(tmp_path / d).done.items()
                if r.verdict is not None and not r.error
            }
            for d in ("run-a", "run-b")
        }
        if pace == tuple(SERIAL):  # with shared prompts every claim may stop mid-way
            assert any(kept.values())  # the capped run finished some claims
        srv.reset_counters()
        again = _batch(srv, _manifest(tmp_path), "--max-cost", f"{4 * one}", pace=pace)
        assert again.exit_code in (0, 1), again.output
        assert srv.count > 0
        for d in ("run-a", "run-b"):
            store = RunStore.open(tmp_path / d)
            assert not store.errored
            assert all(r.verdict is not None for r in store.done.values())
            assert len(store.done) == 4
            for cid, before in kept[d].items():  # finished claims were not verified again
                assert store.done[cid] == before


@pytest.mark.parametrize("command", ["verify", "batch", "eval"])
def test_a_dollar_cap_on_an_unpriced_model_is_refused_before_any_call(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loopback_model_env(monkeypatch, no_prices=True)
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(responder=responder) as srv:
        if command == "verify":
            res = _verify(srv, "--cache", "off", "--max-cost", "1")
        elif command == "batch":
            res = _batch(srv, _manifest(tmp_path), "--max-cost", "1")
        else:
            data = tmp_path / "tiny.json"
            from clikit import TINY_EVAL_DATASET

            data.write_text(json.dumps(TINY_EVAL_DATASET))
            args: list[Any] = ["eval", str(data), "--model", "openai/loopback"]
            args += ["--base-url", srv.base_url, "--cache", "off", "--max-cost", "1", "--quiet"]
            res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2, res.output
        assert "no price known for openai/loopback: use --max-tokens" in res.stderr
        assert "Traceback" not in res.output
        assert srv.count == 0


@pytest.mark.usefixtures("priced")
def test_ray_refuses_the_cap_rather_than_ignoring_it(tmp_path: Path) -> None:
    with FakeOpenAIServer(responder=responder) as srv:
        res = _batch(srv, _manifest(tmp_path), "--executor", "ray", "--max-tokens", "100")
        assert res.exit_code == 2, res.output
        assert "--max-cost and --max-tokens go with --executor local" in res.stderr
        assert srv.count == 0


@pytest.mark.usefixtures("priced")
def test_eval_stops_at_the_cap(tmp_path: Path) -> None:
    from clikit import TINY_EVAL_DATASET

    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_EVAL_DATASET))
    with FakeOpenAIServer(responder=responder) as srv:
        args = ["eval", str(data), "--model", "openai/loopback", "--base-url", srv.base_url]
        args += ["--cache", "off", "--method", "veritrail:q=1", "--quiet", "--format", "json"]
        res = CliRunner().invoke(cli, [*args, "--max-tokens", "0"])
        assert res.exit_code == 3, res.output
        assert _last_line(res).startswith("budget reached (0 tokens spent, --max-tokens 0)")
        assert srv.count == 0
        ok = CliRunner().invoke(cli, [*args, "--max-tokens", "10000000"])
        assert ok.exit_code == 0, ok.output
        assert srv.count > 0


@pytest.mark.usefixtures("priced")
def test_a_manifest_line_cannot_set_a_cap_of_its_own(tmp_path: Path) -> None:
    """The cap is one budget for the whole batch: a job's own setting is refused, not ignored."""
    line = {"id": "a", "dag": DAG, "claims": CLAIMS, "out": "a.json", "settings": {"max_cost": 1}}
    manifest = tmp_path / "one.jsonl"
    manifest.write_text(json.dumps(line) + "\n")
    with FakeOpenAIServer(responder=responder) as srv:
        res = _batch(srv, manifest)
        assert res.exit_code == 2, res.output
        assert "max_cost can only be set for the whole batch" in res.stderr
        assert srv.count == 0


@pytest.mark.usefixtures("priced")
def test_check_stops_at_the_cap_and_extraction_too(tmp_path: Path) -> None:
    """`check` takes the cap as `verify` does: given claims, none verified at a cap of 0 (no
    call sent); without claims, claim extraction is refused (exit 3, nothing verified)."""
    example = Path(__file__).resolve().parents[2] / "examples" / "check"
    with FakeOpenAIServer(responder=responder) as srv:
        base = ["check", str(example / "answer.txt"), str(example / "sources" / "museum.txt")]
        base += [str(example / "sources" / "collection.txt"), "--model", "openai/loopback"]
        base += ["--base-url", srv.base_url, "--cache", "off", "--quiet", "--max-cost", "0"]
        given = CliRunner().invoke(
            cli, [*base, "--claims", str(example / "claims.json"), "--run-dir", "given"]
        )
        assert given.exit_code == 3, given.output
        assert _last_line(given).startswith("budget reached: 0 of ")
        extracted = CliRunner().invoke(cli, [*base, "--run-dir", "extracted"])
        assert extracted.exit_code == 3, extracted.output
        assert "budget reached ($0 spent, --max-cost 0) while extracting claims" in extracted.stderr
        assert srv.count == 0
