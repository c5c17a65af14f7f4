"""A loopback Langfuse server that follows Langfuse's published OpenAPI document for scores.

A real Langfuse needs ClickHouse, PostgreSQL, Redis and blob storage, which do not run here; this
server implements the one endpoint `veritrail export --to langfuse` calls, `POST
/api/public/scores`, as the vendored excerpt of Langfuse's OpenAPI document says
(tests/fixtures/langfuse_openapi_scores.json, source and licence noted there): HTTP Basic auth
(public key : secret key), the body validated against ``CreateScoreRequest`` (400 when it does
not conform), the answer a ``CreateScoreResponse``, and scores upserted on their ``id`` as
Langfuse does.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema

SPEC_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "langfuse_openapi_scores.json"
SPEC: dict[str, Any] = json.loads(SPEC_PATH.read_text(encoding="utf-8"))


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema → JSON Schema: ``nullable: true`` becomes "or null"."""
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if k not in ("nullable", "example")}
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


def schema(name: str) -> dict[str, Any]:
    """The component `name` as a standalone JSON Schema."""
    return {
        "$ref": f"#/components/schemas/{name}",
        "components": {"schemas": _json_schema(SPEC["components"]["schemas"])},
    }


REQUEST = SPEC["paths"]["/api/public/scores"]["post"]
REQUEST_SCHEMA = schema(
    REQUEST["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
)
RESPONSE_SCHEMA = schema(
    REQUEST["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
)


@dataclass
class LangfuseServer:
    """What the server received and holds."""

    url: str
    public_key: str
    secret_key: str
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    refused: int = 0


@contextmanager
def langfuse_server(public_key: str, secret_key: str) -> Iterator[LangfuseServer]:
    """Run the server on a free loopback port."""
    lock = threading.Lock()
    state: LangfuseServer

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            want = "Basic " + base64.b64encode(f"{public_key}:{secret_key}".encode()).decode()
            if self.headers.get("authorization") != want:
                with lock:
                    state.refused += 1
                self._answer(401, {"message": "Invalid credentials"})
                return
            if self.path != "/api/public/scores":
                self._answer(404, {"message": "not found"})
                return
            try:
                body = json.loads(raw)
                jsonschema.validate(body, REQUEST_SCHEMA)
            except (ValueError, jsonschema.ValidationError) as exc:
                self._answer(400, {"message": str(exc)[:300]})
                return
            sid = body.get("id") or str(uuid.uuid4())
            with lock:
                state.requests.append(body)
                state.scores[sid] = body  # upsert on id
            answer = {"id": sid}
            jsonschema.validate(answer, RESPONSE_SCHEMA)
            self._answer(200, answer)

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state = LangfuseServer(f"http://127.0.0.1:{srv.server_address[1]}", public_key, secret_key)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield state
    finally:
        srv.shutdown()
        srv.server_close()
