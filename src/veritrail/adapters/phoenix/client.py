"""A small client for Arize Phoenix's REST API (`/v1/...`): projects, spans, span annotations and
annotation configs; the only module that speaks HTTP to Phoenix.

Errors are typed for the command line (docs/adapters.md, "Phoenix"):

* `PhoenixUnreachable` (exit 3): no connection, a timeout or a 5xx after a few retries;
* `PhoenixAuthError` (exit 2): 401 or 403, never retried (a wrong key stays wrong: retrying would
  only hammer the server and its logs);
* `UnknownProject` (exit 2): the project name or id is not on the server;
* `PhoenixError` (exit 3): any other refusal, with Phoenix's own message.

The API key comes from `PHOENIX_API_KEY` (the variable Phoenix's own clients read) or from the
URL's password (``http://:KEY@host``, taken out of the URL before any request). It is sent as a
bearer token and registered with `veritrail.redaction`, so no message, file or log line written
by veritrail can hold it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from ...errors import InputProblem, RunFailure
from ...redaction import redact, redact_url, register_secret

API_KEY_VARIABLE = "PHOENIX_API_KEY"
"""The environment variable of Phoenix's API key (Phoenix's own name for it)."""

RETRIES = 3
"""Attempts in total for a request that fails for a transient reason (connection, timeout,
429, 5xx); 401/403/404/422 are answered at once."""


class PhoenixError(RunFailure):
    """Phoenix refused a request (the message says which and why); exit status 3."""


class PhoenixUnreachable(PhoenixError):
    """No answer from the Phoenix server (connection refused, timeout, 5xx after retries)."""


class PhoenixAuthError(InputProblem):
    """401/403 from Phoenix: the API key is missing or wrong (exit 2; never retried)."""


class UnknownProject(InputProblem):
    """The project is not on the Phoenix server (exit 2)."""


def _http() -> Any:
    # httpx2 is the openai SDK's HTTP library (openai >= 3) and a declared core dependency.
    import httpx2

    return httpx2


def _decode(content: bytes, where: str) -> Any:
    """A 2xx answer's body as JSON (None when empty). A body that is not a JSON object (an HTML
    page from a proxy in front of Phoenix, invalid UTF-8, JSON cut short) is the server's fault:
    `PhoenixError` (exit 3) naming the request, never a traceback further on."""
    if not content:
        return None
    import orjson

    try:
        body = orjson.loads(content)  # strict UTF-8: invalid bytes are refused, not replaced
    except orjson.JSONDecodeError as exc:
        raise PhoenixError(
            redact(
                f"Phoenix answered {where} with a body that is not JSON ({exc}): "
                f"{content[:80].decode('utf-8', 'replace')!r}"
            )
        ) from None
    if not isinstance(body, dict):
        raise PhoenixError(redact(f"Phoenix answered {where} with JSON that is not an object"))
    return body


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A Phoenix base URL without credentials, and the API key to send (never printed)."""

    url: str
    api_key: str | None

    @classmethod
    def parse(cls, url: str, api_key: str | None = None) -> Endpoint:
        """`url` with any userinfo taken out (its password, or a lone user part, is the key when
        no `api_key` is given), falling back to `PHOENIX_API_KEY`."""
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputProblem(f"not an http(s) URL of a Phoenix server: {redact_url(url)!r}")
        from_url = parts.password or parts.username or None
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        clean = urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
        key = api_key or from_url or os.environ.get(API_KEY_VARIABLE) or None
        register_secret(key)
        return cls(clean, key)

    def __repr__(self) -> str:  # never the key
        return f"Endpoint({self.url!r})"


