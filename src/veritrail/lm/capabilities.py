"""Which structured-output mode each endpoint supports, detected once and remembered.

`Model.generate_json` asks for the best mode first (`json_schema`). When an endpoint rejects a
mode (the provider raises `UnsupportedFormatError`), the next one down is remembered for that
endpoint (`json_schema` → `json_object` → plain text with the tolerant parser), so only the
first structured call of a run pays for the detection. The store is per process and shared by
every `Model` over the same endpoint; an endpoint is identified by what the provider reports as
`endpoint` (for HTTP providers: base URL and model), which stays in memory and is never written.
"""

from __future__ import annotations

import threading

from .base import ResponseFormat

_ORDER = (ResponseFormat.JSON_SCHEMA, ResponseFormat.JSON_OBJECT, ResponseFormat.TEXT)


class CapabilityStore:
    """Best known structured-output mode per endpoint."""

    def __init__(self) -> None:
        self._best: dict[str, ResponseFormat] = {}
        self._lock = threading.Lock()

    def best(self, endpoint: str) -> ResponseFormat:
        """The mode to try first for `endpoint` (json_schema until something was rejected)."""
        with self._lock:
            return self._best.get(endpoint, ResponseFormat.JSON_SCHEMA)

    def downgrade(self, endpoint: str, rejected: ResponseFormat) -> ResponseFormat:
        """Record that `rejected` failed on `endpoint`; return the next mode to use."""
        nxt = _ORDER[min(_ORDER.index(rejected) + 1, len(_ORDER) - 1)]
        with self._lock:
            cur = self._best.get(endpoint, ResponseFormat.JSON_SCHEMA)
            # Concurrent calls may report the same rejection: never move back up.
            if _ORDER.index(nxt) > _ORDER.index(cur):
                self._best[endpoint] = nxt
            return self._best.get(endpoint, nxt)

    def known(self) -> dict[str, ResponseFormat]:
        """Every endpoint with a detected limitation."""
        with self._lock:
            return dict(self._best)


DEFAULT_CAPABILITIES = CapabilityStore()
"""The process-wide store `Model` uses unless given another."""

__all__ = ["DEFAULT_CAPABILITIES", "CapabilityStore"]
