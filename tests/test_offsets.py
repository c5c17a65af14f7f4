"""Report offsets (issue 42 item 4, docs/report.md#offsets): every span indexes the text it names,
in code points and in UTF-16 code units, for arbitrary texts through the segmenter and through
`veritrail check` with the oracle and with the demonstration model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from veritrail.cli.main import cli
from veritrail.dag import Dag, load_dag
from veritrail.method.segment import sentence_offsets, split_sentences
from veritrail.offsets import OffsetIndex, utf16_mapper
from veritrail.records import (
    Claim,
    ClaimResult,
    Cost,
    ErrorStageStatus,
    Iteration,
    SentenceRef,
    Termination,
    Verdict,
)
from veritrail.report_model import SCHEMA_FILE

ROOT = Path(__file__).resolve().parent.parent


def _squash(s: str) -> str:
    """Without whitespace: a sentence joins its lines with a space (none between CJK)."""
    return "".join(s.split())


def _words(s: str) -> str:
    return " ".join(s.split())


def _js_slice(text: str, start16: int, end16: int) -> str:
    """JavaScript's text.slice(start16, end16), computed through UTF-16."""
    units = text.encode("utf-16-le")
    return units[2 * start16 : 2 * end16].decode("utf-16-le")


# Prose pieces with the shapes the segmenter treats specially: abbreviations, decimals, line
# breaks, list items, headings, CJK, German ordinals, emoji beyond the BMP, fenced code.
_PIECES = st.sampled_from(
    [
        "Dr. Smith arrived at 3.5 p.m. today.",
        "It rained.",
        "Was it ok?",
        "The plan\nwent on.",
        "- a list item",
        "1. Numbered",
        "# Heading",
        "Chapter One",
        "東京は大きい。",
        "本当？",
        "Am 3. Mai war es kalt und der Hund ist nicht da.",
        "Smiles 🙂 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 here.",
        "```\ncode 🙂\nmore\n```",
        "e.g. this",
        "\u2028odd break.",
        "",
    ]
)
_TEXTS = st.lists(_PIECES, min_size=1, max_size=8).flatmap(
    lambda ps: st.lists(
        st.sampled_from([" ", "\n", "\n\n", "  \n"]), min_size=len(ps), max_size=len(ps)
    ).map(lambda seps: "".join(p + s for p, s in zip(ps, seps, strict=True)))
)


