"""`veritrail export RUN --to langfuse`: the verdicts of a run over a Langfuse trace export become
Langfuse scores on the trace and its observations, through a loopback server that follows
Langfuse's published OpenAPI document (every request validated against ``CreateScoreRequest``);
a second export updates the same scores; missing or refused keys are bad input (2), an
unreachable server is 3; the keys are never printed or written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from langfusekit import REQUEST_SCHEMA, langfuse_server
from phoenixkit import CHUNKS, FINAL, INJECTED, MAPS, free_port, loopback_model

from veritrail.adapters.langfuse_scores import score_body, score_id
from veritrail.adapters.phoenix import ORIGIN_NAME, VERDICT_NAME
from veritrail.cli.main import cli

PUBLIC = "pk-lf-test-1a2b3c4d"
SECRET = "sk-lf-test-9z8y7x6w5v"


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


def _observation(oid: str, name: str, start: int, prompt: str, out: str) -> dict[str, object]:
    return {
        "id": oid,
        "traceId": "lf-trace-1",
        "type": "GENERATION",
        "name": name,
        "startTime": f"2026-11-26T10:00:0{start}.000Z",
        "endTime": f"2026-11-26T10:00:0{start}.500Z",
        "parentObservationId": None,
        "input": [{"role": "user", "content": prompt}],
        "output": {"role": "assistant", "content": out},
    }


def langfuse_trace() -> dict[str, object]:
    return {
        "id": "lf-trace-1",
        "input": {"chunks": list(CHUNKS)},
        "output": FINAL,
        "observations": [
            _observation("obs-map-1", "map", 1, CHUNKS[0], MAPS[0]),
            _observation("obs-map-2", "map", 2, CHUNKS[1], MAPS[1]),
            _observation("obs-reduce", "reduce", 3, "\n\n".join(MAPS), FINAL),
        ],
    }


@pytest.fixture
def verified_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "trace.json").write_text(json.dumps(langfuse_trace()))
    code, out = run("from-trace", str(tmp_path / "trace.json"), "--out", str(tmp_path / "dag.json"))
    assert code == 0, out
    with loopback_model() as (_srv, env):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        code, out = run(
            "verify", str(tmp_path / "dag.json"), "--run-dir", str(tmp_path / "run"), "--quiet"
        )
    assert code == 0, out
    return tmp_path / "run"


def test_scores_land_on_the_trace_and_observations_and_update_in_place(
    verified_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    with langfuse_server(PUBLIC, SECRET) as lf:
        code, out1 = run("export", str(verified_run), "--to", "langfuse", "--endpoint", lf.url)
        assert code == 0, out1
        assert "3 verdict(s), 1 unsupported-content mark(s) written to langfuse" in out1
        first = dict(lf.scores)
        code, out2 = run("export", str(verified_run), "--to", "langfuse", "--endpoint", lf.url)
        assert code == 0, out2
    assert len(lf.requests) == 8 and len(lf.scores) == 4 and lf.scores == first
    scores = list(lf.scores.values())
    assert {s["traceId"] for s in scores} == {"lf-trace-1"}
    verdicts = [s for s in scores if s["name"] == VERDICT_NAME]
    assert {s["observationId"] for s in verdicts} == {"obs-reduce"}
    assert {s["metadata"]["claim"]: s["value"] for s in verdicts}[INJECTED] == "Not Fully Supported"
    assert all(s["dataType"] == "CATEGORICAL" for s in scores)
    [origin] = [s for s in scores if s["name"] == ORIGIN_NAME]
    assert origin["observationId"] == "obs-map-2"
    assert INJECTED in origin["comment"]
    report = json.loads((verified_run / "report.json").read_text())
    injected = next(c for c in report["claims"] if c["text"] == INJECTED)
    assert (
        next(s for s in verdicts if s["metadata"]["claim"] == INJECTED)["comment"]
        == (injected["reasoning"])
    )
    files = "\n".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    for secret in (PUBLIC, SECRET):
        assert secret not in out1 + out2 and secret not in files


def test_bodies_conform_to_the_published_schema() -> None:
    import jsonschema

    from veritrail.adapters.phoenix.marks import Mark

    mark = Mark("veritrail", "t1", "s1", "veritrail:c1", "Fully Supported", 1.0, "ok", {"a": 1})
    jsonschema.validate(score_body(mark), REQUEST_SCHEMA)
    assert score_id(mark) == score_body(mark)["id"] == score_id(mark)  # stable
    other = Mark("veritrail", "t1", "s1", "veritrail:c2", "Fully Supported", 1.0, "ok")
    assert score_id(other) != score_id(mark)


def test_keys_missing_refused_and_server_unreachable(
    verified_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANGFUSE_PUBLIC_KEY", raising=False)
    monkeypatch.delenv("LANGFUSE_SECRET_KEY", raising=False)
    with langfuse_server(PUBLIC, SECRET) as lf:
        code, out = run("export", str(verified_run), "--to", "langfuse", "--endpoint", lf.url)
        assert code == 2 and "LANGFUSE_SECRET_KEY" in out
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-wrong-secret-000")
        code, out = run("export", str(verified_run), "--to", "langfuse", "--endpoint", lf.url)
        assert code == 2 and "refused the keys" in out, out
        assert lf.refused == 1 and not lf.scores
        assert "sk-lf-wrong-secret-000" not in out
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    url = f"http://127.0.0.1:{free_port()}"
    code, out = run("export", str(verified_run), "--to", "langfuse", "--endpoint", url)
    assert code == 3 and f"cannot reach Langfuse at {url}" in out
