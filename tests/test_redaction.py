"""The one redaction function: what it removes, and `redact_obj`'s fast path never changes a
result (hypothesis against a plain per-string walk)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veritrail.redaction import (
    MASK,
    _redact_obj,
    known_secrets,
    redact,
    redact_obj,
    redact_url,
    register_secret,
)

KEY = "sk-test-0123456789abcdefXYZ"


@pytest.fixture(autouse=True)
def _env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def test_what_is_removed() -> None:
    register_secret("pa55word-registered")
    cases = {
        f"HTTP 401: Incorrect API key provided: {KEY}.": KEY,
        "Authorization: Bearer abc.def.ghi": "abc.def.ghi",
        "api-key: zzz999zzz": "zzz999zzz",
        '{"api_key": "hello12345"}': "hello12345",
        "see http://alice:s3cret@host:8000/v1 now": "s3cret",
        "token sk-proj-AAAAAAAAAAAAAAAAAAAA leaked": "sk-proj-AAAAAAAAAAAAAAAAAAAA",
        "the password is pa55word-registered": "pa55word-registered",
    }
    for text, secret in cases.items():
        out = redact(text)
        assert secret not in out and MASK in out, (text, out)
    assert redact_url("https://u:p4ss@example.com/v1?q=1") == "https://***@example.com/v1?q=1"
    assert redact("nothing secret here") == "nothing secret here"


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=30),
    st.sampled_from(
        [KEY, f"x{KEY}y", "Authorization:\nBearer qwerty123", "http://u:pw@h/v1", "api_key=abc123"]
    ),
)
json_like = st.recursive(
    json_leaf,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_like)
def test_fast_path_gives_the_walks_result(value: Any) -> None:
    want = _redact_obj(value, known_secrets())
    got = redact_obj(value)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
