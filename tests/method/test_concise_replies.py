"""Concise reply formats (issue 19): a model whose provider asks for them gets the method's reply
schemas with bounded free-text fields; every other model gets the schemas unchanged."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from veritrail import Claim, VerifyConfig
from veritrail.dag import Dag
from veritrail.lm.base import GenerateConfig, Message, ModelOutput
from veritrail.lm.fake import FakeProvider
from veritrail.lm.model import Model
from veritrail.method.evidence import (
    CONCISE_MISSING_CHARS,
    CONCISE_SUMMARY_CHARS,
    selection_schema,
)
from veritrail.method.loop import lm_steps, verify_claims
from veritrail.method.verdict import CONCISE_REASONING_CHARS
from veritrail.records import Verdict


class _Recording(FakeProvider):
    """The fake provider, recording each call's reply schema."""

    def __init__(self, *, concise: bool, **kw: Any) -> None:
        super().__init__(**kw)
        self.schemas: dict[str, dict[str, Any]] = {}
        self.evidence_schemas: list[dict[str, Any]] = []  # every evidence call's, in order
        if concise:
            self.concise_replies = True

    async def generate(self, messages: Any, config: GenerateConfig) -> ModelOutput:
        props = (config.json_schema or {}).get("properties", {})
        if "selected_ids" in props:
            self.schemas.setdefault("evidence_selection", config.json_schema or {})
            self.evidence_schemas.append(config.json_schema or {})
        elif "reasoning" in props:
            self.schemas["verdict"] = config.json_schema or {}
        return await super().generate(messages, config)


def _respond(messages: list[Message]) -> str:
    system = messages[0].content
    if system.startswith("You split"):
        return json.dumps({"parts": ["The river rose."]})
    if system.startswith("You find evidence"):
        return json.dumps(
            {"selected_ids": [1], "context_ids": [], "summary": "It rose.", "missing": ""}
        )
    return json.dumps({"reasoning": "Stated.", "verdict": "Fully Supported"})


def _run(concise: bool) -> dict[str, dict[str, Any]]:
    return _recorded(concise).schemas


def _recorded(concise: bool) -> _Recording:
    # Two rounds: the first over the summary "m" (not a root), then, after a Not Fully
    # Supported verdict, over the source "r" (a root).
    verdicts = iter(["Not Fully Supported", "Fully Supported"])

    def respond(messages: list[Message]) -> str:
        if messages[0].content.startswith("You find evidence") or messages[0].content.startswith(
            "You split"
        ):
            return _respond(messages)
        return json.dumps({"reasoning": "Stated.", "verdict": next(verdicts)})

    prov = _Recording(concise=concise, responder=respond)
    model = Model(prov)
    assert model.concise_replies is concise
    dag = Dag.from_records(
        [
            {"id": "r", "text": "The river rose."},
            {"id": "m", "text": "The river rose.", "sources": ["r"]},
            {"id": "t", "text": "x", "sources": ["m"]},
        ]
    )
    (res,) = asyncio.run(
        verify_claims(dag, [Claim("c", "The river rose.")], lm_steps(model), VerifyConfig())
    )
    assert res.error is None and res.verdict is Verdict.FULLY_SUPPORTED
    assert len(prov.evidence_schemas) == 2
    return prov


@pytest.mark.parametrize("concise", [False, True])
def test_steps_ask_for_the_concise_format_only_when_the_provider_does(concise: bool) -> None:
    schemas = _run(concise)
    ev = schemas["evidence_selection"]["properties"]
    verdict = schemas["verdict"]["properties"]
    if concise:
        assert ev["summary"] == {"type": "string", "maxLength": CONCISE_SUMMARY_CHARS}
        assert ev["missing"] == {"type": "string", "maxLength": CONCISE_MISSING_CHARS}
        assert verdict["reasoning"] == {"type": "string", "maxLength": CONCISE_REASONING_CHARS}
    else:
        assert ev["summary"] == ev["missing"] == verdict["reasoning"] == {"type": "string"}
    # What the method needs is never bounded away: ids, the verdict's labels.
    assert ev["selected_ids"]["maxItems"] == 1
    assert "enum" in verdict["verdict"]


def test_schemas_are_shared_objects_per_format() -> None:
    # The model layer remembers per schema object whether strict mode accepts it.
    assert selection_schema(7, True) is selection_schema(7, True)
    assert selection_schema(7, True) is not selection_schema(7, False)


def test_concise_id_lists_are_bounded_but_never_below_the_prompt() -> None:
    from veritrail.method.evidence import CONCISE_MAX_IDS, selection_schema

    for n in (1, 3, CONCISE_MAX_IDS, 40):
        plain = selection_schema(n)["properties"]
        short = selection_schema(n, concise=True)["properties"]
        for key in ("selected_ids", "context_ids"):
            assert plain[key]["maxItems"] == n  # remote models: the prompt's size
            assert short[key]["maxItems"] == min(n, CONCISE_MAX_IDS)


@pytest.mark.parametrize("concise", [False, True])
def test_a_concise_prompt_of_roots_only_asks_for_no_summary(concise: bool) -> None:
    # The verdict reads a root in full, never its summary: the embedded model is not asked to
    # write one (session 6: 1,198 -> 1,020 tokens out on the quick start, same ids and verdicts).
    summary_round, root_round = (x["properties"] for x in _recorded(concise).evidence_schemas)
    if concise:
        assert summary_round["summary"]["maxLength"] == CONCISE_SUMMARY_CHARS
        assert root_round["summary"] == root_round["missing"] == {"type": "string", "maxLength": 0}
    else:  # remote models: the full format everywhere
        assert summary_round == root_round
        assert root_round["summary"] == {"type": "string"}
    # The ids are never bounded away, and they come before the free text in the reply.
    assert list(root_round)[:2] == ["selected_ids", "context_ids"]
    assert selection_schema(5, False, True) == selection_schema(5, False, False)
