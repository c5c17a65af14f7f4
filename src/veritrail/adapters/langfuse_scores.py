"""Verdicts → Langfuse scores (`veritrail export RUN --to langfuse --endpoint URL`).

The same marks as the Phoenix annotations (`veritrail.adapters.phoenix.marks`), written through
Langfuse's public API, `POST /api/public/scores` (its OpenAPI document: ``CreateScoreRequest``):
one categorical score per mark on the trace and the observation (= the span) it names, with the
verdict, "unsupported content entered here" or (a run with `--citations`, score name
`veritrail.citation`) the claim's citation status as its value, the explanation as its comment
and the claim in its metadata. Each score's ``id`` is derived from the trace, the span, the score name
and the claim (a UUID 5), and Langfuse upserts scores on their id, so exporting again updates the
scores instead of adding new ones.

Authentication is HTTP Basic with the project's public key as user and secret key as password,
read from ``LANGFUSE_PUBLIC_KEY`` and ``LANGFUSE_SECRET_KEY`` (the names Langfuse's own SDKs
read). Neither is ever printed or written.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from ..errors import InputProblem, RunFailure
from ..redaction import redact, redact_url, register_secret
from .phoenix.annotate import ExportResult
from .phoenix.marks import Mark, load_run, marks_for_run

PUBLIC_KEY_VARIABLE = "LANGFUSE_PUBLIC_KEY"
SECRET_KEY_VARIABLE = "LANGFUSE_SECRET_KEY"
SCORES_PATH = "/api/public/scores"
_NAMESPACE = uuid.UUID("6f1d1b2e-6a55-4bb4-9d0e-5b8f1f0c7a11")
"""Fixed namespace of the score ids (UUID 5): the same mark always gets the same id."""


class LangfuseError(RunFailure):
    """Langfuse refused or could not take the scores (exit 3)."""


class LangfuseAuthError(InputProblem):
    """Missing or refused Langfuse keys (exit 2)."""


def score_id(mark: Mark) -> str:
    """The score's id: a UUID 5 of the trace, span, score name and claim identifier."""
    key = "\x1f".join((mark.trace_id, mark.span_id, mark.name, mark.identifier))
    return str(uuid.uuid5(_NAMESPACE, key))


def score_body(mark: Mark) -> dict[str, Any]:
    """One mark as Langfuse's ``CreateScoreRequest``."""
    return {
        "id": score_id(mark),
        "traceId": mark.trace_id,
        "observationId": mark.span_id,
        "name": mark.name,
        "value": mark.label,
        "dataType": "CATEGORICAL",
        "comment": mark.explanation,
        "metadata": {**dict(mark.metadata), "score": mark.score, "identifier": mark.identifier},
    }


def _keys() -> tuple[str, str]:
    public = os.environ.get(PUBLIC_KEY_VARIABLE) or ""
    secret = os.environ.get(SECRET_KEY_VARIABLE) or ""
    if not public or not secret:
        raise LangfuseAuthError(
            f"Langfuse needs its project keys: set {PUBLIC_KEY_VARIABLE} and {SECRET_KEY_VARIABLE}"
        )
    register_secret(public)
    register_secret(secret)
    return public, secret


def _decode(content: bytes, where: str) -> dict[str, Any]:
    """A 2xx answer's body as a JSON object ({} when empty); an HTML page, invalid UTF-8 or
    JSON cut short is the server's fault: `LangfuseError` (exit 3), one line."""
    if not content:
        return {}
    import orjson

    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        raise LangfuseError(
            redact(f"Langfuse answered {where} with a body that is not JSON ({exc})")
        ) from None
    if not isinstance(body, dict):
        raise LangfuseError(redact(f"Langfuse answered {where} with JSON that is not an object"))
    return body


def write_scores(endpoint: str, marks: list[Mark], *, timeout: float = 30.0) -> tuple[str, ...]:
    """POST every mark as a score; the ids Langfuse answered with."""
    import httpx2  # the openai SDK's HTTP library; a declared core dependency

    public, secret = _keys()
    base = endpoint.rstrip("/")
    shown = redact_url(base)
    ids: list[str] = []
    with httpx2.Client(
        base_url=base, auth=(public, secret), timeout=timeout, trust_env=False
    ) as client:
        for mark in marks:
            try:
                resp = client.post(SCORES_PATH, json=score_body(mark))
            except httpx2.TransportError as exc:
                raise LangfuseError(
                    redact(f"cannot reach Langfuse at {shown}: {type(exc).__name__}: {exc}")
                ) from None
            if resp.status_code in (401, 403):
                raise LangfuseAuthError(
                    f"Langfuse refused the keys ({resp.status_code}) at {shown}{SCORES_PATH}"
                )
            if resp.status_code >= 400:
                raise LangfuseError(
                    redact(
                        f"Langfuse answered {resp.status_code} to POST {shown}{SCORES_PATH}: "
                        f"{resp.text.strip()[:300]}"
                    )
                )
            body = _decode(resp.content, f"POST {shown}{SCORES_PATH}")
            ids.append(str(body.get("id") or score_id(mark)))
    return tuple(ids)


def export_to_langfuse(
    run: str | Path, endpoint: str, *, dag: str | Path | None = None
) -> ExportResult:
    """Write a finished run's verdicts as Langfuse scores on its trace and observations (the run
    must verify a DAG from a Langfuse or OpenTelemetry trace: it keeps the span ids)."""
    loaded = load_run(run, dag)
    marks = marks_for_run(loaded.report, loaded.dag)
    ids = write_scores(endpoint, marks)
    return ExportResult(str(loaded.dag.meta["trace_id"]), tuple(marks), ids)


__all__ = [
    "PUBLIC_KEY_VARIABLE",
    "SCORES_PATH",
    "SECRET_KEY_VARIABLE",
    "LangfuseAuthError",
    "LangfuseError",
    "export_to_langfuse",
    "score_body",
    "score_id",
    "write_scores",
]
