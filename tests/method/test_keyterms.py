"""The key-term check (issue 19; `method.keyterms`): a claim naming a term no source contains is
not Fully Supported, whatever the judge said; on by default only for the embedded models."""

from __future__ import annotations

import asyncio
import json
import string
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veritrail import Claim, VerifyConfig
from veritrail.dag import Dag
from veritrail.detectors.baselines import DirectDetector
from veritrail.lm import FakeProvider, Model
from veritrail.lm.base import Message
from veritrail.method.context import RunContext
from veritrail.method.keyterms import (
    SourceVocabulary,
    VocabularyCache,
    check_outcome,
    enabled,
    key_terms,
    on_by_default,
)
from veritrail.method.loop import lm_steps, verify_claims
from veritrail.method.oracle import Oracle
from veritrail.method.steps import VerdictOutcome
from veritrail.records import Verdict
from veritrail.run.fingerprint import result_config
from veritrail.run.settings import Settings

SOURCE = "Scrooge met Marley's ghost in 1843. Three spirits visited him in London."


def _dag() -> Dag:
    return Dag.from_records(
        [
            {"id": "src", "text": SOURCE, "sources": []},
            {"id": "sum", "text": "Scrooge is visited by ghosts.", "sources": ["src"]},
        ]
    )


def test_key_terms_are_numbers_and_capitalised_words_without_stop_words() -> None:
    got = key_terms("The ghost of Marley visited Scrooge on 24 December, In London; a B-movie.")
    # "The" and "In" are stop words, "a"/"B" are too short, "movie" is lower case.
    assert got == ("Marley", "Scrooge", "24", "December", "London")
    assert key_terms("Paris and paris and Paris") == ("Paris",)  # each once, first spelling
    assert key_terms("Zürich hosted the 2nd Ωmega meeting") == ("Zürich", "2nd", "Ωmega")


def test_absent_terms_compare_case_insensitively_and_ignore_a_plural_s() -> None:
    vocab = SourceVocabulary.of_texts([SOURCE])
    assert vocab.absent("SCROOGE and Marley met spirit in london in 1843.") == ()
    assert vocab.absent("Marleys ghost") == ()  # trailing s ignored on words over 3 letters
    assert vocab.absent("Dickens wrote it in 1844 in Londons.") == ("Dickens", "1844")


def test_check_outcome_turns_only_fully_supported_into_not_fully_supported() -> None:
    vocab = SourceVocabulary.of_texts([SOURCE])
    fs = VerdictOutcome(Verdict.FULLY_SUPPORTED, "All stated.")
    out, score = check_outcome(fs, 1.0, "Dickens met Scrooge in 1844.", vocab)
    assert out.verdict is Verdict.NOT_FULLY_SUPPORTED
    assert score == 0.0
    assert out.reasoning.startswith("All stated.\n[key-term check:")
    assert '"Dickens", "1844"' in out.reasoning
    # Supported terms, or another verdict: returned as they were (the same objects).
    assert check_outcome(fs, None, "Scrooge met Marley.", vocab) == (fs, None)
    nfs = VerdictOutcome(Verdict.NOT_FULLY_SUPPORTED, "No.")
    assert check_outcome(nfs, 0.0, "Dickens.", vocab) == (nfs, 0.0)
    inc = VerdictOutcome(Verdict.INCONCLUSIVE, "?")
    assert check_outcome(inc, None, "Dickens.", vocab)[0] is inc
    many = " ".join(f"Name{i}" for i in range(12))
    assert check_outcome(fs, None, many, vocab)[0].reasoning.count('"') == 16  # 8 named, then ...


_words = st.text(alphabet=string.ascii_letters + string.digits, min_size=1, max_size=8)


@given(st.lists(_words, min_size=1, max_size=20), st.data())
def test_a_claim_made_of_source_words_is_never_flipped(
    words: list[str], data: st.DataObject
) -> None:
    vocab = SourceVocabulary.of_texts([" ".join(words)])
    claim = " ".join(data.draw(st.lists(st.sampled_from(words), min_size=1, max_size=10)))
    assert vocab.absent(claim) == ()
    fs = VerdictOutcome(Verdict.FULLY_SUPPORTED, "r")
    assert check_outcome(fs, None, claim, vocab)[0] is fs


@given(st.text(max_size=200), st.sampled_from(list(Verdict)))
def test_the_check_never_makes_a_claim_fully_supported(claim: str, verdict: Verdict) -> None:
    out, _ = check_outcome(VerdictOutcome(verdict, ""), None, claim, SourceVocabulary(frozenset()))
    assert out.verdict is verdict or out.verdict is Verdict.NOT_FULLY_SUPPORTED
    if verdict is not Verdict.FULLY_SUPPORTED:
        assert out.verdict is verdict


def test_the_vocabulary_is_the_roots_only_and_cached_per_dag_by_its_holder() -> None:
    dag = _dag()
    cache = VocabularyCache(size=1)
    vocab = cache.get(dag)
    assert cache.get(dag) is vocab
    assert "ghost" in vocab.words and "visited" in vocab.words  # from the root
    assert "ghosts" not in vocab.words  # "ghosts" is only in the summary node
    other = _dag()
    assert cache.get(other) is not vocab and cache.get(other).words == vocab.words
    assert cache.get(dag) is not vocab  # size 1: the first entry was dropped


