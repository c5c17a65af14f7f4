"""A bad reply does not end a call: strict parse, then repair, then re-asks at rising temperature.

Over the real HTTP path (fake server on 127.0.0.1), plus property tests of the reply parser.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lm_helpers import FAST_RETRY

from veritrail.lm.base import GenerateConfig, Message
from veritrail.lm.capabilities import CapabilityStore
from veritrail.lm.jsonparse import CutReplyError, JsonReplyError, parse_json_reply, parse_strict
from veritrail.lm.model import DEFAULT_MAX_REASKS, Model, reask_temperature
from veritrail.lm.openai import OpenAIProvider
from veritrail.redaction import register_secret
from veritrail.testing import FakeOpenAIServer, Fault

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
    "required": ["ids"],
    "additionalProperties": False,
}
ASK = [Message("system", "Pick ids."), Message("user", "Which ids?")]
GOOD = json.dumps({"ids": [1, 2, 3]})


def ids_of(value: Any) -> list[int]:
    if not isinstance(value, dict) or not isinstance(value.get("ids"), list):
        raise ValueError("expected an object with an ids list")
    if not all(isinstance(i, int) for i in value["ids"]):
        raise ValueError("ids must be integers")
    return list(value["ids"])


def _model(srv: FakeOpenAIServer, **kw: Any) -> Model:
    return Model(
        OpenAIProvider("gpt-x", base_url=srv.base_url, api_key="k-test-1", timeout=5.0),
        retry=FAST_RETRY,
        capabilities=CapabilityStore(),
        **kw,
    )


# -- the parser -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("{'ids': [1]}", {"ids": [1]}),  # single quotes
        ('Sure! {"ids": [1,],} Hope that helps.', {"ids": [1]}),
        ("```json\n{ids: [4]}\n```", {"ids": [4]}),  # unquoted key
        ('{"a": 1 "b": [2 3]}', {"a": 1, "b": [2, 3]}),  # missing commas between whole values
        ('{"ids": [1]} and then {"ids": [2', {"ids": [1]}),  # a whole value before a cut one
    ],
)
def test_repair_reads_what_strict_parsing_cannot(text: str, value: Any) -> None:
    assert parse_json_reply(text) == value


@pytest.mark.parametrize(
    "text",
    [
        '{"ids": [1, 2',  # cut off mid-object
        "[1, 2",
        '{"claims": ["It w',  # closing the string would make the claim "It w"
        '```json\n{"ids": [4]\n```',  # the fence closed, the object did not
        'Here: {"a": "{}", "b": "xy',  # the balanced "{}" is inside the cut value's string
        '{"outer": {"inner": 1}, "reasoning": "Because th',  # a whole nested object inside
    ],
)
def test_a_cut_reply_is_never_completed(text: str) -> None:
    with pytest.raises(CutReplyError):
        parse_json_reply(text)


_STRING_OBJECTS = st.dictionaries(
    st.text(max_size=8),
    st.text(max_size=30) | st.lists(st.text(max_size=12), max_size=3),
    min_size=1,
    max_size=5,
)


@given(_STRING_OBJECTS, st.data(), st.sampled_from([None, 2]), st.booleans())
def test_a_cut_object_is_unreadable_or_whole(
    obj: dict[str, Any], data: st.DataObject, indent: int | None, ascii_only: bool
) -> None:
    """Whatever the cut point inside an object of string fields, the parse result is either
    unreadable or the uncut object: never a fragment of it."""
    full = json.dumps(obj, indent=indent, ensure_ascii=ascii_only)
    cut = data.draw(st.integers(min_value=0, max_value=len(full) - 1), label="cut")
    prose = data.draw(st.sampled_from(["", "Here it is: ", "```json\n"]), label="prose")
    try:
        value = parse_json_reply(prose + full[:cut])
    except JsonReplyError:
        return
    assert value == obj


@pytest.mark.parametrize(
    "text", ["", "   ", "I believe the claim is supported.", "yes", "null", '"a string"', "42"]
)
def test_prose_empty_and_scalars_stay_unreadable(text: str) -> None:
    if text.strip() in ("null", '"a string"', "42"):
        # Strictly valid JSON scalars are returned as such: the caller's validation rejects them.
        assert not isinstance(parse_json_reply(text), dict | list)
        return
    with pytest.raises(JsonReplyError):
        parse_json_reply(text)


def test_strict_parse_wins_over_repair() -> None:
    assert parse_strict('{"ids": [1]} trailing {"ids": [2]}') == {"ids": [1]}
    with pytest.raises(JsonReplyError, match="empty reply"):
        parse_strict("")


@given(st.text(max_size=300))
def test_any_text_gives_json_or_a_reply_error(text: str) -> None:
    try:
        value = parse_json_reply(text)
    except JsonReplyError:
        return
    json.dumps(value)  # whatever comes back is plain JSON data


@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=10),
        lambda c: st.lists(c) | st.dictionaries(st.text(max_size=5), c),
        max_leaves=20,
    )
)
def test_valid_json_is_read_unchanged(value: Any) -> None:
    assert parse_json_reply(json.dumps(value)) == value


# -- the temperature schedule ---------------------------------------------------------------------


def test_reask_temperature_rises_and_is_capped() -> None:
    assert [reask_temperature(0.0, k) for k in range(5)] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8])
    assert [reask_temperature(0.7, k) for k in range(4)] == pytest.approx([0.7, 0.9, 1.0, 1.0])
    assert reask_temperature(1.3, 2) == 1.3  # never lower than what the caller asked for


# -- over HTTP ------------------------------------------------------------------------------------


async def test_default_is_three_reasks_at_rising_temperature(server: FakeOpenAIServer) -> None:
    server.inject(Fault.prose(), Fault.empty(), Fault.prose())
    server.responder = lambda req: GOOD
    m = _model(server)
    assert m.max_reasks == DEFAULT_MAX_REASKS == 3
    res = await m.generate_json(ASK, schema=SCHEMA, step="s", validate=ids_of)
    await m.aclose()
    assert res.value == [1, 2, 3] and res.error is None and res.attempts == 4
    assert [r["temperature"] for r in server.requests] == pytest.approx([0.0, 0.2, 0.4, 0.6])
    # Every unreadable reply is listed, with the error and an excerpt, though the call succeeded.
    assert len(res.unreadable) == 3
    assert res.unreadable[0].startswith("try 1: JsonReplyError: no JSON value in reply; reply: ")
    assert "I have read the excerpts" in res.unreadable[0]
    assert res.unreadable[1] == "try 2: JsonReplyError: empty reply; reply: (empty reply)"


async def test_only_a_call_that_fails_every_try_returns_an_error(server: FakeOpenAIServer) -> None:
    server.responder = lambda req: "Not JSON, sorry."
    m = _model(server, max_reasks=2)
    res = await m.generate_json(ASK, schema=SCHEMA, step="s", validate=ids_of)
    await m.aclose()
    assert res.value is None and res.error is not None and res.attempts == 3
    assert server.count == 3 and len(res.unreadable) == 3
    assert res.raw == "Not JSON, sorry."


async def test_truncated_content_is_reasked_and_repairs_are_still_validated(
    server: FakeOpenAIServer,
) -> None:
    full = json.dumps({"ids": [10, 20, 30, 40, 50, 60]})
    server.responder = lambda req: full
    server.inject(Fault.truncated_content())
    m = _model(server)
    res = await m.generate_json(ASK, schema=SCHEMA, step="s", validate=ids_of)
    # The half reply '{"ids": [10, 20, 3' is cut: re-asked, never completed to [10, 20, 3].
    assert server.count == 2 and res.raw == full
    assert res.value == [10, 20, 30, 40, 50, 60]
    assert res.attempts == 2 and len(res.unreadable) == 1
    assert res.unreadable[0].startswith("try 1: CutReplyError: reply cut off")
    # Repair never makes an invalid value valid: a repaired non-integer id is still rejected.
    server.responder = lambda req: "{'ids': ['one']}"
    res = await m.generate_json(
        [Message("user", "other")], schema=SCHEMA, step="t", validate=ids_of
    )
    await m.aclose()
    assert res.value is None and len(res.unreadable) == 4
    assert all("ids must be integers" in u for u in res.unreadable)


async def test_a_reask_that_hits_a_transport_failure_is_retried(
    server: FakeOpenAIServer,
) -> None:
    server.responder = lambda req: GOOD
    server.inject(Fault.prose(), Fault.unavailable(), Fault.rate_limit(0.01))
    m = _model(server)
    res = await m.generate_json(ASK, schema=SCHEMA, step="s", validate=ids_of)
    await m.aclose()
    assert res.value == [1, 2, 3] and res.attempts == 2 and len(res.unreadable) == 1
    assert server.count == 4 and m.stats.retries == 2


async def test_unreadable_notes_are_redacted(server: FakeOpenAIServer) -> None:
    register_secret("leaky-secret-value-99")
    server.responder = lambda req: "my key is leaky-secret-value-99"
    m = _model(server, max_reasks=0)
    res = await m.generate_json(ASK, schema=SCHEMA, step="s", validate=ids_of)
    await m.aclose()
    assert res.unreadable and "leaky-secret-value-99" not in res.unreadable[0]


async def test_reask_temperature_starts_from_the_callers(server: FakeOpenAIServer) -> None:
    server.responder = lambda req: GOOD if req["temperature"] >= 0.9 else "nope"
    m = _model(server)
    res = await m.generate_json(
        ASK, schema=SCHEMA, step="s", validate=ids_of, config=GenerateConfig(temperature=0.7)
    )
    await m.aclose()
    assert res.value == [1, 2, 3] and res.attempts == 2
