"""The worked examples of the paper and the blog, as end-to-end CLI runs with the oracle.

Node numbers follow the sources' figures. Every iteration is asserted: nodes checked, carried
roots, nodes with evidence, evidence sentences and the interim verdict.
"""

from __future__ import annotations

from typing import Any

from dagkit import make_dag

FS, NFS, INC = "Fully Supported", "Not Fully Supported", "Inconclusive"


def iters(
    report: dict[str, Any],
) -> list[tuple[list[str], list[str], list[str], list[tuple[str, int]], str]]:
    c = report["claims"][0]
    return [
        (
            it["nodes_checked"],
            it["carried_roots"],
            it["nodes_with_evidence"],
            [(e["node_id"], e["sentence_index"]) for e in it["evidence"]],
            it["verdict"],
        )
        for it in c["iterations"]
    ]


# Figure 1 of the paper: hierarchical summarization. Roots 1-6 are book chunks (stage 1),
# 7-9 summarise pairs of chunks (stage 2), 10 merges 7 and 8 (stage 3), 11 is the final summary.
FIG1_EDGES = {
    "1": [], "2": [], "3": [], "4": [], "5": [], "6": [],
    "7": ["1", "2"], "8": ["3", "4"], "9": ["5", "6"],
    "10": ["7", "8"],
    "11": ["9", "10"],
}  # fmt: skip
FIG1_SIZES = {"4": 90, "8": 20, "10": 5}
FIG1_CLAIM = "The protagonist returns to her hometown after the war."


def fig1_oracle(verdicts: list[str]) -> dict[str, Any]:
    return {
        "claims": [
            {
                "claim": FIG1_CLAIM,
                "evidence": {"10": [2], "8": [16], "4": [81]},
                "summaries": {
                    "10": "Node 10 says she goes home.",
                    "8": "Node 8 says she goes home after the war.",
                },
                "verdicts": verdicts,
            }
        ]
    }


def test_figure1_fully_supported(run_cli: Any) -> None:
    code, out, rep = run_cli(make_dag(FIG1_EDGES, FIG1_SIZES), [FIG1_CLAIM], fig1_oracle([FS]))
    assert code == 0, out
    c = rep["claims"][0]
    assert iters(rep) == [
        (["10", "9"], [], ["10"], [("10", 2)], FS),
        (["7", "8"], [], ["8"], [("8", 16)], FS),
        (["3", "4"], [], ["4"], [("4", 81)], FS),
    ]
    assert c["verdict"] == FS and c["termination"] == "roots_only"
    # The evidence trail: sentence 2 of node 10 → 16 of node 8 → 81 of node 4.
    assert c["provenance"] == [["10", "8", "4"]]
    assert c["iterations"][2]["evidence"][0]["text"] == "This is sentence 81 of node 4 in the test."
    assert c["error_stage_status"] == "not_applicable" and c["error_stages"] == []
    assert c["cost"]["nodes_read"] == 6 and abs(c["cost"]["nodes_read_share"] - 6 / 11) < 1e-9


def test_figure1_nfs_variant_error_stage_2(run_cli: Any) -> None:
    code, out, rep = run_cli(
        make_dag(FIG1_EDGES, FIG1_SIZES), [FIG1_CLAIM], fig1_oracle([FS, FS, NFS]), "-q", "1"
    )
    assert code == 0, out
    c = rep["claims"][0]
    assert [v for *_, v in iters(rep)] == [FS, FS, NFS]
    # Node 4 (a root) yielded evidence in iteration 3, so only already-read roots remain:
    # condition 1 is tested first and the latest verdict (Not Fully Supported) is final.
    assert c["verdict"] == NFS and c["termination"] == "roots_only"
    # Last Fully Supported iteration is 2, whose only evidence node is 8 (stage 2).
    assert c["error_stages"] == [2] and c["error_stage_status"] == "identified"
    assert c["provenance"] == []


# The blog's GraphRAG DAG: chunks 1-3 (stage 1), per-chunk extractions 4-10 (stage 2),
# summarised description 11 (stage 3), community reports 12-14 (stage 4), map answers 15-16
# (stage 5), final answer 17 (stage 6).
BLOG_EDGES = {
    "1": [], "2": [], "3": [],
    "4": ["1"], "5": ["1"], "6": ["2"], "7": ["2"], "8": ["3"], "9": ["2"], "10": ["3"],
    "11": ["9", "10"],
    "12": ["6", "7"], "13": ["4", "5", "11"], "14": ["8"],
    "15": ["12", "13"], "16": ["14"],
    "17": ["15", "16"],
}  # fmt: skip
BLOG_STAGES = {
    "1": 1, "2": 1, "3": 1, "4": 2, "5": 2, "6": 2, "7": 2, "8": 2, "9": 2, "10": 2,
    "11": 3, "12": 4, "13": 4, "14": 4, "15": 5, "16": 5, "17": 6,
}  # fmt: skip
BLOG_SIZES = {"1": 100, "15": 12, "13": 14, "4": 30}