class PhoenixClient:
    """Synchronous calls to one Phoenix server (thread-safe: one `httpx2.Client`).

    `timeout` is per request in seconds. Use as a context manager, or call `close()`.
    """

    def __init__(
        self, url: str | Endpoint, *, timeout: float = 30.0, retry_delay: float = 0.5
    ) -> None:
        self.endpoint = url if isinstance(url, Endpoint) else Endpoint.parse(url)
        headers = {"accept": "application/json"}
        if self.endpoint.api_key:
            headers["authorization"] = f"Bearer {self.endpoint.api_key}"
        self._retry_delay = retry_delay
        self.configs_ready: set[tuple[str, str | None]] = set()
        """(config name, project) pairs already ensured by this client (`write_marks`)."""
        self._client = _http().Client(
            base_url=self.endpoint.url, headers=headers, timeout=timeout, trust_env=False
        )

    def __enter__(self) -> PhoenixClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    @property
    def url(self) -> str:
        """The server's base URL (no credentials)."""
        return self.endpoint.url

    # -- one request ---------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Sequence[tuple[str, str]] | Mapping[str, Any] | None = None,
        json: Any = None,
        not_found: type[Exception] | None = None,
    ) -> Any:
        """One call: the decoded JSON body (None for an empty one). Transient failures are
        retried `RETRIES` times in all with a growing pause; 401/403 raise `PhoenixAuthError`
        at once; a 404 raises `not_found` (with Phoenix's message) when given."""
        httpx = _http()
        where = f"{method} {self.url}{path}"
        last = ""
        for attempt in range(RETRIES):
            if attempt:
                time.sleep(self._retry_delay * 2 ** (attempt - 1))
            try:
                resp = self._client.request(method, path, params=params, json=json)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            status = resp.status_code
            if status in (401, 403):
                raise PhoenixAuthError(
                    redact(
                        f"Phoenix refused the request ({status} {resp.reason_phrase}) at {where}: "
                        + (
                            "the API key was not accepted"
                            if self.endpoint.api_key
                            else f"it needs an API key: set {API_KEY_VARIABLE}"
                        )
                    )
                )
            if status == 429 or status >= 500:
                last = f"{status} {resp.reason_phrase}: {resp.text[:200]}"
                continue
            if status == 404 and not_found is not None:
                raise not_found(redact(resp.text.strip()[:300] or f"not found: {where}"))
            if status >= 400:
                raise PhoenixError(
                    redact(f"Phoenix answered {status} to {where}: {resp.text.strip()[:500]}")
                )
            return _decode(resp.content, where)
        raise PhoenixUnreachable(
            redact(f"cannot reach Phoenix at {self.url} ({RETRIES} attempts): {last}")
        )

    # -- projects -----------------------------------------------------------------------------

    def project(self, name_or_id: str) -> dict[str, Any]:
        """The project (`id`, `name`); `UnknownProject` when the server has none of that name."""
        if not name_or_id or any(c in name_or_id for c in "/?#"):
            raise InputProblem(f"not a Phoenix project name: {name_or_id!r}")
        body = self.request("GET", f"/v1/projects/{quote(name_or_id)}", not_found=UnknownProject)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict) or "id" not in data:
            raise PhoenixError(f"unexpected answer from {self.url}/v1/projects/{name_or_id}")
        return data

    # -- spans --------------------------------------------------------------------------------

    def spans(
        self,
        project: str,
        *,
        trace_ids: Sequence[str] = (),
        start_time: str | None = None,
        end_time: str | None = None,
        page_size: int = 1000,
    ) -> Iterator[dict[str, Any]]:
        """Every span of `project` (optionally of some traces, or started in [start, end)),
        oldest first, page by page (`GET /v1/projects/{p}/spans`)."""
        params: list[tuple[str, str]] = [
            ("limit", str(page_size)),
            ("sort", "start_time"),
            ("order", "asc"),
        ]
        params += [("trace_id", t) for t in trace_ids]
        if start_time:
            params.append(("start_time", start_time))
        if end_time:
            params.append(("end_time", end_time))
        path = f"/v1/projects/{quote(project)}/spans"
        cursor: str | None = None
        while True:
            page = params + ([("cursor", cursor)] if cursor else [])
            body = self.request("GET", path, params=page, not_found=UnknownProject)
            yield from body.get("data") or []
            cursor = body.get("next_cursor")
            if not cursor:
                return

    def traces(
        self,
        project: str,
        *,
        start_time: str | None = None,
        include_spans: bool = False,
        page_size: int = 1000,
    ) -> Iterator[dict[str, Any]]:
        """Every trace of `project` started at or after `start_time`, oldest first
        (`GET /v1/projects/{p}/traces`): ``trace_id``, ``start_time``, ``end_time`` and, with
        `include_spans`, each span's ids, name, kind and times (no attributes)."""
        params: list[tuple[str, str]] = [
            ("limit", str(page_size)),
            ("sort", "start_time"),
            ("order", "asc"),
            ("include_spans", "true" if include_spans else "false"),
        ]
        if start_time:
            params.append(("start_time", start_time))
        path = f"/v1/projects/{quote(project)}/traces"
        cursor: str | None = None
        while True:
            page = params + ([("cursor", cursor)] if cursor else [])
            body = self.request("GET", path, params=page, not_found=UnknownProject)
            yield from body.get("data") or []
            cursor = body.get("next_cursor")
            if not cursor:
                return

    # -- annotations --------------------------------------------------------------------------

    def annotate_spans(self, annotations: Sequence[Mapping[str, Any]]) -> list[str]:
        """Insert or update span annotations (`POST /v1/span_annotations?sync=true`): an
        annotation with the same name, span and `identifier` as an existing one replaces it.
        Returns the annotations' ids."""
        out: list[str] = []
        for i in range(0, len(annotations), 100):
            body = self.request(
                "POST",
                "/v1/span_annotations",
                params={"sync": "true"},
                json={"data": list(annotations[i : i + 100])},
            )
            out += [str(d.get("id")) for d in (body or {}).get("data") or []]
        return out

    def span_annotations(
        self, project: str, span_ids: Sequence[str], names: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """The annotations of some spans (`GET /v1/projects/{p}/span_annotations`)."""
        out: list[dict[str, Any]] = []
        for i in range(0, len(span_ids), 50):
            params: list[tuple[str, str]] = [("limit", "1000")]
            params += [("span_ids", s) for s in span_ids[i : i + 50]]
            params += [("include_annotation_names", n) for n in names]
            cursor: str | None = None
            while True:
                page = params + ([("cursor", cursor)] if cursor else [])
                body = self.request(
                    "GET",
                    f"/v1/projects/{quote(project)}/span_annotations",
                    params=page,
                    not_found=UnknownProject,
                )
                out += body.get("data") or []
                cursor = body.get("next_cursor")
                if not cursor:
                    break
        return out

    def annotation_config(self, name: str) -> dict[str, Any] | None:
        """The annotation config named `name`, or None."""

        class _Absent(Exception):
            pass

        try:
            body = self.request("GET", f"/v1/annotation_configs/{quote(name)}", not_found=_Absent)
        except _Absent:
            return None
        data = body.get("data") if isinstance(body, dict) else None
        return data if isinstance(data, dict) else None

    def ensure_annotation_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The config named `config["name"]`, created from `config` when the server has none
        (an existing one is left as it is: a person may have edited it in the UI)."""
        name = str(config["name"])
        found = self.annotation_config(name)
        if found is not None:
            return found
        try:
            body = self.request("POST", "/v1/annotation_configs", json=dict(config))
        except PhoenixError as exc:
            # 409: another writer (a second watcher, a concurrent export) created it meanwhile.
            again = self.annotation_config(name) if " 409 " in str(exc) else None
            if again is None:
                raise
            return again
        data = body.get("data") if isinstance(body, dict) else None
        return data if isinstance(data, dict) else dict(config)

    def assign_annotation_config(self, project: str, name: str) -> bool:
        """Assign the config named `name` to `project` (idempotent), so the project's
        "Edit annotations" panel offers it; False when the server has no such endpoint (older
        Phoenix) or no such project or config."""

        class _Absent(Exception):
            pass

        try:
            self.request(
                "PUT",
                f"/v1/projects/{quote(project)}/annotation_configs/{quote(name)}",
                not_found=_Absent,
            )
        except _Absent:
            return False
        return True


__all__ = [
    "API_KEY_VARIABLE",
    "Endpoint",
    "PhoenixAuthError",
    "PhoenixClient",
    "PhoenixError",
    "PhoenixUnreachable",
    "UnknownProject",
]
