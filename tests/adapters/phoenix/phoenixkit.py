"""A real Phoenix server for the tests, and traces to send it.

`phoenix serve` runs from its own virtualenv (arize-phoenix pins many packages, so it never
enters the test environment): `scripts/test.sh` creates it once at
`${VERITRAIL_TEST_CACHE:-~/.cache/veritrail-tests}/phoenix-venv`; `VERITRAIL_TEST_PHOENIX` may
name another `phoenix` executable. The server gets a working directory (SQLite) under the test
session's tmp, 127.0.0.1 and free ports, and is stopped at the end of the session.

Traces are sent the way an application sends them: OTLP over HTTP to `/v1/traces`, from the
OpenTelemetry SDK (`send_traces`: hand-made OpenInference spans of a map-reduce pipeline) or from
a LangChain run instrumented with OpenInference (the walkthrough in docs/adapters.md).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from veritrail.testing import FakeOpenAIServer
from veritrail.testing.overlap import loopback_env, responder

PHOENIX_VERSION = "20.26.1"
"""The arize-phoenix release scripts/test.sh installs (and these tests were written against)."""


def phoenix_executable() -> Path | None:
    """The `phoenix` command of the test virtualenv, if it is installed."""
    named = os.environ.get("VERITRAIL_TEST_PHOENIX")
    if named:
        return Path(named) if Path(named).is_file() else None
    cache = Path(
        os.environ.get("VERITRAIL_TEST_CACHE") or Path.home() / ".cache" / "veritrail-tests"
    )
    exe = cache / "phoenix-venv" / "bin" / "phoenix"
    return exe if exe.is_file() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], Any], *, deadline: float = 120.0, what: str = "") -> Any:
    """Poll `check()` until it returns something truthy; fail after `deadline` seconds."""
    end = time.monotonic() + deadline
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            pytest.fail(f"timed out after {deadline:g} s waiting for {what or check}")
        time.sleep(0.2)


@dataclass
class PhoenixServer:
    """A running `phoenix serve`."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def get(self, path: str, **params: Any) -> Any:
        resp = httpx2.get(self.url + path, params=params, timeout=30, trust_env=False)
        resp.raise_for_status()
        return resp.json()

    def project_id(self, name: str) -> str:
        return str(self.get(f"/v1/projects/{name}")["data"]["id"])

    def traces(self, project: str) -> list[dict[str, Any]]:
        try:
            return list(self.get(f"/v1/projects/{project}/traces", limit=1000)["data"])
        except httpx2.HTTPStatusError:
            return []

    def wait_for_traces(self, project: str, n: int, deadline: float = 120.0) -> list[Any]:
        """The project's traces once `n` have arrived with all their spans ended."""
        return list(
            wait_until(
                lambda: (t := self.traces(project)) and len(t) >= n and t,
                deadline=deadline,
                what=f"{n} traces in Phoenix project {project}",
            )
        )

    def annotations(self, project: str, span_ids: Sequence[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for i in range(0, len(span_ids), 50):
            params = [("limit", "10000")] + [("span_ids", s) for s in span_ids[i : i + 50]]
            resp = httpx2.get(
                f"{self.url}/v1/projects/{project}/span_annotations",
                params=params,
                timeout=30,
                trust_env=False,
            )
            resp.raise_for_status()
            out += resp.json()["data"]
        return out


@contextmanager
def running_phoenix(workdir: Path) -> Iterator[PhoenixServer]:
    """Start `phoenix serve` in `workdir` on free loopback ports; stop it afterwards."""
    exe = phoenix_executable()
    if exe is None:
        message = (
            "phoenix is not installed: scripts/test.sh installs arize-phoenix=="
            f"{PHOENIX_VERSION} into its own virtualenv (or set VERITRAIL_TEST_PHOENIX)"
        )
        if os.environ.get("VERITRAIL_FULL_SUITE") == "1":
            pytest.fail(message)
        pytest.skip(message)
    port, grpc = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",  # without it Phoenix binds every interface
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    env.pop("PHOENIX_API_KEY", None)
    log = workdir / "phoenix.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [str(exe), "serve"], env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=workdir
        )
    server = PhoenixServer(f"http://127.0.0.1:{port}", proc, log)

    def up() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"phoenix serve exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            return httpx2.get(server.url + "/healthz", timeout=2, trust_env=False).is_success
        except httpx2.TransportError:
            return False

    try:
        wait_until(up, deadline=240, what="phoenix serve to answer")
        yield server
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- the model: the loopback word-overlap responder --------------------------------------------


def faithful_responder(request: dict[str, Any]) -> str:
    """`veritrail.testing.overlap.responder`, except that an evidence summary repeats the
    selected sentences (the overlap responder's summary is a fixed phrase), so a verdict over an
    intermediate node's evidence sees its words: an injected sentence is then Fully Supported by
    the summary that holds it and unsupported by the sources, and the error stage is the step
    that wrote it."""
    out = responder(request)
    msgs = request.get("messages") or []
    user = next((str(m["content"]) for m in msgs if m["role"] == "user"), "")
    if not user.startswith("Excerpts"):
        return out
    doc = json.loads(out)
    lines = {int(i): s for i, s in re.findall(r"^\[(\d+)\] (.*)$", user, re.M)}
    # A shared prompt (docs/method.md#shared-prompts) has one entry per claim.
    for entry in doc.get("claims", [doc]):
        picked = (lines[i] for i in entry["selected_ids"] if i in lines)
        entry["summary"] = " ".join(picked) or "Nothing."
    return json.dumps(doc)


@contextmanager
def loopback_model(*, faithful: bool = True) -> Iterator[tuple[FakeOpenAIServer, dict[str, str]]]:
    """A running loopback model server and the environment that points veritrail at it."""
    with FakeOpenAIServer(responder=faithful_responder if faithful else responder) as srv:
        yield srv, loopback_env(srv)


# -- traces -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SentTrace:
    """A trace sent to Phoenix: its id and the span ids of its steps."""

    trace_id: str
    root: str
    maps: tuple[str, ...]
    reduce: str


def send_traces(
    url: str,
    project: str,
    pipelines: Sequence[tuple[Sequence[str], Sequence[str], str]],
    *,
    reduce_kind: str = "LLM",
) -> list[SentTrace]:
    """Send one map-reduce trace per (chunks, map outputs, final output) to Phoenix, as an
    OpenInference-instrumented application would (OTLP/HTTP); `reduce_kind` CHAIN makes a
    trace with no generating span of its own for the final step."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=url + "/v1/traces"), max_export_batch_size=256)
    )
    tracer = provider.get_tracer("veritrail-tests")
    sent: list[SentTrace] = []
    for chunks, maps, final in pipelines:
        with tracer.start_as_current_span("map_reduce") as root:
            root.set_attribute("openinference.span.kind", "CHAIN")
            root.set_attribute("input.value", json.dumps(list(chunks)))
            root.set_attribute("input.mime_type", "application/json")
            map_ids = []
            for chunk, out in zip(chunks, maps, strict=True):
                with tracer.start_as_current_span("map") as span:
                    span.set_attribute("openinference.span.kind", "LLM")
                    span.set_attribute("llm.input_messages.0.message.role", "system")
                    span.set_attribute("llm.input_messages.0.message.content", "Summarize.")
                    span.set_attribute("llm.input_messages.1.message.role", "user")
                    span.set_attribute("llm.input_messages.1.message.content", chunk)
                    span.set_attribute("llm.output_messages.0.message.role", "assistant")
                    span.set_attribute("llm.output_messages.0.message.content", out)
                    map_ids.append(format(span.get_span_context().span_id, "016x"))
            with tracer.start_as_current_span("reduce") as span:
                span.set_attribute("openinference.span.kind", reduce_kind)
                joined = "\n\n".join(maps)
                if reduce_kind == "LLM":
                    span.set_attribute("llm.input_messages.0.message.role", "user")
                    span.set_attribute("llm.input_messages.0.message.content", joined)
                    span.set_attribute("llm.output_messages.0.message.role", "assistant")
                    span.set_attribute("llm.output_messages.0.message.content", final)
                else:
                    span.set_attribute("input.value", joined)
                    span.set_attribute("output.value", final)
                reduce_id = format(span.get_span_context().span_id, "016x")
            root.set_attribute("output.value", final)
            ctx = root.get_span_context()
            sent.append(
                SentTrace(
                    format(ctx.trace_id, "032x"),
                    format(ctx.span_id, "016x"),
                    tuple(map_ids),
                    reduce_id,
                )
            )
    provider.force_flush()
    provider.shutdown()
    return sent


CHUNKS = (
    "Marley died seven years ago. Scrooge was his only mourner.",
    "Scrooge refuses to donate to charity. He sends the collectors away.",
)
MAPS = (
    "Marley died seven years ago.",
    "Scrooge refuses to donate to charity. Scrooge owns a red bicycle.",
)
"""The second map step injects a sentence its chunk does not hold."""
FINAL = (
    "Marley died seven years ago. Scrooge refuses to donate to charity. Scrooge owns a red bicycle."
)
INJECTED = "Scrooge owns a red bicycle."


def pipeline(i: int) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """The i-th small map-reduce run: the same shape as `CHUNKS`/`MAPS`/`FINAL`, its own words
    (so no two traces share texts), and the injected sentence in its second map step."""
    tag = f"Ledger{i}"
    chunks = (
        f"{tag} Marley died seven years ago. Scrooge was his only mourner.",
        f"{tag} Scrooge refuses to donate to charity. He sends the collectors away.",
    )
    maps = (
        f"{tag} Marley died seven years ago.",
        f"{tag} Scrooge refuses to donate to charity. Scrooge owns a red bicycle.",
    )
    final = f"{tag} Marley died seven years ago. {tag} Scrooge refuses to donate to charity. Scrooge owns a red bicycle."
    return chunks, maps, final