def test_blog_case_study_1_fully_supported(run_cli: Any) -> None:
    claim = "Legislative efforts have been made to address the high cost of diabetes-related supplies in the US."
    oracle = {
        "claims": [
            {
                "claim": claim,
                "evidence": {"15": [8], "13": [11], "4": [26], "1": [79]},
                "verdicts": [FS],
            }
        ]
    }
    code, out, rep = run_cli(make_dag(BLOG_EDGES, BLOG_SIZES, BLOG_STAGES), [claim], oracle)
    assert code == 0, out
    assert iters(rep) == [
        (["15", "16"], [], ["15"], [("15", 8)], FS),
        (["12", "13"], [], ["13"], [("13", 11)], FS),
        (["11", "4", "5"], [], ["4"], [("4", 26)], FS),
        (["1"], [], ["1"], [("1", 79)], FS),
    ]
    c = rep["claims"][0]
    assert c["verdict"] == FS and c["termination"] == "roots_only"
    assert c["provenance"] == [["15", "13", "4", "1"]]


def test_blog_case_study_2_not_fully_supported_q2(run_cli: Any) -> None:
    claim = "Challenges related to electric vehicle battery repairability contribute to sluggish retail auto sales in China."
    oracle = {
        "claims": [{"claim": claim, "evidence": {"15": [3, 4], "12": [1]}, "verdicts": [NFS]}]
    }
    code, out, rep = run_cli(
        make_dag(BLOG_EDGES, BLOG_SIZES, BLOG_STAGES), [claim], oracle, "--q", "2"
    )
    assert code == 0, out
    assert iters(rep) == [
        (["15", "16"], [], ["15"], [("15", 3), ("15", 4)], NFS),
        # After NFS the sources of ALL checked nodes are candidates, so 14 (via 16) is read too.
        (["12", "13", "14"], [], ["12"], [("12", 1)], NFS),
    ]
    c = rep["claims"][0]
    assert c["verdict"] == NFS and c["termination"] == "q_consecutive_nfs"
    assert (
        c["error_stages"] == [6] and c["error_stage_status"] == "identified"
    )  # the terminal's stage


def test_footnote4_root_evidence_is_carried() -> None:
    """A root that yielded evidence is not re-read but its full text stays in later verdicts."""
    import asyncio

    from veritrail import Claim, VerifyConfig
    from veritrail.dag import Dag
    from veritrail.lm import FakeProvider, Model
    from veritrail.method.loop import lm_steps, verify_claim
    from veritrail.method.segment import SentenceIndex

    dag = Dag.from_records(
        [
            {
                "id": "A",
                "text": "Company X bought two startups in 2020. The deals closed in June.",
                "sources": [],
            },
            {"id": "B", "text": "Company X opened an office in Lyon.", "sources": []},
            {
                "id": "R",
                "text": "Company X focused its acquisition strategy on healthcare expansion.",
                "sources": [],
            },
            {"id": "I", "text": "Company X acquired two startups in 2020.", "sources": ["A", "B"]},
            {
                "id": "T",
                "text": "Company X acquired two startups in 2020 to expand into healthcare.",
                "sources": ["I", "R"],
            },
        ]
    )
    claim = Claim(
        "c1", "Company X acquired two startups in 2020 as part of its expansion into healthcare."
    )
    fake = FakeProvider(
        [
            '{"parts": ["Company X acquired two startups in 2020 as part of its expansion into healthcare."]}',
            # Iteration 1: I (non-root, stage 2) and R (root) are batched separately: roots first.
            '{"selected_ids": [1], "context_ids": [], "summary": "R: strategy focused on healthcare.", "missing": ""}',
            '{"selected_ids": ["1"], "context_ids": [], "summary": "Node I says Company X acquired two startups in 2020.", "missing": ""}',
            '{"reasoning": "Both parts are covered.", "verdict": "Fully Supported"}',
            # Iteration 2: only A and B are read; R is carried.
            '{"selected_ids": [1], "context_ids": [], "summary": "A: bought two startups in 2020.", "missing": ""}',
            '{"reasoning": "A and R together cover the claim.", "verdict": "Fully Supported"}',
        ]
    )
    model = Model(fake)
    res = asyncio.run(verify_claim(dag, SentenceIndex(dag), claim, lm_steps(model), VerifyConfig()))
    assert fake.remaining == 0
    assert [it.nodes_checked for it in res.iterations] == [("I", "R"), ("A", "B")]
    assert [it.carried_roots for it in res.iterations] == [(), ("R",)]
    assert res.iterations[1].nodes_with_evidence == ("A",)
    # The second verdict prompt holds R's full text although R was not re-read.
    final_prompt = fake.calls[-1].prompt
    assert "focused its acquisition strategy on healthcare expansion" in final_prompt
    assert "Company X bought two startups in 2020. The deals closed in June." in final_prompt
    # Evidence prompts of iteration 2 never show R.
    assert all("healthcare expansion" not in c.prompt for c in fake.calls[4:5])
    assert res.verdict.value == FS and res.termination.value == "roots_only"
    assert res.provenance == (("I", "A"),) or ("I", "A") in res.provenance
    assert res.cost.lm_calls == 6


