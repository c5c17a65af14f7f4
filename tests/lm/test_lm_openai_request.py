"""How `OpenAIProvider` turns a `GenerateConfig` into a chat-completions request."""

from __future__ import annotations

from typing import Any

import pytest

from veritrail.lm.base import FatalError, GenerateConfig, Message, ResponseFormat
from veritrail.lm.openai import OpenAIProvider

CLOSED: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "string"}},
    "required": ["a"],
    "additionalProperties": False,
}
OPEN: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}


def _req(cfg: GenerateConfig) -> dict[str, Any]:
    p = OpenAIProvider("m", base_url="http://127.0.0.1:1/v1", api_key="sk-hidden")
    return p._request([Message("user", "hi")], cfg)


def test_plain_request_has_only_what_was_set() -> None:
    req = _req(GenerateConfig())
    assert req == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.0,
    }


def test_json_schema_strict_only_when_the_schema_allows_it() -> None:
    closed = _req(GenerateConfig(response_format=ResponseFormat.JSON_SCHEMA, json_schema=CLOSED))
    assert closed["response_format"]["json_schema"]["strict"] is True
    assert closed["response_format"]["json_schema"]["name"] == "reply"
    opened = _req(GenerateConfig(response_format=ResponseFormat.JSON_SCHEMA, json_schema=OPEN))
    assert opened["response_format"]["json_schema"]["strict"] is False
    nested = {**CLOSED, "properties": {"a": OPEN}, "required": ["a"]}
    assert (
        _req(GenerateConfig(response_format=ResponseFormat.JSON_SCHEMA, json_schema=nested))[
            "response_format"
        ]["json_schema"]["strict"]
        is False
    )


def test_json_object_and_text_modes() -> None:
    obj = _req(GenerateConfig(response_format=ResponseFormat.JSON_OBJECT, json_schema=CLOSED))
    assert obj["response_format"] == {"type": "json_object"}  # no extra fields OpenAI rejects
    assert "response_format" not in _req(GenerateConfig(response_format=ResponseFormat.TEXT))


def test_key_is_not_an_attribute_or_in_repr() -> None:
    p = OpenAIProvider("m", base_url="http://127.0.0.1:1/v1", api_key="sk-hidden")
    assert "sk-hidden" not in repr(p)
    assert all("sk-hidden" not in str(v) for v in vars(p).values() if not hasattr(v, "api_key"))


def test_http_client_default_choice_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERITRAIL_HTTP_CLIENT", raising=False)
    url = "http://127.0.0.1:1/v1"
    assert OpenAIProvider("m", base_url=url).http_client == "aiohttp"  # the installed extra
    assert OpenAIProvider("m", base_url=url, http_client="httpx").http_client == "httpx"
    monkeypatch.setenv("VERITRAIL_HTTP_CLIENT", "httpx")
    assert OpenAIProvider("m", base_url=url).http_client == "httpx"
    # An explicit argument beats the environment.
    assert OpenAIProvider("m", base_url=url, http_client="aiohttp").http_client == "aiohttp"
    monkeypatch.setenv("VERITRAIL_HTTP_CLIENT", "requests")
    with pytest.raises(FatalError, match=r"unknown HTTP client 'requests'.*aiohttp, httpx"):
        OpenAIProvider("m", base_url=url)
