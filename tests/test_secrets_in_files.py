"""No secret from an input text reaches a file veritrail writes (issue 29, item 7).

Reports were redacted, but `from-trace`'s DAG, `check`'s copy of its DAG in the run directory
and the model cache kept input texts verbatim. Now the DAG files go through the same redaction as
reports; the model cache keeps replies as the model wrote them (a hit must equal the call it
replaces), so it is created readable by its owner only and `veritrail cache` prints no reply.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from loopback_model import loopback
from veritrail.cli.main import cli
from veritrail.redaction import MASK

KEY = "sk-proj-" + "Q7" * 12
"""Key-shaped: removed wherever it appears."""
ENV_VALUE = "env-held-value-4821"
"""The value of a `*_TOKEN` variable: removed because the environment holds it."""
URL = "https://alice:pw-in-url-9931@db.example.com/v1"
SECRETS = (KEY, ENV_VALUE, "pw-in-url-9931")
ENV = {"ARCHIVE_SERVICE_TOKEN": ENV_VALUE}

DOCUMENT = (
    f"The archive answers at {URL} with the key {KEY}. "
    f"Its service token is {ENV_VALUE}. The reading room opens at nine."
)
ANSWER = f"Use the key {KEY} and the token {ENV_VALUE}; the reading room opens at nine."


def _invoke(args: list[str], env: dict[str, str] | None = None) -> Result:
    return CliRunner(env={**ENV, **(env or {})}).invoke(cli, args)


def _no_secret_in(directory: Path) -> None:
    """Every file under `directory` is free of the secrets (and something was written)."""
    files = [p for p in directory.rglob("*") if p.is_file()]
    assert files
    for p in files:
        data = p.read_bytes()
        for s in SECRETS:
            assert s.encode() not in data, f"{s} in {p}"


def _trace(path: Path) -> None:
    """A retrieval step and one generation (opentelemetry-sdk span JSON): the document and the
    answer hold the secrets."""

    def span(sid: str, parent: str | None, t: int, attrs: dict[str, str]) -> str:
        return json.dumps(
            {
                "name": sid,
                "context": {"trace_id": "0x" + "ab" * 16, "span_id": "0x" + sid},
                "parent_id": None if parent is None else "0x" + parent,
                "start_time": f"2025-05-01T10:00:0{t}.000000Z",
                "end_time": f"2025-05-01T10:00:0{t + 1}.000000Z",
                "attributes": attrs,
            }
        )

    question = "How do I reach the archive?"
    path.write_text(
        "\n".join(
            [
                span(
                    "b",
                    "a",
                    1,
                    {
                        "openinference.span.kind": "RETRIEVER",
                        "input.value": question,
                        "retrieval.documents.0.document.content": DOCUMENT,
                    },
                ),
                span(
                    "c",
                    "a",
                    3,
                    {
                        "openinference.span.kind": "LLM",
                        "llm.input_messages.0.message.content": f"{DOCUMENT}\n\n{question}",
                        "llm.output_messages.0.message.content": ANSWER,
                    },
                ),
                span(
                    "a",
                    None,
                    0,
                    {
                        "openinference.span.kind": "CHAIN",
                        "input.value": question,
                        "output.value": ANSWER,
                    },
                ),
            ]
        ),
        encoding="utf-8",
    )


def test_from_trace_writes_no_secret(tmp_path: Path) -> None:
    trace = tmp_path / "in" / "trace.jsonl"
    trace.parent.mkdir()
    _trace(trace)
    out = tmp_path / "out" / "dag.json"
    out.parent.mkdir()
    res = _invoke(["from-trace", str(trace), "--out", str(out), "--explain"])
    assert res.exit_code == 0, res.output
    _no_secret_in(out.parent)
    for s in SECRETS:
        assert s not in res.output
    dag = json.loads(out.read_text(encoding="utf-8"))
    texts = {n["id"]: n["text"] for n in dag["nodes"]}
    assert texts["doc-1"].startswith("The archive answers at https://***@db.example.com/v1")
    assert MASK in texts["gen-1"] and "reading room opens at nine" in texts["gen-1"]
    assert "doc-1" in dag["nodes"][-1]["sources"]  # matched before redaction, as before
    assert _invoke(["dag", "validate", str(out)]).exit_code == 0


def test_check_keeps_no_secret_in_its_run_directory(tmp_path: Path) -> None:
    (tmp_path / "answer.txt").write_text(ANSWER, encoding="utf-8")
    (tmp_path / "source.txt").write_text(DOCUMENT, encoding="utf-8")
    claim = "The reading room opens at nine."
    (tmp_path / "claims.json").write_text(json.dumps([claim]), encoding="utf-8")
    oracle = {
        "claims": [
            {"claim": claim, "evidence": {"source.txt#1": [2]}, "verdicts": ["Fully Supported"]}
        ]
    }
    (tmp_path / "oracle.json").write_text(json.dumps(oracle), encoding="utf-8")
    run_dir, reports = tmp_path / "run", tmp_path / "reports"
    reports.mkdir()
    args = ["check", "answer.txt", "source.txt", "--claims", "claims.json"]
    args += ["--oracle", "oracle.json", "--chunk-sentences", "5", "--quiet"]
    res = _invoke([*args, "--run-dir", str(run_dir), "--out", str(reports / "r.json")])
    assert res.exit_code == 0, res.output
    _no_secret_in(run_dir)
    _no_secret_in(reports)
    dag = json.loads((run_dir / "dag.json").read_text(encoding="utf-8"))
    assert MASK in dag["nodes"][0]["text"] and MASK in dag["nodes"][-1]["text"]
    # The run directory's DAG is the one the run verified: it resumes, to the same report.
    res = _invoke(["resume", str(run_dir), "--out", str(reports / "again.json"), "--quiet"])
    assert res.exit_code == 0, res.output
    assert json.loads((reports / "again.json").read_text())["claims"][0]["verdict"] == (
        "Fully Supported"
    )


def test_the_model_cache_is_private_and_never_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # verify reads a DAG file as it is (the user's file, sent to the model as written): claims
    # extracted from its answer quote the secret, and the cache keeps the reply that held them.
    dag = {
        "nodes": [
            {"id": "doc", "text": DOCUMENT},
            {"id": "answer", "text": ANSWER, "sources": ["doc"]},
        ]
    }
    (tmp_path / "dag.json").write_text(json.dumps(dag), encoding="utf-8")
    cache = tmp_path / "cache" / "cache.sqlite"
    monkeypatch.setenv("ARCHIVE_SERVICE_TOKEN", ENV_VALUE)
    with loopback(monkeypatch) as srv:
        res = CliRunner().invoke(
            cli, ["verify", "dag.json", "--cache", str(cache), "--out", "report.json", "--quiet"]
        )
        assert srv.count > 0
    assert res.exit_code in (0, 1), res.output
    stored = b"".join(p.read_bytes() for p in cache.parent.iterdir())
    assert KEY.encode() in stored  # what the documentation says: replies are kept as written
    for p in cache.parent.iterdir():  # the database and SQLite's -wal/-shm files beside it
        assert stat.S_IMODE(os.stat(p).st_mode) & 0o077 == 0, f"{p} is readable by others"
    for command in (["stats"], ["clear", "--step", "claim_disambiguation"], ["clear"]):
        res = CliRunner().invoke(cli, ["cache", *command, "--cache", str(cache)])
        assert res.exit_code == 0, res.output
        for s in SECRETS:
            assert s not in res.output
    report = (tmp_path / "report.json").read_bytes()
    for s in SECRETS:
        assert s.encode() not in report


def test_every_saved_dag_is_redacted_and_written_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `save_dag` serves the recorder, the live handlers, from-booookscore, from-graphrag and the
    # pipelines: the same rule as from-trace's DAG, and never half a file in place of one.
    from veritrail.dag import Dag, load_dag, save_dag

    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    dag = Dag.from_records(
        [
            {"id": "src", "text": DOCUMENT},
            {"id": "final", "text": ANSWER, "sources": ["src"]},
        ],
        meta={"endpoint": URL},
    )
    for name in ("dag.json", "dag.jsonl"):
        out = tmp_path / name
        save_dag(dag, out)
        text = out.read_text(encoding="utf-8")
        assert not any(s in text for s in SECRETS), name
        assert MASK in text
        assert [n.id for n in load_dag(out)] == ["src", "final"]
        before = out.read_bytes()
        broken = Dag.from_records([{"id": "x", "text": "half \ud800 a surrogate"}])
        with pytest.raises(UnicodeEncodeError):
            save_dag(broken, out)
        assert out.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            p for p in ("dag.json", "dag.jsonl") if (tmp_path / p).exists()
        )


def test_a_dag_given_in_memory_is_kept_redacted_in_its_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import veritrail

    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    claim = "The reading room opens at nine."
    oracle = tmp_path / "oracle.json"
    oracle.write_text(
        json.dumps(
            {
                "claims": [
                    {"claim": claim, "evidence": {"src": [2]}, "verdicts": ["Fully Supported"]}
                ]
            }
        ),
        encoding="utf-8",
    )
    dag = {
        "nodes": [
            {"id": "src", "text": DOCUMENT},
            {"id": "final", "text": ANSWER, "sources": ["src"]},
        ],
        "meta": {"endpoint": URL},
    }
    report = veritrail.verify(dag, [claim], oracle=oracle, run_dir=tmp_path / "run")
    assert report.exit_code == 0
    written = "".join(
        p.read_text(encoding="utf-8") for p in (tmp_path / "run").iterdir() if p.is_file()
    )
    assert "dag.json" in {p.name for p in (tmp_path / "run").iterdir()}
    assert not any(s in written for s in SECRETS)