def _oracle(claim: str) -> Oracle:
    return Oracle.from_dict(
        {
            "claims": [
                {
                    "claim": claim,
                    "evidence": {"sum": [0], "src": [0]},
                    "verdicts": ["Fully Supported"],
                }
            ]
        }
    )


@pytest.mark.parametrize(("setting", "expected"), [(True, "nfs"), (False, "fs"), (None, "fs")])
def test_the_loop_applies_the_check_as_the_round_verdict(
    setting: bool | None, expected: str
) -> None:
    claim = "Scrooge met Dickens in 1843."
    cfg = VerifyConfig(q=1, term_check=setting)
    # The oracle's judge has no model: None (the model's choice) leaves the check off.
    res = asyncio.run(verify_claims(_dag(), [Claim("c1", claim)], _oracle(claim).steps(), cfg))[0]
    if expected == "fs":
        assert res.verdict is Verdict.FULLY_SUPPORTED
        assert "key-term check" not in res.reasoning
    else:
        assert res.verdict is Verdict.NOT_FULLY_SUPPORTED
        assert '"Dickens"' in res.reasoning
        assert res.iterations[-1].verdict is Verdict.NOT_FULLY_SUPPORTED
        assert res.iterations[-1].verdict_called_lm


class _Embedded(FakeProvider):
    """A scripted stand-in for an embedded model: the method knows those by their `local/` name."""

    name = "local"


def _fs(messages: Sequence[Message]) -> str:
    return json.dumps({"reasoning": "It is all there.", "verdict": "Fully Supported"})


def test_the_model_decides_when_the_setting_is_left_unset() -> None:
    embedded = Model(_Embedded(responder=_fs))  # type: ignore[arg-type]
    remote = Model(FakeProvider(responder=_fs))  # type: ignore[arg-type]
    assert embedded.name.startswith("local/") and not remote.name.startswith("local/")
    assert on_by_default(embedded) and not on_by_default(remote) and not on_by_default(None)
    assert enabled(None, embedded) and not enabled(None, remote)
    assert not enabled(False, embedded) and enabled(True, remote)
    dag = _dag()
    on = RunContext.create(dag, lm_steps(embedded), VerifyConfig())
    assert on.term_vocabulary == SourceVocabulary.of_dag(dag)
    assert RunContext.create(dag, lm_steps(remote), VerifyConfig()).term_vocabulary is None
    assert (
        RunContext.create(dag, lm_steps(embedded), VerifyConfig(term_check=False)).term_vocabulary
        is None
    )


def test_the_baselines_apply_the_same_check_under_the_same_rule() -> None:
    dag = _dag()
    claims = [Claim("bad", "Dickens wrote about Scrooge."), Claim("ok", "Scrooge met Marley.")]

    def verdicts(model: Model, **kw: bool | None) -> dict[str, Verdict | None]:
        dets = asyncio.run(DirectDetector("Direct", model, **kw).detect(dag, claims))
        return {d.claim_id: d.verdict for d in dets}

    fs, nfs = Verdict.FULLY_SUPPORTED, Verdict.NOT_FULLY_SUPPORTED
    embedded = Model(_Embedded(responder=_fs))  # type: ignore[arg-type]
    remote = Model(FakeProvider(responder=_fs))  # type: ignore[arg-type]
    assert verdicts(embedded) == {"bad": nfs, "ok": fs}
    assert verdicts(remote) == {"bad": fs, "ok": fs}
    assert verdicts(remote, term_check=True) == {"bad": nfs, "ok": fs}
    assert verdicts(embedded, term_check=False) == {"bad": fs, "ok": fs}


def test_the_setting_is_in_the_fingerprint_only_when_set() -> None:
    # Left unset, the model (part of the fingerprint) decides; the config part stays as it was.
    assert "term_check" not in result_config(Settings(model="openai/gpt-4o-mini"), None)
    assert result_config(Settings(model="openai/x", term_check=True), None)["term_check"] is True
    off = result_config(Settings(model="local/qwen2.5-coder-1.5b", term_check=False), None)
    assert off["term_check"] is False


def test_eval_method_specs_turn_the_check_on_or_off_per_method() -> None:
    from veritrail.detectors.registry import BuildContext, build_method

    ctx = BuildContext(Model(FakeProvider(responder=_fs)), VerifyConfig())  # type: ignore[arg-type]
    vt = build_method("veritrail:q=1,term_check=off", ctx)
    assert vt.name == "VeriTrail q=1, term check off"
    assert vt.config.term_check is False  # type: ignore[attr-defined]
    assert build_method("veritrail:q=1", ctx).config.term_check is None  # type: ignore[attr-defined]
    direct = build_method("direct:term_check=on", ctx)
    assert direct.name == "Direct, term check on"
    assert direct.config.term_check is True  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="term_check='maybe'"):
        build_method("direct:term_check=maybe", ctx)
