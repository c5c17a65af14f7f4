"""The third red team's findings on the Phoenix and Langfuse commands (issue 40, item 5).

A server that answers 200 with a body that is not JSON (an HTML page from a proxy, invalid
UTF-8, JSON cut short) is the server's fault: one line, exit 3, never a traceback, for
`from-trace --phoenix`, `watch`, `export --to phoenix` and `export --to langfuse`. A watch
checkpoint whose fields have the wrong types is bad input (one line, exit 2). `export` refuses a
report of a version this veritrail does not read (exit 2).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner
from test_langfuse_export import langfuse_trace

from veritrail.cli.main import cli

BAD_BODIES = {
    "html": b"<!doctype html><html><body>502 Bad Gateway (proxy)</body></html>",
    "invalid-utf8": b'{"data": "\xff\xfe\xfd"}',
    "cut-json": b'{"data": [{"id": "abc", "name": "pro',
}


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


class _BadAnswer(BaseHTTPRequestHandler):
    body: ClassVar[bytes] = b""

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        body = type(self).body
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(params=sorted(BAD_BODIES))
def bad_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """A loopback server answering every request 200 with one kind of broken body."""
    _BadAnswer.body = BAD_BODIES[request.param]
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _BadAnswer)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def _one_line_exit_3(code: int, out: str, url: str) -> None:
    assert code == 3, out
    assert "Traceback" not in out
    lines = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, out
    assert url in lines[0], out


def test_from_trace_phoenix_bad_answer_is_exit_3(bad_server: str, tmp_path: Path) -> None:
    out_file = tmp_path / "d.json"
    code, out = run("from-trace", "--phoenix", bad_server, "--project", "p", "--out", str(out_file))
    _one_line_exit_3(code, out, bad_server)
    assert not out_file.exists()


def test_watch_bad_answer_is_exit_3(bad_server: str, tmp_path: Path) -> None:
    code, out = run(
        "watch", "--phoenix", bad_server, "--project", "p", "--once", "--sample", "1",
        "--checkpoint", str(tmp_path / "cp.json"),
    )  # fmt: skip
    _one_line_exit_3(code, out, bad_server)


@pytest.fixture(scope="module")
def verified_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run over a DAG read from a Langfuse trace export (it keeps the span ids)."""
    t = tmp_path_factory.mktemp("exported")
    (t / "trace.json").write_text(json.dumps(langfuse_trace()))
    code, out = run("from-trace", str(t / "trace.json"), "--out", str(t / "dag.json"))
    assert code == 0, out
    # The in-process demonstration model: no server, no key.
    code, out = run(
        "verify", str(t / "dag.json"), "--run-dir", str(t / "run"), "--quiet",
        "--model", "demo/overlap",
    )  # fmt: skip
    assert code == 0, out
    return t / "run"


def test_export_phoenix_bad_answer_is_exit_3(bad_server: str, verified_run: Path) -> None:
    code, out = run("export", str(verified_run), "--to", "phoenix", "--endpoint", bad_server)
    _one_line_exit_3(code, out, bad_server)


def test_export_langfuse_bad_answer_is_exit_3(
    bad_server: str, verified_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-test-1a2b3c4d")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-test-9z8y7x6w5v")
    code, out = run("export", str(verified_run), "--to", "langfuse", "--endpoint", bad_server)
    _one_line_exit_3(code, out, bad_server)


@pytest.mark.parametrize("version", [99, None, "3"])
def test_export_refuses_a_report_of_unknown_version(
    verified_run: Path, tmp_path: Path, version: object
) -> None:
    doc = json.loads((verified_run / "report.json").read_text())
    doc["version"] = version
    report = tmp_path / "report.json"
    report.write_text(json.dumps(doc))
    code, out = run(
        "export",
        str(report),
        "--dag",
        str(verified_run.parent / "dag.json"),
        "--to",
        "phoenix",
        "--endpoint",
        "http://127.0.0.1:9",
    )
    assert code == 2, out
    assert "version" in out and "Traceback" not in out


@pytest.mark.parametrize(
    "field, value",
    [
        ("traces", {"t1": "annotated"}),
        ("traces", {"t1": {"status": "annotated", "start_time": 5}}),
        ("traces", {"t1": {"status": "annotated", "start_time": "not a time"}}),
        ("watermark", 12),
        ("watermark", "yesterday"),
        ("watch", ["p"]),
    ],
)
def test_a_checkpoint_with_wrong_typed_fields_is_exit_2(
    tmp_path: Path, field: str, value: object
) -> None:
    cp = tmp_path / "cp.json"
    doc: dict[str, object] = {
        "format": "veritrail-watch-checkpoint",
        "version": 1,
        "watch": {},
        "watermark": None,
        "traces": {},
    }
    doc[field] = value
    cp.write_text(json.dumps(doc))
    # Nothing listens there: the checkpoint must be refused before Phoenix is asked.
    code, out = run(
        "watch", "--phoenix", "http://127.0.0.1:9", "--project", "p", "--once", "--sample", "1",
        "--checkpoint", str(cp),
    )  # fmt: skip
    assert code == 2, out
    assert "Traceback" not in out
    [line] = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert str(cp) in line and field in line
