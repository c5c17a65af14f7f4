"""A reply the provider stopped for length is unreadable, whatever its text (issue 38, item 4).

Over real HTTP: a `FakeOpenAIServer` whose completions say `finish_reason: "length"` for the
requests a test picks. The provider carries the field into `ModelOutput`, `Model` into
`Generation` (from a cache hit too), and `generate_json` re-asks such a reply.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lm_helpers import FAST_RETRY

from veritrail.lm.base import Message
from veritrail.lm.cache import ResponseCache
from veritrail.lm.capabilities import CapabilityStore
from veritrail.lm.model import Model
from veritrail.lm.openai import OpenAIProvider
from veritrail.testing import FakeOpenAIServer

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"ids": {"type": "array"}}}
ASK = [Message("user", "Which ids?")]
GOOD = json.dumps({"ids": [1, 2, 3]})


class LengthServer(FakeOpenAIServer):
    """Says `finish_reason: "length"` for the first `cut` requests."""

    def __init__(self, cut: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.cut = cut
        self.seen = 0

    def _completion(self, request: dict[str, Any], content: str) -> dict[str, Any]:
        body = super()._completion(request, content)
        self.seen += 1
        if self.seen <= self.cut:
            body["choices"][0]["finish_reason"] = "length"
        return body


def ids_of(value: Any) -> list[int]:
    if not isinstance(value, dict) or not isinstance(value.get("ids"), list):
        raise ValueError("expected an object with an ids list")
    return list(value["ids"])


def _model(srv: FakeOpenAIServer, **kw: Any) -> Model:
    return Model(
        OpenAIProvider("gpt-x", base_url=srv.base_url, api_key="k-test-1", timeout=5.0),
        retry=FAST_RETRY,
        capabilities=CapabilityStore(),
        **kw,
    )


async def test_a_reply_stopped_for_length_is_reasked_though_it_parses() -> None:
    # Even a reply whose text reads as whole JSON: the provider says more was coming.
    with LengthServer(1, responder=lambda req: GOOD) as srv:
        m = _model(srv)
        res = await m.generate_json(ASK, schema=SCHEMA, step="s", validate=ids_of)
        await m.aclose()
        assert srv.count == 2
    assert res.value == [1, 2, 3] and res.attempts == 2 and len(res.unreadable) == 1
    assert "finish_reason: length" in res.unreadable[0]
    assert res.unreadable[0].startswith("try 1: CutReplyError: reply cut off at the token limit")


async def test_length_every_time_is_an_error_never_a_value() -> None:
    with LengthServer(10, responder=lambda req: GOOD) as srv:
        m = _model(srv, max_reasks=2)
        res = await m.generate_json(ASK, schema=SCHEMA, step="s", validate=ids_of)
        await m.aclose()
        assert srv.count == 3
    assert res.value is None and res.error is not None and "token limit" in res.error
    assert len(res.unreadable) == 3


async def test_finish_reason_survives_the_response_cache(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with LengthServer(1, responder=lambda req: GOOD) as srv:
        m = _model(srv, cache=cache)
        first = await m.generate(ASK, step="s")
        again = await m.generate(ASK, step="s")
        await m.aclose()
        assert srv.count == 1
    cache.close()
    assert first.finish_reason == "length" and not first.cached
    assert again.cached and again.finish_reason == "length"