@settings(max_examples=150, deadline=None)
@given(_TEXTS | st.text(max_size=120))
def test_every_sentence_span_indexes_its_sentence(text: str) -> None:
    spans = sentence_offsets(text)
    sentences = split_sentences(text)
    if spans is None:  # a JSON document: units are not slices of the text
        assert text.lstrip()[:1] in "[{"
        return
    assert len(spans) == len(sentences)
    to16 = utf16_mapper(text)
    for (a, b), s in zip(spans, sentences, strict=True):
        piece = text[a:b]
        if (
            "\n" not in piece
            and piece == piece.strip()
            and not any(c in piece for c in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
        ):
            assert piece == s
        else:
            assert _squash(piece) == _squash(s)
        assert _js_slice(text, to16(a), to16(b)) == piece


def _result(claim: Claim, verdict: Verdict, evidence: tuple[SentenceRef, ...]) -> ClaimResult:
    it = Iteration(
        index=1,
        nodes_checked=tuple(sorted({e.node_id for e in evidence})),
        carried_roots=(),
        nodes_with_evidence=tuple(sorted({e.node_id for e in evidence})),
        evidence=evidence,
        summaries=(),
        dropped_ids=(),
        verdict=verdict,
        reasoning="",
        verdict_called_lm=True,
    )
    return ClaimResult(
        claim=claim,
        subclaims=(),
        verdict=verdict,
        reasoning="",
        termination=Termination.ROOTS_ONLY,
        iterations=(it,),
        provenance=(),
        error_stages=(),
        error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(),
    )


@settings(max_examples=80, deadline=None)
@given(_TEXTS, _TEXTS, st.data())
def test_claim_and_evidence_spans_index_what_they_name(
    source: str, answer: str, data: st.DataObject
) -> None:
    source, answer = "Source. " + source, "Answer. " + answer  # a node's text is never blank
    dag = Dag.from_records(
        [{"id": "src", "text": source}, {"id": "out", "text": answer, "sources": ["src"]}]
    )
    out_spans = sentence_offsets(answer) or []
    src_spans = sentence_offsets(source) or []
    k = data.draw(st.integers(0, len(out_spans) - 1))
    a, b = out_spans[k]
    words = answer[a:b].split()
    i = data.draw(st.integers(0, len(words) - 1))
    j = data.draw(st.integers(i + 1, len(words)))
    verbatim = " ".join(words[i:j])  # a clause of sentence k, as written
    reworded = "Something the answer never says " + verbatim[::-1]
    ev = tuple(SentenceRef("src", n, "") for n in range(len(src_spans)))
    index = OffsetIndex(dag)
    for text, verdict in (
        (verbatim, Verdict.FULLY_SUPPORTED),
        (reworded, Verdict.NOT_FULLY_SUPPORTED),
    ):
        got = index.claim(_result(Claim("c", text, (k,)), verdict, ev))
        assert [s["sentence_index"] for s in got["sentences"]] == [k]
        assert _squash(
            answer[got["sentences"][0]["start"] : got["sentences"][0]["end"]]
        ) == _squash(split_sentences(answer)[k])
        for s in got["spans"] + got["sentences"] + got["unsupported"]:
            assert (
                _js_slice(answer, s["start_utf16"], s["end_utf16"]) == answer[s["start"] : s["end"]]
            )
        if got["verbatim"]:
            (s,) = got["spans"]
            assert _words(answer[s["start"] : s["end"]]) == _words(text).rstrip(".") or _words(
                answer[s["start"] : s["end"]]
            ) == _words(text)
            assert a <= s["start"] < s["end"] <= b
        else:
            assert got["spans"] == got["sentences"]
        assert got["unsupported"] == (
            got["sentences"] if verdict is Verdict.NOT_FULLY_SUPPORTED else []
        )
        assert [e["sentence_index"] for e in got["evidence"]] == list(range(len(src_spans)))
        for e in got["evidence"]:
            piece = source[e["start"] : e["end"]]
            assert _squash(piece) == _squash(split_sentences(source)[e["sentence_index"]])
            assert _js_slice(source, e["start_utf16"], e["end_utf16"]) == piece
    # A clause as written is found as written.
    assert index.claim(_result(Claim("c", verbatim, (k,)), Verdict.FULLY_SUPPORTED, ()))["verbatim"]


def test_utf16_offsets_count_surrogate_pairs() -> None:
    text = "A 🙂 B 𝔘 C."
    to16 = utf16_mapper(text)
    assert [to16(i) for i in range(len(text) + 1)] == [0, 1, 2, 4, 5, 6, 7, 9, 10, 11, 12]
    assert _js_slice(text, to16(4), to16(7)) == text[4:7] == "B 𝔘"


# -- through the CLI -----------------------------------------------------------------------------


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(ROOT / "examples" / "check", tmp_path / "examples" / "check")
    monkeypatch.chdir(tmp_path)  # the oracle names chunks by these relative paths
    for name in ("VERITRAIL_MODEL", "VERITRAIL_CONFIG", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VERITRAIL_CACHE", "off")
    return tmp_path


def _check(*how: str) -> tuple[dict[str, Any], Dag]:
    ex = "examples/check"
    sources = [f"{ex}/sources/{p.name}" for p in sorted(Path(ex, "sources").glob("*.txt"))]
    args = ["check", f"{ex}/answer.txt", *sources, *how, "--run-dir", "run", "--out", "r.json"]
    res = CliRunner().invoke(cli, [*args, "--quiet"])
    assert res.exit_code in (0, 1, 3), res.output
    doc: dict[str, Any] = json.loads(Path("r.json").read_text(encoding="utf-8"))
    jsonschema.validate(doc, json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    return doc, load_dag("run/dag.json")  # the DAG the run verified, as the run kept it


def _assert_spans_index_their_texts(doc: dict[str, Any], dag: Dag) -> None:
    answer = dag.node(dag.terminal).text
    sents = doc["dag"]["terminal_sentences"]
    assert len(doc["dag"]["terminal_spans"]) == len(sents)
    for s, want in zip(doc["dag"]["terminal_spans"], sents, strict=True):
        assert _squash(answer[s["start"] : s["end"]]) == _squash(want)
    for c in doc["claims"]:
        off = c["offsets"]
        assert [s["sentence_index"] for s in off["sentences"]] == c["sentence_indices"]
        for s in off["sentences"]:
            assert _squash(answer[s["start"] : s["end"]]) == _squash(sents[s["sentence_index"]])
        if off["verbatim"]:
            (s,) = off["spans"]
            assert _words(answer[s["start"] : s["end"]]) in (
                _words(c["text"]),
                _words(c["text"])[:-1],
            )
        else:
            assert off["spans"] == off["sentences"]
        assert off["unsupported"] == (
            off["sentences"] if c["verdict"] == "Not Fully Supported" else []
        )
        shown = {
            (e["node_id"], e["sentence_index"]): e["text"]
            for it in c["iterations"]
            for e in it["evidence"]
        }
        assert {(e["node_id"], e["sentence_index"]) for e in off["evidence"]} == set(shown)
        for e in off["evidence"]:
            piece = dag.node(e["node_id"]).text[e["start"] : e["end"]]
            assert _squash(piece) == _squash(shown[(e["node_id"], e["sentence_index"])])
            assert _js_slice(dag.node(e["node_id"]).text, e["start_utf16"], e["end_utf16"]) == piece


def test_check_with_the_oracle_gives_each_kind_of_span(example: Path) -> None:
    doc, dag = _check(
        "--claims", "examples/check/claims.json", "--oracle", "examples/check/oracle.json"
    )
    _assert_spans_index_their_texts(doc, dag)
    off = {c["id"]: c["offsets"] for c in doc["claims"]}
    answer = dag.node(dag.terminal).text
    # c1 is sentence 0 as written; c2 disambiguated ("It" -> the museum); c3, c4 decomposed.
    assert off["c1"]["verbatim"] and off["c1"]["located_by"] == "verbatim"
    (s,) = off["c1"]["spans"]
    assert answer[s["start"] : s["end"]] == "The Harbour Museum opened in 1921."
    for cid in ("c2", "c3", "c4"):
        assert not off[cid]["verbatim"] and off[cid]["located_by"] == "sentences"
    (s,) = off["c4"]["unsupported"]  # Not Fully Supported: its sentence, across a line break
    assert (
        answer[s["start"] : s["end"]].startswith("Its oldest")
        and "\n" in answer[s["start"] : s["end"]]
    )
    assert all(o["evidence"] for o in off.values())


def test_check_with_the_demonstration_model(example: Path) -> None:
    doc, dag = _check("--model", "demo/overlap")
    assert doc["claims"]
    _assert_spans_index_their_texts(doc, dag)
    assert any(c["offsets"]["evidence"] for c in doc["claims"])


def test_a_claim_without_sentence_indices_is_found_only_as_written() -> None:
    answer = "The museum opened\nin 1921. A ship sank."
    dag = Dag.from_records(
        [{"id": "src", "text": "Notes."}, {"id": "out", "text": answer, "sources": ["src"]}]
    )
    index = OffsetIndex(dag)
    got = index.claim(
        _result(Claim("c", "The museum opened in 1921.", ()), Verdict.NOT_FULLY_SUPPORTED, ())
    )
    assert got["located_by"] == "verbatim" and got["verbatim"]
    (s,) = got["spans"]
    assert answer[s["start"] : s["end"]] == "The museum opened\nin 1921."
    assert [x["sentence_index"] for x in got["sentences"]] == [0] and got["unsupported"] == got[
        "sentences"
    ]
    reworded = index.claim(
        _result(Claim("c", "A boat went down.", ()), Verdict.NOT_FULLY_SUPPORTED, ())
    )
    assert reworded["located_by"] == "none" and not reworded["verbatim"]
    assert reworded["spans"] == reworded["sentences"] == reworded["unsupported"] == []


def test_json_texts_have_no_spans() -> None:
    tool = '{"city": "London", "year": 1815}'
    dag = Dag.from_records(
        [
            {"id": "tool", "text": tool},
            {"id": "prose", "text": "Ada was born in London. She was born in 1815."},
            {
                "id": "out",
                "text": '{"answer": "Ada was born in London in 1815."}',
                "sources": ["tool", "prose"],
            },
        ]
    )
    index = OffsetIndex(dag)
    assert index.terminal_spans() is None
    ev = (SentenceRef("tool", 0, "city: London"), SentenceRef("prose", 1, "She was born in 1815."))
    got = index.claim(
        _result(Claim("c", "Ada was born in London.", (0,)), Verdict.FULLY_SUPPORTED, ev)
    )
    assert got["located_by"] == "none" and got["spans"] == got["sentences"] == []
    (e,) = got["evidence"]  # the JSON node's unit is not a slice of its text: left out
    assert (
        e["node_id"] == "prose"
        and dag.node("prose").text[e["start"] : e["end"]] == "She was born in 1815."
    )