def test_empty_candidates_is_not_fully_supported(run_cli: Any) -> None:
    """SPEC §4.4: an empty candidate set with no root evidence ends Not Fully Supported.

    The paper's pseudo-code would compare the empty set with the (empty) roots-with-evidence set
    first and keep the latest verdict (Fully Supported here); we follow the prose.
    """
    edges = {"R": [], "J": ["R"], "I": ["J"], "T": ["I", "J"]}
    claim = "Something the intermediate node says."
    oracle = {"claims": [{"claim": claim, "evidence": {"I": [0]}, "verdicts": [FS]}]}
    code, out, rep = run_cli(make_dag(edges), [claim], oracle)
    assert code == 0, out
    assert iters(rep) == [(["I", "J"], [], ["I"], [("I", 0)], FS)]
    c = rep["claims"][0]
    assert c["termination"] == "no_candidates" and c["verdict"] == NFS


def test_inconclusive_then_nfs_has_no_identifiable_error_stage(run_cli: Any) -> None:
    edges = {"R1": [], "R2": [], "M": ["R1", "R2"], "T": ["M"]}
    claim = "The report is ambiguous about the date."
    oracle = {"claims": [{"claim": claim, "evidence": {"M": [1]}, "verdicts": [INC, NFS]}]}
    code, out, rep = run_cli(make_dag(edges), [claim], oracle, "-q", "1")
    assert code == 0, out
    assert iters(rep) == [
        (["M"], [], ["M"], [("M", 1)], INC),
        (["R1", "R2"], [], [], [], NFS),
    ]
    c = rep["claims"][0]
    # Both roots were read without evidence: nothing is left to check (condition 2 precedes 3).
    assert c["verdict"] == NFS and c["termination"] == "no_candidates"
    assert c["error_stages"] == [] and c["error_stage_status"] == "not_identifiable"
    # No evidence in iteration 2: Not Fully Supported without a verdict call.
    assert c["iterations"][1]["verdict_called_lm"] is False


def test_all_inconclusive_final_keeps_provenance(run_cli: Any) -> None:
    edges = {"R1": [], "M": ["R1"], "T": ["M"]}
    claim = "A disputed statement."
    oracle = {"claims": [{"claim": claim, "evidence": {"M": [0], "R1": [2]}, "verdicts": [INC]}]}
    code, out, rep = run_cli(make_dag(edges), [claim], oracle)
    assert code == 0, out
    c = rep["claims"][0]
    assert c["verdict"] == INC and c["termination"] == "roots_only"
    assert c["provenance"] == [["M", "R1"]] and c["error_stage_status"] == "not_applicable"


def test_graphrag_shaped_two_error_stages(run_cli: Any) -> None:
    claim = "The community report links the insulin bill to the governor."
    oracle = {
        "claims": [
            {
                "claim": claim,
                "evidence": {"15": [0], "13": [2], "4": [1], "11": [0]},
                "verdicts": [FS, FS, FS, NFS],
            }
        ]
    }
    code, out, rep = run_cli(
        make_dag(BLOG_EDGES, BLOG_SIZES, BLOG_STAGES), [claim], oracle, "-q", "1"
    )
    assert code == 0, out
    assert iters(rep) == [
        (["15", "16"], [], ["15"], [("15", 0)], FS),
        (["12", "13"], [], ["13"], [("13", 2)], FS),
        (["11", "4", "5"], [], ["11", "4"], [("11", 0), ("4", 1)], FS),
        (["10", "9", "1"], [], [], [], NFS),
    ]
    c = rep["claims"][0]
    assert c["verdict"] == NFS
    # Iteration 3 is the last Fully Supported one; its non-root evidence nodes are 11 (stage 3) and 4 (stage 2).
    assert c["error_stages"] == [2, 3] and c["error_stage_status"] == "identified"


def test_several_claims_one_failing_does_not_stop_others(run_cli: Any) -> None:
    edges = {"R": [], "T": ["R"]}
    good = "A claim the oracle knows."
    bad = "A claim the oracle does not know."
    oracle = {"claims": [{"claim": good, "evidence": {"R": [0]}, "verdicts": [FS]}]}
    code, out, rep = run_cli(make_dag(edges), [good, bad], oracle)
    assert code == 3, out  # exit-code contract: one or more claims could not be verified
    by_text = {c["text"]: c for c in rep["claims"]}
    assert by_text[good]["verdict"] == FS
    assert by_text[bad]["verdict"] is None and by_text[bad]["termination"] == "error"
    assert "no entry" in by_text[bad]["error"]
    assert rep["format"] == "veritrail-report" and isinstance(rep["version"], int)
