"""veritrail.citations: each marker style, the ways a reference names nodes, which sentence a
marker belongs to, how a claim with no sentence indices is found, and each citation status."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from veritrail.citations import (
    CitationOptionError,
    SourceIndex,
    attach_citations,
    citation_status,
    find_markers,
    locate_claim,
    miscited_gate,
    parse_rule,
)
from veritrail.dag import Dag
from veritrail.method.segment import sentence_spans
from veritrail.records import CitationStatus, Verdict

AUTO = parse_rule("auto")


def _refs(text: str, spec: str = "auto") -> list[tuple[str, tuple[str, ...]]]:
    rule = parse_rule(spec)
    assert rule is not None
    return [(m.text, m.refs) for m in find_markers(text, rule)]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Paris is big [1].", [("[1]", ("1",))]),
        ("Paris is big [1, 3].", [("[1, 3]", ("1", "3"))]),
        ("Paris is big [2-4].", [("[2-4]", ("2", "3", "4"))]),
        ("Paris is big [^1].", [("[^1]", ("1",))]),
        ("Paris is big【2】.", [("【2】", ("2",))]),
        ("Paris is big【3†paris.txt】.", [("【3†paris.txt】", ("3",))]),
        (
            "Paris is big ([atlas](https://ex.org/atlas.txt)).",
            [("[atlas](https://ex.org/atlas.txt)", ("https://ex.org/atlas.txt",))],
        ),
        ("Paris is big (Source: atlas.txt).", [("(Source: atlas.txt)", ("atlas.txt",))]),
        (
            "Paris is big (Sources: a.txt; b.txt).",
            [("(Sources: a.txt; b.txt)", ("a.txt", "b.txt"))],
        ),
    ],
)
def test_each_marker_style_of_auto(text: str, want: list[tuple[str, tuple[str, ...]]]) -> None:
    assert _refs(text) == want


def test_a_footnote_names_its_source_by_its_definition_which_is_no_marker() -> None:
    text = (
        "Paris is big [^a]. Lyon is old [^b].\n\n[^a]: atlas.txt\n[^b]: see https://ex.org/b.txt."
    )
    assert _refs(text) == [("[^a]", ("atlas.txt",)), ("[^b]", ("https://ex.org/b.txt",))]


def test_plain_brackets_and_words_are_not_markers() -> None:
    assert _refs("A list [a, b] and a year (1990) and [x](not a url).") == []


def test_a_user_pattern_takes_its_ref_group_or_its_first() -> None:
    assert _refs("Paris {7} and Lyon {8, 9}.", r"\{([\d, ]+)\}") == [
        ("{7}", ("7",)),
        ("{8, 9}", ("8", "9")),
    ]
    assert _refs("see <<doc:atlas.txt>>", r"<<(?P<kind>\w+):(?P<ref>[^>]+)>>") == [
        ("<<doc:atlas.txt>>", ("atlas.txt",))
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("([", "is not a regular expression"),
        (r"\d+", "needs a group"),
        (r"(\d*)", "matches empty text"),
    ],
)
def test_bad_patterns_are_refused(value: str, message: str) -> None:
    with pytest.raises(CitationOptionError, match=message):
        parse_rule(value)


def test_off_and_none_check_nothing() -> None:
    assert parse_rule(None) is None and parse_rule("off") is None and parse_rule("OFF") is None
    assert AUTO is not None and AUTO.pattern is None


def _dag(meta: dict[str, Any] | None = None, answer: str = "Paris is big [1].") -> Dag:
    records = [
        {"id": "docs/atlas.txt#1", "text": "Paris is the capital.", "sources": []},
        {"id": "docs/atlas.txt#2", "text": "Lyon is old.", "sources": []},
        {"id": "news.md#1", "text": "Paris has 2 million people.", "sources": []},
        {"id": "memo", "text": "A memo.", "sources": []},
        {"id": "mid", "text": "Paris is big.", "sources": ["docs/atlas.txt#1", "news.md#1"]},
        {
            "id": "answer",
            "text": answer,
            "sources": ["mid", "docs/atlas.txt#2", "memo"],
        },
    ]
    return Dag.from_records(records, meta=meta)


def test_references_name_nodes_by_index_id_file_name_and_url() -> None:
    index = SourceIndex.of(_dag({"urls": {"memo": "https://ex.org/memo/"}}))
    atlas = ("docs/atlas.txt#1", "docs/atlas.txt#2")
    assert [name for name, _ in index.sources] == ["docs/atlas.txt", "news.md", "memo"]
    assert index.resolve("1") == atlas  # sources in the DAG's order, chunks of one file together
    assert index.resolve("2") == ("news.md#1",)
    assert index.resolve("3") == ("memo",)
    assert index.resolve("4") == () and index.resolve("0") == ()
    assert index.resolve("mid") == ("mid",)  # a node id, an intermediate node too
    assert index.resolve("docs/atlas.txt") == atlas  # the file as given
    assert index.resolve("atlas.txt") == atlas and index.resolve("atlas") == atlas  # base, stem
    assert index.resolve("https://ex.org/memo") == ("memo",)  # meta.urls, trailing / ignored
    assert index.resolve("https://ex.org/x/news.md") == ("news.md#1",)  # the URL's file name
    assert index.resolve("https://ex.org/x/nothing.md") == ()


def test_a_marker_opening_a_sentence_belongs_to_the_one_before() -> None:
    text = "Paris is the capital.[1] Lyon is old [2]. Nice is warm."
    dag = Dag.from_records(
        [
            {"id": "a.txt#1", "text": "Paris is the capital.", "sources": []},
            {"id": "b.txt#1", "text": "Lyon is old.", "sources": []},
            {"id": "answer", "text": text, "sources": ["a.txt#1", "b.txt#1"]},
        ]
    )
    assert len(sentence_spans(text)) == 3
    report = _report(
        [
            _claim("c1", [0], Verdict.FULLY_SUPPORTED, [["a.txt#1"]]),
            _claim("c2", [1], Verdict.FULLY_SUPPORTED, [["b.txt#1"]]),
            _claim("c3", [2], Verdict.FULLY_SUPPORTED, [["b.txt#1"]]),
        ]
    )
    out = attach_citations(report, dag, "auto")
    got = {c["id"]: (c["citation"]["markers"], c["citation"]["kind"]) for c in out["claims"]}
    assert got == {
        "c1": (["[1]"], "supported_by_cited"),
        "c2": (["[2]"], "supported_by_cited"),
        "c3": ([], "uncited"),
    }
    assert out["summary"]["citations"]["supported_by_cited"] == 2


def test_a_claim_without_sentence_indices_is_found_by_its_text_or_words() -> None:
    text = "Paris is the capital [1]. Lyon is an old city [2]."
    spans = sentence_spans(text)
    assert locate_claim("x", [1], text, spans) == ((1,), "sentences")
    assert locate_claim("Lyon is an old city", [], text, spans) == ((1,), "text")
    assert locate_claim("The city of Lyon is old.", [], text, spans) == ((1,), "overlap")
    assert locate_claim("Bananas grow.", [], text, spans) == ((), "none")


@pytest.mark.parametrize(
    ("verdict", "markers", "cited", "evidence", "want"),
    [
        (Verdict.FULLY_SUPPORTED, True, ["a"], ["a", "b"], CitationStatus.SUPPORTED_BY_CITED),
        (Verdict.FULLY_SUPPORTED, True, ["c"], ["a"], CitationStatus.MISATTRIBUTED),
        (Verdict.FULLY_SUPPORTED, True, [], ["a"], CitationStatus.MISATTRIBUTED),  # names nothing
        (Verdict.NOT_FULLY_SUPPORTED, True, ["c"], ["a"], CitationStatus.CITED_NOT_SUPPORTING),
        (Verdict.INCONCLUSIVE, True, ["c"], ["a"], CitationStatus.CITED_NOT_SUPPORTING),
        (Verdict.NOT_FULLY_SUPPORTED, True, ["c"], [], CitationStatus.UNSUPPORTED),
        (Verdict.NOT_FULLY_SUPPORTED, True, ["a"], ["a"], CitationStatus.UNSUPPORTED),
        (Verdict.FULLY_SUPPORTED, False, [], ["a"], CitationStatus.UNCITED),
        (Verdict.NOT_FULLY_SUPPORTED, False, [], [], CitationStatus.UNCITED),
        (None, True, ["a"], ["a"], None),
    ],
)
def test_each_status(
    verdict: Verdict | None,
    markers: bool,
    cited: list[str],
    evidence: list[str],
    want: CitationStatus | None,
) -> None:
    got = citation_status(
        verdict, has_markers=markers, cited=cited, evidence_nodes=evidence, evidence_roots=evidence
    )
    assert got is want
    assert (got is not None and got.miscited) == (
        want in (CitationStatus.MISATTRIBUTED, CitationStatus.CITED_NOT_SUPPORTING)
    )


def _claim(
    cid: str, sentences: list[int], verdict: Verdict | None, provenance: list[list[str]]
) -> dict[str, Any]:
    return {
        "id": cid,
        "text": f"claim {cid}",
        "sentence_indices": sentences,
        "subclaims": [],
        "verdict": verdict.value if verdict else None,
        "reasoning": "",
        "termination": "roots_only" if verdict else "error",
        "error": None if verdict else "boom",
        "iterations": [],
        "provenance": provenance,
        "error_stages": [],
        "error_stage_status": "not_applicable",
        "cost": {
            "lm_calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "nodes_read": 0,
            "nodes_read_share": 0.0,
        },
    }


def _report(claims: list[dict[str, Any]], run: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "format": "veritrail-report",
        "version": 5,
        "model": "oracle",
        "config": {},
        "dag": {"nodes": 3, "terminal": "answer", "nodes_per_stage": {}, "nodes_touched": []},
        "summary": {"claims": len(claims), "verdicts": {}, "error_stages": {}, "cost": {}},
        "claims": claims,
        "run": run or {},
    }


def test_attach_off_leaves_the_report_alone_and_errored_claims_get_no_status() -> None:
    dag = _dag()
    report = _report([_claim("c1", [0], None, [])])
    before = copy.deepcopy(report)
    assert attach_citations(report, dag, None) is report and report == before
    out = attach_citations(report, dag, "auto")
    assert report == before  # a copy, the input untouched
    assert out["claims"][0]["citation"]["kind"] is None
    assert out["claims"][0]["citation"]["markers"] == ["[1]"]
    assert sum(out["summary"]["citations"].values()) == 0


def test_unresolved_references_are_kept() -> None:
    dag_text_answer = _dag(answer="Paris is big [9].")
    out = attach_citations(
        _report([_claim("c1", [0], Verdict.FULLY_SUPPORTED, [["mid", "news.md#1"]])]),
        dag_text_answer,
        "auto",
    )
    cite = out["claims"][0]["citation"]
    assert cite["unresolved"] == ["9"] and cite["cited_nodes"] == []
    assert cite["kind"] == "misattributed" and cite["supporting_nodes"] == ["news.md#1"]


def test_a_cited_intermediate_node_on_the_trail_counts() -> None:
    dag = _dag(answer="Paris is big (Source: mid).")
    out = attach_citations(
        _report([_claim("c1", [0], Verdict.FULLY_SUPPORTED, [["mid", "news.md#1"]])]), dag, "auto"
    )
    assert out["claims"][0]["citation"]["kind"] == "supported_by_cited"


def test_the_miscited_gate_counts_cited_claims_only() -> None:
    dag = Dag.from_records(
        [
            {"id": "a.txt#1", "text": "A.", "sources": []},
            {"id": "b.txt#1", "text": "B.", "sources": []},
            {
                "id": "answer",
                "text": "One [1]. Two [1]. Three. Four.",
                "sources": ["a.txt#1", "b.txt#1"],
            },
        ]
    )
    claims = [
        _claim("c1", [0], Verdict.FULLY_SUPPORTED, [["a.txt#1"]]),  # supported_by_cited
        _claim("c2", [1], Verdict.FULLY_SUPPORTED, [["b.txt#1"]]),  # misattributed
        _claim("c3", [2], Verdict.FULLY_SUPPORTED, [["b.txt#1"]]),  # uncited: not counted
        _claim("c4", [3], Verdict.NOT_FULLY_SUPPORTED, []),  # uncited
    ]
    out = attach_citations(_report(claims, {"max_miscited": 0.4}), dag, "auto")
    gate = miscited_gate(out)
    assert gate is not None
    assert gate.cited == 2 and gate.share == 0.5 and gate.rate == 0.4
    assert gate.claims == (("c2", "claim c2", "misattributed"),)
    assert miscited_gate(out, 0.5) is None  # at the rate is not above it
    out["run"]["max_miscited"] = None
    assert miscited_gate(out) is None
