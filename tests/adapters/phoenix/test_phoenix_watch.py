"""`veritrail watch` against a real Phoenix server.

The main test sends 200 traces, watches them at sample rate 0.25, kills the watcher with SIGKILL
while verifications are in flight, restarts it, and checks that exactly the traces the hash
samples were annotated, each once (one set of annotations, one run directory, the traces
finished before the kill not taken again). Others: a trace with no generating span is skipped
with its reason, SIGTERM stops cleanly (130), and the usage and server errors.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from phoenixkit import (
    INJECTED,
    PhoenixServer,
    SentTrace,
    free_port,
    loopback_model,
    pipeline,
    send_traces,
    wait_until,
)

from veritrail.adapters.phoenix import ORIGIN_NAME, VERDICT_NAME, sampled
from veritrail.adapters.phoenix.sampling import sample_point
from veritrail.adapters.phoenix.watch import matches, parse_filters
from veritrail.cli.main import cli

KEY = "phx-watch-key-0a9b8c7d6e"
ENTRY = "from veritrail.cli.main import main; main()"


def watch_cmd(url: str, project: str, *extra: str) -> list[str]:
    return [sys.executable, "-c", ENTRY, "watch", "--phoenix", url, "--project", project, *extra]


def checkpoint(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text())["traces"])
    except (OSError, ValueError, KeyError):
        return {}


def annotated(path: Path) -> set[str]:
    return {t for t, v in checkpoint(path).items() if v["status"] == "annotated"}


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra, "PHOENIX_API_KEY": KEY}


# -- sampling and filters (no server) ------------------------------------------------------------


def test_sampling_is_a_pure_function_of_the_trace_id() -> None:
    ids = [f"{i:032x}" for i in range(2000)]
    quarter = {t for t in ids if sampled(t, 0.25)}
    assert {t for t in ids if sampled(t.upper(), 0.25)} == quarter
    assert {t for t in ids if sampled("0x" + t, 0.25)} == quarter
    assert 400 < len(quarter) < 600
    assert quarter <= {t for t in ids if sampled(t, 0.5)}
    assert not any(sampled(t, 0.0) for t in ids) and all(sampled(t, 1.0) for t in ids)
    assert all(0 <= sample_point(t) < 1 for t in ids)
    with pytest.raises(ValueError):
        sampled("a", 1.5)


def test_filters_match_any_span_of_the_trace() -> None:
    trace = {"spans": [{"name": "map", "span_kind": "LLM", "status_code": "OK"}]}
    assert matches(trace, parse_filters(["name=map", "kind=LLM"]))
    assert not matches(trace, parse_filters(["status=ERROR"]))
    with pytest.raises(ValueError):
        parse_filters(["color=red"])
    args = ["watch", "--phoenix", "http://127.0.0.1:9", "--project", "p", "--sample", "1"]
    code = CliRunner().invoke(cli, [*args, "--filter", "nope"])
    assert code.exit_code == 2 and "KEY=VALUE" in code.output


# -- against Phoenix -------------------------------------------------------------------------------


@pytest.mark.slow
def test_200_traces_at_a_quarter_are_each_annotated_once_across_a_kill_9(
    phoenix: PhoenixServer, project: str, tmp_path: Path
) -> None:
    sent = send_traces(phoenix.url, project, [pipeline(i) for i in range(200)])
    phoenix.wait_for_traces(project, 200)
    expected = {t.trace_id for t in sent if sampled(t.trace_id, 0.25)}
    assert 30 < len(expected) < 70  # the hash's own set, about a quarter
    ckpt = tmp_path / "runs" / f"watch-{project}.json"
    args = watch_cmd(
        phoenix.url,
        project,
        "--sample",
        "0.25",
        "--settle",
        "1",
        "--interval",
        "0.3",
        "--concurrency",
        "3",
        "--once",
    )
    with loopback_model() as (srv, env):
        with (tmp_path / "first.log").open("wb") as log:
            first = subprocess.Popen(
                args, cwd=tmp_path, env=_env(env), stdout=log, stderr=subprocess.STDOUT
            )
            try:
                wait_until(
                    lambda: len(annotated(ckpt)) >= 8 or first.poll() is not None,
                    deadline=300,
                    what="8 traces annotated",
                )
                assert first.poll() is None, (tmp_path / "first.log").read_text()
                # Mid-way for sure: hold the model's replies until calls are in flight, then kill.
                srv.hold()
                n = srv.count
                assert srv.wait_for_requests(n + 1, timeout=60)
                first.send_signal(signal.SIGKILL)
                first.wait(timeout=60)
            finally:
                if first.poll() is None:
                    first.kill()
                srv.release()
        before = checkpoint(ckpt)
        assert 8 <= len(before) < len(expected)
        assert first.returncode == -signal.SIGKILL
        with (tmp_path / "second.log").open("wb") as log:
            second = subprocess.run(
                args, cwd=tmp_path, env=_env(env), stdout=log, stderr=subprocess.STDOUT, timeout=900
            )
    logs = (tmp_path / "first.log").read_text() + (tmp_path / "second.log").read_text()
    assert second.returncode == 0, logs
    assert "not finished" not in logs
    after = checkpoint(ckpt)
    assert annotated(ckpt) == expected
    assert set(after) == expected
    # The traces finished before the kill were not taken again (same record, same run).
    assert {t: after[t] for t in before} == before
    run_dirs = sorted((tmp_path / "runs").glob("phoenix-*"))
    assert len(run_dirs) == len(expected)
    assert {after[t]["run_dir"] for t in expected} == {str(Path("runs") / d.name) for d in run_dirs}

    by_trace: dict[str, SentTrace] = {t.trace_id: t for t in sent}
    spans = [s for t in sent for s in (t.reduce, *t.maps)]
    found = phoenix.annotations(project, spans)
    per_span = Counter((a["span_id"], a["name"], a["identifier"]) for a in found)
    assert max(per_span.values()) == 1, "an annotation written twice"
    for tid, t in by_trace.items():
        on_final = [a for a in found if a["span_id"] == t.reduce]
        on_maps = [a for a in found if a["span_id"] in t.maps]
        if tid not in expected:
            assert on_final == [] and on_maps == []
            continue
        assert sorted(a["name"] for a in on_final) == [VERDICT_NAME] * 3
        injected = next(a for a in on_final if a["metadata"]["claim"] == INJECTED)
        assert injected["result"]["label"] == "Not Fully Supported"
        assert [(a["span_id"], a["name"]) for a in on_maps] == [(t.maps[1], ORIGIN_NAME)]
    assert KEY not in logs
    assert KEY not in ckpt.read_text()
    assert not any(KEY in p.read_text() for d in run_dirs for p in d.iterdir() if p.is_file())


@pytest.mark.slow
def test_a_trace_with_no_generating_span_is_skipped_with_its_reason(
    phoenix: PhoenixServer, project: str, tmp_path: Path
) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    [ok] = send_traces(phoenix.url, project, [pipeline(0)])
    provider = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(phoenix.url + "/v1/traces")))
    with provider.get_tracer("t").start_as_current_span("lookup") as span:
        span.set_attribute("openinference.span.kind", "RETRIEVER")
        span.set_attribute("input.value", "Who was Marley?")
        span.set_attribute("retrieval.documents.0.document.content", "Marley was a merchant.")
        lookup = format(span.get_span_context().trace_id, "032x")
    provider.shutdown()
    phoenix.wait_for_traces(project, 2)
    args = watch_cmd(
        phoenix.url, project, "--sample", "1", "--settle", "0.5", "--interval", "0.2", "--once"
    )
    with loopback_model() as (_srv, env):
        done = subprocess.run(args, cwd=tmp_path, env=_env(env), capture_output=True, timeout=300)
        out = done.stdout.decode() + done.stderr.decode()
        assert done.returncode == 0, out
        ckpt = checkpoint(tmp_path / "runs" / f"watch-{project}.json")
        assert ckpt[ok.trace_id]["status"] == "annotated"
        assert ckpt[lookup]["status"] == "skipped"
        assert "LLM" in ckpt[lookup]["reason"] or "generation" in ckpt[lookup]["reason"]
        assert f"trace {lookup[:8]}" in out and "skipped" in out
        # A restart takes neither again.
        again = subprocess.run(args, cwd=tmp_path, env=_env(env), capture_output=True, timeout=300)
        assert again.returncode == 0
        assert "2 traces already finished" in again.stderr.decode()
        assert checkpoint(tmp_path / "runs" / f"watch-{project}.json") == ckpt


@pytest.mark.slow
def test_sigterm_stops_cleanly_and_the_next_start_finishes(
    phoenix: PhoenixServer, project: str, tmp_path: Path
) -> None:
    [t] = send_traces(phoenix.url, project, [pipeline(7)])
    phoenix.wait_for_traces(project, 1)
    args = watch_cmd(phoenix.url, project, "--sample", "1", "--settle", "0.5", "--interval", "0.2")
    with loopback_model() as (srv, env):
        srv.hold()
        proc = subprocess.Popen(
            args, cwd=tmp_path, env=_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        try:
            assert srv.wait_for_requests(1, timeout=120)  # a verification is in flight
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            srv.release()
        text = out.decode()
        assert proc.returncode == 130, text
        assert "stopped" in text and "Traceback" not in text
        ckpt = tmp_path / "runs" / f"watch-{project}.json"
        assert t.trace_id not in checkpoint(ckpt)
        again = subprocess.run(
            [*args, "--once"], cwd=tmp_path, env=_env(env), capture_output=True, timeout=300
        )
        assert again.returncode == 0, again.stderr.decode()
        assert annotated(ckpt) == {t.trace_id}


@pytest.mark.slow
def test_unknown_project_and_unreachable_server(phoenix: PhoenixServer, tmp_path: Path) -> None:
    code = CliRunner().invoke(
        cli, ["watch", "--phoenix", phoenix.url, "--project", "absent", "--sample", "1", "--once"]
    )
    assert code.exit_code == 2 and "absent" in code.output
    url = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    code = CliRunner().invoke(
        cli, ["watch", "--phoenix", url, "--project", "p", "--sample", "1", "--once"]
    )
    assert code.exit_code == 3 and f"cannot reach Phoenix at {url}" in code.output
    assert time.monotonic() - start < 30


def test_the_python_watch_with_the_api_verifier(
    phoenix: PhoenixServer, project: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-call Python watch (`veritrail.adapters.phoenix.watch` with
    `veritrail.api.trace_verifier`, what `veritrail watch` runs): the trace is verified into a
    run directory under the runs directory, annotated in Phoenix, and indexed as a run."""
    from veritrail.adapters.phoenix import WatchOptions, watch
    from veritrail.api import trace_verifier
    from veritrail.runs import open_index

    [t] = send_traces(phoenix.url, project, [pipeline(11)])
    phoenix.wait_for_traces(project, 1)
    runs = tmp_path / "runs"
    with loopback_model() as (_srv, env):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        verifier = trace_verifier(runs_dir=str(runs), cache="off")
        options = WatchOptions(phoenix.url, project, settle=0.5, interval=0.2, once=True)
        summary = watch(options, verifier, runs_dir=runs)
    assert summary.exit_code == 0 and summary.annotated == 1, summary
    [run_dir] = summary.run_dirs
    assert Path(run_dir).parent == runs
    report = json.loads((Path(run_dir) / "report.json").read_text())
    assert any(INJECTED.split()[-1].rstrip(".") in c["text"] for c in report["claims"])
    with open_index(runs) as index:
        # The index is a cache of the run directories: a run that ended before any index existed
        # is found by the next refresh (what `veritrail runs` and the view do first); an existing
        # index is updated as runs end (run.hooks).
        index.refresh()
        assert [r.path.resolve() for r in index.list_runs()] == [Path(run_dir).resolve()]
    assert t.trace_id in annotated(runs / f"watch-{project}.json")
