"""`veritrail export RUN --to phoenix`: on a real Phoenix server, a pipeline whose second map step
injects a sentence gets one verdict annotation per claim on the final output's span and one
"unsupported content" annotation on exactly the span of that map step; exporting again updates
the same annotations (same ids, same count); the configs exist once; the API key is never
written or printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from phoenixkit import CHUNKS, FINAL, INJECTED, MAPS, PhoenixServer, loopback_model, send_traces

from veritrail.adapters.phoenix import ORIGIN_NAME, VERDICT_NAME
from veritrail.cli.main import cli

pytestmark = pytest.mark.slow

KEY = "phx-export-key-91b2c3d4e5"


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


def _files_text(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(root.rglob("*")) if p.is_file())


def test_verdicts_land_on_the_right_spans_and_a_second_export_updates_them(
    phoenix: PhoenixServer, project: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHOENIX_API_KEY", KEY)  # auth is off on the test server: sent, unused
    [sent] = send_traces(phoenix.url, project, [(CHUNKS, MAPS, FINAL)])
    phoenix.wait_for_traces(project, 1)
    dag = tmp_path / "dag.json"
    outputs = []
    code, out = run(
        "from-trace",
        "--phoenix",
        phoenix.url,
        "--project",
        project,
        "--trace-id",
        sent.trace_id,
        "--out",
        str(dag),
    )
    outputs.append(out)
    assert code == 0, out
    with loopback_model() as (_srv, env):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        code, out = run("verify", str(dag), "--run-dir", str(tmp_path / "run"), "--quiet")
        outputs.append(out)
    assert code == 0, out
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    verdicts = {c["text"]: c["verdict"] for c in report["claims"]}
    assert verdicts[INJECTED] == "Not Fully Supported"
    assert [v for t, v in verdicts.items() if t != INJECTED] == ["Fully Supported"] * 2

    code, out = run("export", str(tmp_path / "run"), "--to", "phoenix", "--endpoint", phoenix.url)
    outputs.append(out)
    assert code == 0, out
    assert "3 verdict(s), 1 unsupported-content mark(s)" in out

    spans = [sent.root, *sent.maps, sent.reduce]
    first = phoenix.annotations(project, spans)
    on = {s: [a for a in first if a["span_id"] == s] for s in spans}
    # One verdict per claim on the final output's span (the reduce step wrote it).
    final = sorted(on[sent.reduce], key=lambda a: a["identifier"])
    assert [a["name"] for a in final] == [VERDICT_NAME] * 3
    assert {a["metadata"]["claim"]: a["result"]["label"] for a in final} == verdicts
    claim3 = next(a for a in final if a["metadata"]["claim"] == INJECTED)
    assert claim3["result"]["score"] == 0.0
    assert claim3["result"]["explanation"] == next(
        c["reasoning"] for c in report["claims"] if c["text"] == INJECTED
    )
    assert claim3["annotator_kind"] == "LLM"
    # The unsupported content entered at the second map step: its span, and no other.
    [origin] = on[sent.maps[1]]
    assert origin["name"] == ORIGIN_NAME
    assert origin["identifier"] == claim3["identifier"]
    assert INJECTED in origin["result"]["explanation"]
    assert "Evidence trail" in origin["result"]["explanation"]
    assert origin["metadata"]["claim"] == INJECTED
    assert on[sent.maps[0]] == [] and on[sent.root] == []

    # Again: the same annotations, updated in place.
    code, out = run("export", str(tmp_path / "run"), "--to", "phoenix", "--endpoint", phoenix.url)
    outputs.append(out)
    assert code == 0, out
    second = phoenix.annotations(project, spans)
    assert len(second) == len(first) == 4
    assert sorted(a["id"] for a in second) == sorted(a["id"] for a in first)

    configs = phoenix.get("/v1/annotation_configs", limit=100)["data"]
    names = [c["name"] for c in configs]
    assert names.count(VERDICT_NAME) == 1 and names.count(ORIGIN_NAME) == 1
    verdict_config = next(c for c in configs if c["name"] == VERDICT_NAME)
    assert verdict_config["type"] == "CATEGORICAL"
    assert {v["label"] for v in verdict_config["values"]} >= set(verdicts.values())

    # The key: in no file written and in no output.
    assert KEY not in _files_text(tmp_path)
    assert not any(KEY in o for o in outputs)


def test_a_run_without_span_ids_cannot_be_exported(tmp_path: Path) -> None:
    (tmp_path / "dag.json").write_text(
        json.dumps(
            {
                "nodes": [
                    {"id": "a", "text": "Sky is blue."},
                    {"id": "b", "text": "Sky is blue.", "sources": ["a"]},
                ]
            }
        )
    )
    with pytest.MonkeyPatch.context() as mp, loopback_model() as (_srv, env):
        for k, v in env.items():
            mp.setenv(k, v)
        code, out = run("verify", str(tmp_path / "dag.json"), "--run-dir", str(tmp_path / "run"))
    assert code == 0, out
    code, out = run(
        "export", str(tmp_path / "run"), "--to", "phoenix", "--endpoint", "http://127.0.0.1:9"
    )
    assert code == 2, out
    assert "no span ids" in out
    (tmp_path / "empty").mkdir()
    code, out = run(
        "export", str(tmp_path / "empty"), "--to", "phoenix", "--endpoint", "http://127.0.0.1:9"
    )
    assert code == 2 and "no report.json" in out
