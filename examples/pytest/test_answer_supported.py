"""Example: fail a test when an answer says something its sources do not.

    VERITRAIL_MODEL=openai/gpt-4o-mini OPENAI_API_KEY=... pytest examples/pytest/

`assert_supported` runs `veritrail.check`: the answer's claims are extracted and each is checked
against the sources; the test fails listing every unsupported claim with the judge's reasoning
and the evidence found, under a first line naming the model. The model comes from
VERITRAIL_MODEL (or ./veritrail.toml, or `model=`); the model cache makes a re-run of an
unchanged test free. See docs/api.md.

Without a configured model the embedded one is used (when `veritrail[local-qwen]` is installed;
else the test stops with one line saying what to install or set) and a `NotAJudgeWarning` in
pytest's summary says that its verdicts are a small model's, not a judge's. Keyless and
offline, as a demonstration of the plumbing only:

    VERITRAIL_MODEL=demo/overlap pytest examples/pytest/
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from veritrail.testing import assert_supported

SOURCES = sorted((Path(__file__).parent.parent / "check" / "sources").glob("*.txt"))
QUESTION = "When did the Harbour Museum open, who founded it, and what does it hold?"


def answer_question(question: str) -> str:
    """Stands in for your RAG pipeline."""
    return (
        "The Harbour Museum opened in 1921. It was founded by Marta Reyes. "
        "Its collection holds 412 nautical charts."
    )


@pytest.fixture
def veritrail_options() -> dict[str, Any]:
    """Extra arguments for `assert_supported` (e.g. `{"model": "openai/gpt-4o-mini"}`); empty
    means the configured model."""
    return {}


def test_answer_is_supported(veritrail_options: dict[str, Any]) -> None:
    answer = answer_question(QUESTION)
    assert_supported(answer, SOURCES, question=QUESTION, **veritrail_options)


def test_a_made_up_detail_fails(veritrail_options: dict[str, Any]) -> None:
    answer = answer_question(QUESTION) + " Its oldest chart was drawn by Marta Reyes."
    with pytest.raises(AssertionError, match="not supported"):
        assert_supported(answer, SOURCES, question=QUESTION, **veritrail_options)
