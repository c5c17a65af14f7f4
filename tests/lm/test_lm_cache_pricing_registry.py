"""Cache keys and storage, the price table, and the provider registry."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veritrail.lm.base import FatalError, GenerateConfig, Message, ModelOutput, ResponseFormat
from veritrail.lm.cache import CACHE_KEY_VERSION, ResponseCache, cache_key, key_document
from veritrail.lm.fake import FakeProvider
from veritrail.lm.openai import OpenAIProvider, parse_retry_after
from veritrail.lm.pricing import Price, PriceTable
from veritrail.lm.registry import (
    DEFAULT_MODEL,
    ModelNameError,
    get_model,
    get_provider,
    register_provider,
    resolve_name,
    split_name,
)

MSGS = [Message("system", "be brief"), Message("user", "is the sky blue?")]

texts = st.text(max_size=40)


@given(a=texts, b=texts)
def test_cache_key_separates_different_prompts(a: str, b: str) -> None:
    ka = cache_key("openai", "m", [Message("user", a)], GenerateConfig())
    kb = cache_key("openai", "m", [Message("user", b)], GenerateConfig())
    assert (ka == kb) == (a == b)


def test_cache_key_covers_every_output_changing_parameter() -> None:
    base = GenerateConfig()
    k0 = cache_key("openai", "m", MSGS, base)
    variants = [
        replace(base, temperature=0.7),
        replace(base, max_tokens=10),
        replace(base, seed=1),
        replace(base, response_format=ResponseFormat.JSON_OBJECT),
        replace(base, json_schema={"type": "object"}),
        replace(base, schema_name="other"),
        replace(base, sample_index=1),
    ]
    keys = {cache_key("openai", "m", MSGS, v) for v in variants}
    assert k0 not in keys and len(keys) == len(variants)
    assert cache_key("openai", "m2", MSGS, base) != k0
    assert cache_key("local", "m", MSGS, base) != k0
    assert cache_key("openai", "m", [*MSGS[:1], Message("user", "other")], base) != k0
    # Roles matter too, not only the text.
    assert cache_key("openai", "m", [Message("user", "be brief"), MSGS[1]], base) != k0


def test_key_document_is_versioned_and_has_no_transport_fields() -> None:
    doc = key_document("openai", "m", MSGS, GenerateConfig())
    assert doc["v"] == CACHE_KEY_VERSION
    flat = json.dumps(doc)
    for transport in ("api_key", "base_url", "timeout", "retry"):
        assert transport not in flat


def test_response_cache_roundtrip_stats_and_clear(tmp_path: Path) -> None:
    c = ResponseCache(tmp_path / "c.sqlite")
    out = ModelOutput("hello", 3, 1, "stop")
    assert c.get("evidence", "k1") is None
    c.put("evidence", "k1", "openai/m", out)
    c.put("verdict", "k2", "openai/m", ModelOutput("v", 5, 2))
    got = c.get("evidence", "k1")
    assert got is not None and (got.text, got.input_tokens, got.output_tokens) == ("hello", 3, 1)
    assert c.get("verdict", "k1") is None  # one namespace per step
    s = c.stats()
    assert (s.entries, s.hits, s.misses) == (2, 1, 2)
    assert {n.namespace: n.entries for n in s.namespaces} == {"evidence": 1, "verdict": 1}
    assert c.clear("verdict") == 1
    assert c.stats().entries == 1
    assert c.clear() == 1
    assert c.stats().entries == 0
    c.close()
    # A second connection (another process, a later run) sees the same file.
    c2 = ResponseCache(tmp_path / "c.sqlite")
    c2.put("s", "k", "m", out)
    c3 = ResponseCache(tmp_path / "c.sqlite")
    assert c3.get("s", "k") is not None


def test_price_table_lookup_and_override(tmp_path: Path) -> None:
    t = PriceTable()
    assert t.lookup("openai", "gpt-4o") == Price(2.5, 10.0, 1.25)
    assert t.lookup("openai", "gpt-4o-mini") == Price(0.15, 0.6, 0.075)  # longest prefix wins
    assert t.lookup("openai", "gpt-4o-2024-08-06") == Price(2.5, 10.0, 1.25)
    assert t.lookup("openai", "my-finetune") is None
    assert t.lookup("local", "qwen2.5-coder-1.5b") == Price(0.0, 0.0)
    f = tmp_path / "prices.json"
    f.write_text(
        json.dumps({"openai/gpt-4o": {"input": 1, "output": 2}, "my-ft": {"input": 3, "output": 4}})
    )
    u = PriceTable.from_file(f)
    assert u.lookup("openai", "gpt-4o") == Price(1.0, 2.0)
    assert u.lookup("openai", "my-ft-v2") == Price(3.0, 4.0)
    assert Price(2.5, 10.0).dollars(1_000_000, 100_000) == pytest.approx(3.5)
    f.write_text(json.dumps({"x": {"input": "cheap"}}))
    with pytest.raises(ValueError, match="numeric"):
        PriceTable.from_file(f)


def test_unknown_price_costs_zero_with_a_note() -> None:
    m = get_model("openai/unpriced-model", base_url="http://127.0.0.1:9/v1")
    assert any("no price known for openai/unpriced-model" in n for n in m.notes)


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # past
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_names_resolve_and_errors_are_helpful(monkeypatch: pytest.MonkeyPatch) -> None:
    assert split_name("openai/org/model:tag") == ("openai", "org/model:tag")
    with pytest.raises(ModelNameError, match="provider/model"):
        split_name("gpt-4o")
    with pytest.raises(ModelNameError, match="unknown provider"):
        split_name("nope/x")
    monkeypatch.delenv("VERITRAIL_MODEL", raising=False)
    assert resolve_name(None) == DEFAULT_MODEL == "local/qwen2.5-coder-1.5b"
    monkeypatch.setenv("VERITRAIL_MODEL", "fake/x")
    assert resolve_name(None) == "fake/x"
    assert resolve_name("openai/y") == "openai/y"


def test_registry_builds_each_provider(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = get_provider("fake/script", replies=["a"])
    assert isinstance(fake, FakeProvider) and fake.model == "script"
    for var in ("OPENAI_API_KEY", "VERITRAIL_API_KEY", "OPENAI_BASE_URL", "VERITRAIL_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    with pytest.raises(FatalError, match="API key"):
        get_provider("openai/gpt-4o")
    monkeypatch.setenv("VERITRAIL_BASE_URL", "http://127.0.0.1:1/v1")
    p = get_provider("openai/served-model", timeout=None)  # None options are dropped
    assert isinstance(p, OpenAIProvider) and p.endpoint.startswith("http://127.0.0.1:1/v1")
    az = get_provider(
        "openai/gpt-4o",
        azure_endpoint="https://example.openai.azure.com",
        azure_deployment="dep",
        api_key="sk-secret-azure",
    )
    assert isinstance(az, OpenAIProvider) and az.endpoint.startswith("azure:")
    assert "sk-secret" not in repr(az)
    m = get_model("fake/x", replies=["a"], cache=tmp_path / "c.sqlite", concurrency=3)
    assert m.cache is not None and m.concurrency == 3 and m.name == "fake/x"

    def make(model: str, **_: object) -> FakeProvider:
        return FakeProvider(model="custom-" + model)

    with pytest.raises(ModelNameError, match="base_url"):
        get_provider("local/smollm2-135m", base_url="http://127.0.0.1:1/v1")
    register_provider("mine", make)
    assert get_provider("mine/m").model == "custom-m"


def test_retry_pacing_and_reasks_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from veritrail.lm.registry import retry_policy_from_env
    from veritrail.lm.retry import RetryPolicy

    for name in ("VERITRAIL_RETRY_BASE_DELAY", "VERITRAIL_RETRY_MAX_ATTEMPTS"):
        monkeypatch.delenv(name, raising=False)
    assert retry_policy_from_env() == RetryPolicy()
    assert get_model("fake/x").max_reasks == 3
    assert get_model("fake/x", max_reasks=0).max_reasks == 0
    monkeypatch.setenv("VERITRAIL_RETRY_BASE_DELAY", "0.01")
    monkeypatch.setenv("VERITRAIL_RETRY_MAX_ATTEMPTS", "9")
    policy = get_model("fake/x").retry
    assert policy.base_delay == 0.01 and policy.max_attempts == 9
    assert policy.rate_limit_min_delay == 0.01  # a 429 without Retry-After waits as little
    explicit = RetryPolicy(max_attempts=2)
    assert get_model("fake/x", retry=explicit).retry is explicit
    for name, bad in [
        ("VERITRAIL_RETRY_BASE_DELAY", "soon"),
        ("VERITRAIL_RETRY_BASE_DELAY", "-1"),
        ("VERITRAIL_RETRY_BASE_DELAY", "nan"),
        ("VERITRAIL_RETRY_MAX_ATTEMPTS", "0"),
        ("VERITRAIL_RETRY_MAX_ATTEMPTS", "2.5"),
    ]:
        with monkeypatch.context() as mp:
            mp.setenv(name, bad)
            with pytest.raises(ValueError, match=name):
                retry_policy_from_env()
