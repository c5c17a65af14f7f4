"""Citation statuses exported onto the trace (`veritrail export RUN --to phoenix|langfuse`): a run
with `--citations auto` over a map-reduce trace whose final output cites its inputs by number
gets one `veritrail.citation` annotation (score) per claim on the final output's span, the status
as its label and the cited and supporting nodes in its explanation; a second export updates them
in place; a run without citations writes none (and creates no citation config).

The final output cites `[1]` (the first input) for both of its first two sentences: the first is
in input 1 (supported_by_cited), the second only in input 2 (misattributed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from langfusekit import langfuse_server
from phoenixkit import CHUNKS, MAPS, PhoenixServer, loopback_model, send_traces

from veritrail.adapters.phoenix import CITATION_NAME, VERDICT_NAME
from veritrail.cli.main import cli

FINAL_CITED = (
    "Marley died seven years ago [1]. Scrooge refuses to donate to charity [1]. "
    "Scrooge owns a red bicycle [2]."
)
CLAIMS = [
    {"id": "c1", "text": "Marley died seven years ago.", "sentence_indices": [0]},
    {"id": "c2", "text": "Scrooge refuses to donate to charity.", "sentence_indices": [1]},
    {"id": "c3", "text": "Scrooge owns a red bicycle.", "sentence_indices": [2]},
]
"""Given without their markers (a model that copies `[1]` into the claim verifies it too)."""
PUBLIC = "pk-lf-test-cite-1a2b"
SECRET = "sk-lf-test-cite-9z8y"


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


def verify(dag: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> Any:
    claims = dag.parent / "claims.json"
    claims.write_text(json.dumps(CLAIMS), encoding="utf-8")
    with loopback_model() as (_srv, env):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        code, out = run(
            "verify", str(dag), "--claims", str(claims), "--run-dir", str(run_dir), "--quiet",
            *extra,
        )  # fmt: skip
    assert code == 0, out
    return json.loads((run_dir / "report.json").read_text(encoding="utf-8"))


def statuses(report: Any) -> dict[str, dict[str, Any]]:
    return {c["id"]: c["citation"] for c in report["claims"]}


def check_marks(marks: list[dict[str, Any]], report: Any, label_of: str) -> None:
    """One citation mark per claim with a status: its label, and the nodes in its text."""
    want = {cid: ct for cid, ct in statuses(report).items() if ct["kind"] is not None}
    assert len(marks) == len(want) == len(report["claims"])
    by_claim = {m["metadata"]["claim_id"]: m for m in marks}
    for cid, ct in want.items():
        m = by_claim[cid]
        assert m[label_of] == ct["kind"]
        text = m["explanation"]
        assert f"cited: {', '.join(ct['cited_nodes'])}" in text
        assert f"evidence in: {', '.join(ct['supporting_nodes']) or 'no source'}" in text
    kinds = [ct["kind"] for ct in want.values()]
    # The first sentence cites the input that holds it, the second cites the wrong input.
    assert kinds[:2] == ["supported_by_cited", "misattributed"]


def langfuse_trace() -> dict[str, object]:
    def obs(oid: str, name: str, start: int, prompt: str, out: str) -> dict[str, object]:
        return {
            "id": oid, "traceId": "lf-trace-c", "type": "GENERATION", "name": name,
            "startTime": f"2026-11-26T10:00:0{start}.000Z",
            "endTime": f"2026-11-26T10:00:0{start}.500Z", "parentObservationId": None,
            "input": [{"role": "user", "content": prompt}],
            "output": {"role": "assistant", "content": out},
        }  # fmt: skip

    return {
        "id": "lf-trace-c",
        "input": {"chunks": list(CHUNKS)},
        "output": FINAL_CITED,
        "observations": [
            obs("obs-map-1", "map", 1, CHUNKS[0], MAPS[0]),
            obs("obs-map-2", "map", 2, CHUNKS[1], MAPS[1]),
            obs("obs-reduce", "reduce", 3, "\n\n".join(MAPS), FINAL_CITED),
        ],
    }


def test_citation_scores_on_langfuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "trace.json").write_text(json.dumps(langfuse_trace()))
    dag = tmp_path / "dag.json"
    code, out = run("from-trace", str(tmp_path / "trace.json"), "--out", str(dag))
    assert code == 0, out
    report = verify(dag, tmp_path / "run", monkeypatch, "--citations", "auto")
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    with langfuse_server(PUBLIC, SECRET) as lf:
        code, out1 = run("export", str(tmp_path / "run"), "--to", "langfuse", "--endpoint", lf.url)
        assert code == 0, out1
        assert "3 citation mark(s)" in out1
        first = dict(lf.scores)
        code, out2 = run("export", str(tmp_path / "run"), "--to", "langfuse", "--endpoint", lf.url)
        assert code == 0, out2
    assert lf.scores == first  # updated in place, not added
    scores = [s for s in lf.scores.values() if s["name"] == CITATION_NAME]
    assert {s["observationId"] for s in scores} == {"obs-reduce"}
    assert all(s["dataType"] == "CATEGORICAL" for s in scores)
    check_marks(
        [{**s, "explanation": s["comment"], "label": s["value"]} for s in scores], report, "label"
    )
    misattributed = next(s for s in scores if s["value"] == "misattributed")
    assert misattributed["metadata"]["score"] == 0.0


@pytest.mark.slow
def test_citation_annotations_on_phoenix(
    phoenix: PhoenixServer, project: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    [sent] = send_traces(phoenix.url, project, [(CHUNKS, MAPS, FINAL_CITED)])
    phoenix.wait_for_traces(project, 1)
    dag = tmp_path / "dag.json"
    code, out = run(
        "from-trace", "--phoenix", phoenix.url, "--project", project,
        "--trace-id", sent.trace_id, "--out", str(dag),
    )  # fmt: skip
    assert code == 0, out
    plain = verify(dag, tmp_path / "plain", monkeypatch)
    assert all("citation" not in c for c in plain["claims"])
    code, out = run("export", str(tmp_path / "plain"), "--to", "phoenix", "--endpoint", phoenix.url)
    assert code == 0 and "citation mark" not in out, out
    spans = [sent.root, *sent.maps, sent.reduce]
    assert not [a for a in phoenix.annotations(project, spans) if a["name"] == CITATION_NAME]

    report = verify(dag, tmp_path / "run", monkeypatch, "--citations", "auto")
    for _ in range(2):  # the second export updates the same annotations
        code, out = run(
            "export", str(tmp_path / "run"), "--to", "phoenix", "--endpoint", phoenix.url
        )
        assert code == 0, out
        assert "3 citation mark(s)" in out
    marks = [a for a in phoenix.annotations(project, spans) if a["name"] == CITATION_NAME]
    assert {a["span_id"] for a in marks} == {sent.reduce}
    check_marks(
        [{**a, "explanation": a["result"]["explanation"], "label": a["result"]["label"]}
         for a in marks],
        report,
        "label",
    )  # fmt: skip
    verdicts = [a for a in phoenix.annotations(project, spans) if a["name"] == VERDICT_NAME]
    assert len(verdicts) == 3
    configs = phoenix.get("/v1/annotation_configs", limit=100)["data"]
    [config] = [c for c in configs if c["name"] == CITATION_NAME]
    assert config["type"] == "CATEGORICAL"
    assert {v["label"] for v in config["values"]} >= {"supported_by_cited", "misattributed"}
