"""`veritrail check ANSWER SOURCE...` and `veritrail.check`: chunking, the DAG it builds, the
CLI's inputs (files, globs, stdin), outputs and exit codes, with the oracle and over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import veritrail as vt
from loopback_model import loopback
from veritrail.cli.main import cli
from veritrail.method.segment import split_sentences
from veritrail.report import comparable
from veritrail.run.job import JobInputError
from veritrail.run.sources import SourceText, chunk_text, single_step_dag

MUSEUM = (
    "The Harbour Museum opened in 1921. It was founded by Marta Reyes. "
    "The building has three floors. The museum holds 412 nautical charts."
)
ANSWER = "The Harbour Museum opened in 1921. It has a roof garden."


def _invoke(*args: str, input: str | None = None) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["check", *args], input=input)
    return res.exit_code, res.output


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "answer.txt").write_text(ANSWER)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "museum.txt").write_text(MUSEUM)
    (tmp_path / "src" / "other.txt").write_text("Ships were built in the harbour until 1950.")
    return tmp_path


# -- chunks and the DAG -------------------------------------------------------------------------


def test_chunks_by_sentences_and_by_tokens() -> None:
    assert chunk_text(MUSEUM, sentences=2) == [
        "The Harbour Museum opened in 1921. It was founded by Marta Reyes.",
        "The building has three floors. The museum holds 412 nautical charts.",
    ]
    assert len(chunk_text(MUSEUM)) == 1  # default: 10 sentences
    assert chunk_text(MUSEUM, tokens=1) == split_sentences(MUSEUM)  # a sentence per chunk at least
    with pytest.raises(JobInputError, match="not both"):
        chunk_text(MUSEUM, sentences=2, tokens=10)
    with pytest.raises(JobInputError, match="at least 1"):
        chunk_text(MUSEUM, sentences=0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.sampled_from(["Alpha beta.", "Gamma delta epsilon!", "Zeta?", "Eta theta iota."]),
        min_size=1,
        max_size=25,
    ),
    st.integers(1, 6),
)
def test_chunks_keep_every_sentence_in_order(sents: list[str], size: int) -> None:
    text = " ".join(sents)
    chunks = chunk_text(text, sentences=size)
    assert [s for c in chunks for s in split_sentences(c)] == split_sentences(text)
    assert all(len(split_sentences(c)) <= size for c in chunks)


def test_single_step_dag_shape() -> None:
    mem = single_step_dag(
        ANSWER, [SourceText("a.txt", MUSEUM), SourceText("b", "One. Two.")], chunk_sentences=3
    )
    dag = mem.dag
    assert dag.terminal == "answer"
    assert sorted(dag.roots) == ["a.txt#1", "a.txt#2", "b#1"]
    assert dag.sources("answer") == ("a.txt#1", "a.txt#2", "b#1")
    with pytest.raises(JobInputError, match="empty"):
        single_step_dag(ANSWER, [SourceText("e", "   ")])
    with pytest.raises(JobInputError, match="twice"):
        single_step_dag(ANSWER, [SourceText("e", "A."), SourceText("e", "B.")])
    with pytest.raises(JobInputError, match="answer is empty"):
        single_step_dag(" ", [SourceText("e", "A.")])


# -- the command, with the oracle ---------------------------------------------------------------


def _oracle(path: Path, node: str) -> Path:
    doc = {
        "claims": [
            {
                "claim": "The Harbour Museum opened in 1921.",
                "evidence": {node: [0]},
                "verdicts": ["Fully Supported"],
            },
            {"claim": "It has a roof garden.", "verdicts": ["Not Fully Supported"]},
        ]
    }
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_check_cli_with_the_oracle_names_file_and_chunk(files: Path) -> None:
    claims = files / "claims.json"
    claims.write_text(json.dumps(["The Harbour Museum opened in 1921.", "It has a roof garden."]))
    oracle = _oracle(files / "oracle.json", "src/museum.txt#1")
    args = ["answer.txt", "src/*.txt", "--claims", str(claims), "--oracle", str(oracle)]
    args += ["--chunk-sentences", "2"]
    code, out = _invoke(*args, "--out", "r.json", "--html", "--quiet")
    assert code == 0, out
    report = json.loads((files / "r.json").read_text())
    assert (files / "r.html").is_file()
    c1, c2 = report["claims"]
    assert c1["verdict"] == "Fully Supported"
    assert c1["provenance"] == [["src/museum.txt#1"]]
    assert c2["verdict"] == "Not Fully Supported"
    # The DAG is kept in the run directory; the run resumes like any other.
    run_dir = Path(report["run"]["run_dir"])
    assert (run_dir / "dag.json").is_file() and report["dag"]["path"] == str(run_dir / "dag.json")
    res = CliRunner().invoke(cli, ["resume", str(run_dir), "--out", "again.json", "--quiet"])
    assert res.exit_code == 0, res.output
    assert comparable(json.loads((files / "again.json").read_text())) == comparable(report)
    # Same command again: served from the run store; the gate makes it exit 1.
    code, out = _invoke(*args, "--out", "r2.json", "--max-unsupported", "0.4")
    assert code == 1 and "gate failed" in out
    assert json.loads((files / "r2.json").read_text())["run"]["resumed_claims"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["answer.txt", "missing.txt"], "source file missing.txt not found"),
        (["answer.txt", "nothing*.txt"], "no file matches nothing*.txt"),
        (["nope.txt", "src/museum.txt"], "answer file nope.txt not found"),
        (["answer.txt", "src/museum.txt", "--out", "src/museum.txt"], "never overwritten"),
        (["answer.txt", "src/museum.txt", "--chunk-sentences", "0"], "at least 1"),
        (["answer.txt", "src/museum.txt", "--oracle", "o.json"], "--oracle needs --claims"),
        (["-", "-"], "only once"),
    ],
)
def test_check_cli_bad_input_exits_2(files: Path, args: list[str], message: str) -> None:
    (files / "empty.txt").write_text("")
    code, out = _invoke(*args, input="x")
    assert code == 2 and message in out and "Traceback" not in out


def test_check_cli_dry_run_calls_nothing(files: Path) -> None:
    code, out = _invoke("answer.txt", "src/museum.txt", "--dry-run", "--model", "openai/x")
    assert code == 0 and "dry run: no model was called" in out and "2 stages" in out
    assert not (files / "runs").exists()


# -- over HTTP ----------------------------------------------------------------------------------


def test_check_cli_over_http_extracts_claims_from_stdin(
    files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with loopback(monkeypatch) as srv:
        code, out = _invoke(
            "-",
            "src/museum.txt",
            "--question",
            "When did it open?",
            "--out",
            "r.json",
            "--max-unsupported",
            "0",
            input=ANSWER,
        )
        assert srv.count > 0
        prompts = [m["content"] for r in srv.requests for m in r["messages"]]
    assert code == 1, out
    report = json.loads((files / "r.json").read_text())
    got = [(c["text"], c["verdict"]) for c in report["claims"]]
    assert got == [
        ("The Harbour Museum opened in 1921.", "Fully Supported"),
        ("It has a roof garden.", "Not Fully Supported"),
    ]
    assert any("When did it open?" in p for p in prompts)  # --question reached extraction
    assert report["claims"][0]["provenance"] == [["src/museum.txt#1"]]


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_api_check_with_texts_paths_and_names(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with loopback(monkeypatch):
        by_name = vt.check(ANSWER, {"museum": MUSEUM}, chunk_sentences=1)
        by_text = vt.check(ANSWER, [MUSEUM, "Unrelated text."])
        by_path = vt.check(files / "answer.txt", [files / "src" / "museum.txt"])
    assert [r.verdict for r in by_name.claims] == [
        vt.Verdict.FULLY_SUPPORTED,
        vt.Verdict.NOT_FULLY_SUPPORTED,
    ]
    assert by_name.claims[0].provenance == (("museum#1",),)
    assert by_text.claims[0].provenance == (("source1#1",),)
    path_id = f"{files / 'src' / 'museum.txt'}#1"
    assert by_path.claims[0].provenance == ((path_id,),)
    assert by_name.summary.unsupported_share == 0.5


def test_api_check_bad_input(files: Path) -> None:
    with pytest.raises(JobInputError, match="give at least one source"):
        vt.check(ANSWER, [])
    with pytest.raises(JobInputError, match="not found"):
        vt.check(ANSWER, [files / "nope.txt"])


def test_the_readme_check_command_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import re
    import shlex
    import shutil

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^veritrail check (examples/check/.*)$", readme, re.M)
    assert m, "the README's quick start shows `veritrail check`"
    shutil.copytree(root / "examples" / "check", tmp_path / "examples" / "check")
    with loopback(monkeypatch):
        code, out = _invoke(*shlex.split(m.group(1)), "--quiet")
    # The example answer holds one made-up detail (who drew the chart): Not Fully Supported.
    assert code == 0, out
    report = json.loads((tmp_path / "report.json").read_text())
    assert (tmp_path / "report.html").is_file()
    verdicts = [c["verdict"] for c in report["claims"]]
    assert "Not Fully Supported" in verdicts and "Fully Supported" in verdicts
