"""`veritrail from-trace --phoenix`: a trace read from a real Phoenix server becomes the DAG the
file import would build, with its span ids; and the bad inputs: Phoenix unreachable (3), unknown
project (2), a refused key (2, one request), a trace with no generating span (2, the reason),
span text with HTML and fence-breaking content (kept verbatim)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner
from phoenixkit import CHUNKS, FINAL, MAPS, PhoenixServer, free_port, send_traces

from veritrail.cli.main import cli
from veritrail.dag import load_dag

pytestmark = pytest.mark.slow

KEY = "phx-test-key-4f1c9a7e2b"


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


def test_a_phoenix_trace_gives_the_file_imports_dag_with_span_ids(
    phoenix: PhoenixServer, project: str, tmp_path: Path
) -> None:
    [sent] = send_traces(phoenix.url, project, [(CHUNKS, MAPS, FINAL)])
    phoenix.wait_for_traces(project, 1)
    code, out = run(
        "from-trace",
        "--phoenix",
        phoenix.url,
        "--project",
        project,
        "--trace-id",
        sent.trace_id,
        "--out",
        str(tmp_path / "dag.json"),
    )
    assert code == 0, out
    dag = load_dag(tmp_path / "dag.json")
    assert dag.meta["trace_id"] == sent.trace_id
    assert dag.meta["phoenix"] == {"url": phoenix.url, "project": project}
    spans = dag.meta["original_spans"]
    gens = sorted(n.id for n in dag if not dag.is_root(n.id) and n.id != dag.terminal)
    assert sorted(spans[g][0] for g in gens) == sorted(sent.maps)
    assert spans[dag.terminal] == [sent.reduce]
    assert dag.node(dag.terminal).text == FINAL
    assert sorted(n.text for n in dag if dag.is_root(n.id)) == sorted(CHUNKS)

    # The same spans as a trace file (Phoenix's span JSON, sdk-shaped) give the same DAG.
    body = phoenix.get(f"/v1/projects/{project}/spans", limit=1000)
    from veritrail.adapters.phoenix import sdk_span

    (tmp_path / "trace.jsonl").write_text(
        "\n".join(json.dumps(sdk_span(s)) for s in body["data"]) + "\n"
    )
    code, out = run("from-trace", str(tmp_path / "trace.jsonl"), "--out", str(tmp_path / "f.json"))
    assert code == 0, out
    from_file = load_dag(tmp_path / "f.json")
    assert from_file.to_records() == dag.to_records()
    assert from_file.meta["original_spans"] == spans

    # --since (no --trace-id): the one trace started since then.
    code, out = run(
        "from-trace",
        "--phoenix",
        phoenix.url,
        "--project",
        project,
        "--since",
        "2000-01-01",
        "--out",
        str(tmp_path / "since.json"),
    )
    assert code == 0, out
    assert load_dag(tmp_path / "since.json").to_records() == dag.to_records()


def test_unknown_project_is_bad_input(phoenix: PhoenixServer, tmp_path: Path) -> None:
    code, out = run(
        "from-trace",
        "--phoenix",
        phoenix.url,
        "--project",
        "no-such-project",
        "--out",
        str(tmp_path / "d.json"),
    )
    assert code == 2, out
    assert "no-such-project" in out and "not found" in out
    assert "Traceback" not in out


def test_phoenix_unreachable_exits_3_naming_the_server(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, out = run(
        "from-trace", "--phoenix", url, "--project", "p", "--out", str(tmp_path / "d.json")
    )
    assert code == 3, out
    assert f"cannot reach Phoenix at {url}" in out
    assert "Traceback" not in out
    assert not (tmp_path / "d.json").exists()


class _Refusing(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.headers.get("authorization") or "")
        body = b'{"detail": "Invalid token"}'
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[str]:
    _Refusing.hits = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_401_is_fatal_at_once_and_never_shows_the_key(
    refusing_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHOENIX_API_KEY", KEY)
    code, out = run(
        "from-trace",
        "--phoenix",
        refusing_server,
        "--project",
        "p",
        "--out",
        str(tmp_path / "d.json"),
    )
    assert code == 2, out
    assert "401" in out and "API key was not accepted" in out
    assert _Refusing.hits == [f"Bearer {KEY}"], "one request, no retry"
    assert KEY not in out

    # The key in the URL instead of the environment: taken out of the URL, sent as the token.
    monkeypatch.delenv("PHOENIX_API_KEY")
    _Refusing.hits.clear()
    with_key = refusing_server.replace("http://", f"http://:{KEY}@")
    code, out = run(
        "from-trace", "--phoenix", with_key, "--project", "p", "--out", str(tmp_path / "d.json")
    )
    assert code == 2, out
    assert _Refusing.hits == [f"Bearer {KEY}"]
    assert KEY not in out


def test_a_trace_with_no_generating_span_is_refused_with_the_reason(
    phoenix: PhoenixServer, project: str, tmp_path: Path
) -> None:
    # No LLM span at all: a trace of one chain.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(phoenix.url + "/v1/traces")))
    with provider.get_tracer("t").start_as_current_span("lookup") as span:
        span.set_attribute("openinference.span.kind", "CHAIN")
        span.set_attribute("input.value", "What is the capital of France?")
        span.set_attribute("output.value", "Paris is the capital of France.")
        chain_only = format(span.get_span_context().trace_id, "032x")
    provider.shutdown()
    phoenix.wait_for_traces(project, 1)
    code, out = run(
        "from-trace",
        "--phoenix",
        phoenix.url,
        "--project",
        project,
        "--trace-id",
        chain_only,
        "--out",
        str(tmp_path / "d.json"),
    )
    assert code == 2, out
    assert "LLM" in out or "generation" in out
    assert not (tmp_path / "d.json").exists()


HOSTILE = (
    'Scrooge wrote <script>alert("x")</script> in the ledger. <img src=x onerror=alert(1)>',
    "The clerk typed >>> end text and then <<< claim in his notes. ``` fences ``` too.",
)


def test_html_and_fence_breaking_span_text_is_kept_verbatim(
    phoenix: PhoenixServer, project: str, tmp_path: Path
) -> None:
    maps = (HOSTILE[0], HOSTILE[1])
    final = f"{HOSTILE[0]} {HOSTILE[1]}"
    [sent] = send_traces(phoenix.url, project, [(HOSTILE, maps, final)])
    phoenix.wait_for_traces(project, 1)
    code, out = run(
        "from-trace",
        "--phoenix",
        phoenix.url,
        "--project",
        project,
        "--trace-id",
        sent.trace_id,
        "--out",
        str(tmp_path / "d.json"),
    )
    assert code == 0, out
    dag = load_dag(tmp_path / "d.json")
    assert dag.node(dag.terminal).text == final
    assert {n.text for n in dag if dag.is_root(n.id)} == set(HOSTILE)


def test_option_combinations_are_usage_errors(tmp_path: Path) -> None:
    out = str(tmp_path / "d.json")
    assert run("from-trace", "--out", out)[0] == 2
    assert run("from-trace", "--phoenix", "http://127.0.0.1:1", "--out", out)[0] == 2
    assert run("from-trace", "x.json", "--project", "p", "--out", out)[0] == 2
    code, msg = run(
        "from-trace", "--phoenix", "ftp://h", "--project", "p", "--out", out, "--trace-id", "1"
    )
    assert code == 2 and "http" in msg
