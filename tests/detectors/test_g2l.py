"""G2LDetect (issue 9) with the scripted provider: tree, paths, checks, aggregation, report."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from veritrail.cli.main import cli
from veritrail.dag import Dag
from veritrail.detectors.g2l import (
    G2LConfig,
    G2LStatus,
    PathCheck,
    Reference,
    TreeError,
    TreeNode,
    aggregate,
    chunk_references,
    g2l_claim,
    g2l_detect,
    g2l_report,
    parse_tree,
    tree_paths,
)
from veritrail.lm import FakeProvider, Message, Model
from veritrail.method.tokens import estimate_tokens
from veritrail.records import Claim, Verdict
from veritrail.testing.fake_openai_server import FakeOpenAIServer

TREE = {
    "tree": {
        "text": "The glass frog Hyalinobatrachium dianae",
        "children": [
            {
                "text": "Discovery",
                "children": [
                    {"text": "It was found in Costa Rica", "children": []},
                    {"text": "It was described in 2015", "children": []},
                ],
            },
            {
                "text": "Appearance",
                "children": [{"text": "Its belly is translucent", "children": []}],
            },
        ],
    }
}
REFS = [
    "Hyalinobatrachium dianae is a glass frog found in Costa Rica. Its belly is translucent.",
    "The species was described in 2018 by Kubicki and colleagues.",
]
_STATEMENT = re.compile(r"<<< statement\n(.*?)\n>>> end statement", re.DOTALL)


def _prompt(messages: Sequence[Message]) -> str:
    return "\n".join(m.content for m in messages)


def responder(
    tree: object, supported: Callable[[str, str], bool | str]
) -> Callable[[Sequence[Message]], str]:
    """Tree prompt → `tree`; check prompt → `supported(statement, references)` (str = raw reply)."""

    def reply(messages: Sequence[Message]) -> str:
        p = _prompt(messages)
        if "Text to organise:" in p:
            return tree if isinstance(tree, str) else json.dumps(tree)
        m = _STATEMENT.search(p)
        assert m, p[:300]
        refs = p.split("Reference documents:", 1)[1].split("Statement (general to specific):")[0]
        ans = supported(m.group(1), refs)
        if isinstance(ans, str):
            return ans
        return json.dumps({"reason": "scripted", "supported": ans})

    return reply


def test_paths_cover_every_leaf_and_carry_their_context() -> None:
    root = parse_tree(TREE)
    paths = tree_paths(root)
    assert paths == [
        ("The glass frog Hyalinobatrachium dianae", "Discovery", "It was found in Costa Rica"),
        ("The glass frog Hyalinobatrachium dianae", "Discovery", "It was described in 2015"),
        ("The glass frog Hyalinobatrachium dianae", "Appearance", "Its belly is translucent"),
    ]
    assert [p[-1] for p in paths] == [leaf.text for leaf in root.leaves()]


_texts = st.text(alphabet="abcdefgh xyz", min_size=1, max_size=8).filter(str.strip)
_trees: st.SearchStrategy[TreeNode] = st.recursive(
    st.builds(lambda t: TreeNode(t.strip()), _texts),
    lambda kids: st.builds(
        lambda t, cs: TreeNode(t.strip(), tuple(cs)), _texts, st.lists(kids, min_size=1, max_size=4)
    ),
    max_leaves=30,
)


@given(_trees)
def test_tree_invariants(root: TreeNode) -> None:
    # The schema shape round-trips, one path per leaf, each path starts at the root and ends at
    # its leaf, and path lengths equal the leaves' depths.
    assert parse_tree({"tree": root.to_json()}, max_depth=100, max_nodes=10_000) == root
    paths = tree_paths(root)
    leaves = root.leaves()
    assert len(paths) == len(leaves)
    assert all(p[0] == root.text for p in paths)
    assert [p[-1] for p in paths] == [leaf.text for leaf in leaves]
    assert max(len(p) for p in paths) == root.depth()


def test_lenient_tree_shapes() -> None:
    nested = {"Frog": {"Discovery": ["Costa Rica", "2015"], "Appearance": "translucent belly"}}
    assert tree_paths(parse_tree({"tree": nested})) == [
        ("Frog", "Discovery", "Costa Rica"),
        ("Frog", "Discovery", "2015"),
        ("Frog", "Appearance", "translucent belly"),
    ]
    # The tree serialised inside a string, synonyms of the keys, several top-level nodes.
    as_string = {"tree": json.dumps({"theme": "T", "branches": [{"name": "B", "details": ["d"]}]})}
    assert tree_paths(parse_tree(as_string)) == [("T", "B", "d")]
    several = parse_tree([{"text": "A", "children": ["a1"]}, "B"])
    assert several.text == "" and tree_paths(several) == [("A", "a1"), ("B",)]
    copied = {"tree": {"text": "<central subject>", "children": ["<specific fact>"]}}
    for bad in ({"tree": "just prose"}, {"tree": {}}, {"tree": []}, None, copied):
        with pytest.raises(TreeError):
            parse_tree(bad)
    deep: dict[str, object] = {"text": "x", "children": []}
    for _ in range(10):
        deep = {"text": "x", "children": [deep]}
    with pytest.raises(TreeError):
        parse_tree(deep, max_depth=5)


async def test_all_paths_supported_passes_and_each_check_sees_its_path_and_the_refs() -> None:
    fake = FakeProvider(responder=responder(TREE, lambda stmt, refs: True))
    res = await g2l_detect(Model(fake), "some text", REFS)
    assert res.status is G2LStatus.PASSED and res.passed is True and res.score == 1.0
    checks = [c for c in fake.calls if "<<< statement" in c.prompt]
    assert len(checks) == 3
    for c, path in zip(
        sorted(checks, key=lambda c: c.prompt), sorted(tree_paths(parse_tree(TREE))), strict=True
    ):
        stmt = _STATEMENT.search(c.prompt).group(1)  # type: ignore[union-attr]
        # the whole path, general to specific, numbered
        assert stmt == "\n".join(f"{i}. {t}" for i, t in enumerate(path, 1))
        assert "<<< Document 1\n" + REFS[0] in c.prompt and "<<< Document 2\n" + REFS[1] in c.prompt
    tree_call = next(c for c in fake.calls if "Text to organise:" in c.prompt)
    assert "<<< text\nsome text\n>>> end text" in tree_call.prompt
    assert tree_call.config.json_schema is not None


async def test_a_failing_path_fails_the_text_and_is_reported() -> None:
    fake = FakeProvider(responder=responder(TREE, lambda stmt, refs: "2015" not in stmt))
    model = Model(fake)
    res = await g2l_detect(model, "some text", REFS)
    assert res.status is G2LStatus.FAILED and res.passed is False
    assert [p.leaf for p in res.failing_paths] == ["It was described in 2015"]
    assert res.score == pytest.approx(2 / 3)
    report = g2l_report(res, model=model.name, usage={"calls": 4})
    json.dumps(report)  # JSON-ready
    assert report["status"] == "failed" and report["failing_paths"] == [1]
    failing = report["paths"][1]
    assert failing["supported"] is False
    assert failing["path"] == [
        "The glass frog Hyalinobatrachium dianae",
        "Discovery",
        "It was described in 2015",
    ]


async def test_malformed_tree_is_reasked_then_used() -> None:
    replies = iter(["Here is the tree: {tree: oops", json.dumps(TREE)])

    def reply(messages: Sequence[Message]) -> str:
        p = _prompt(messages)
        if "Text to organise:" in p:
            return next(replies)
        return json.dumps({"reason": "ok", "supported": True})

    fake = FakeProvider(responder=reply)
    res = await g2l_detect(Model(fake, max_reasks=1), "t", REFS)
    assert res.status is G2LStatus.PASSED and res.tree_attempts == 2
    reask = [c for c in fake.calls if "Text to organise:" in c.prompt][1]
    assert (
        reask.messages[-2].role == "assistant" and "could not be read" in reask.messages[-1].content
    )


async def test_malformed_tree_after_the_bound_is_recorded_not_raised() -> None:
    fake = FakeProvider(responder=responder({"tree": "no structure here"}, lambda s, r: True))
    res = await g2l_detect(Model(fake, max_reasks=2), "t", REFS)
    assert res.status is G2LStatus.TREE_FAILED and res.passed is None
    assert res.tree is None and res.paths == () and res.tree_attempts == 3
    assert res.tree_error and "no structure here" in res.tree_raw
    assert len(fake.calls) == 3  # no path was checked
    assert g2l_report(res)["tree_raw"] == res.tree_raw


async def test_unreadable_check_makes_the_text_undetermined_unless_another_path_fails() -> None:
    def sup(stmt: str, refs: str) -> bool | str:
        return "no json at all" if "translucent" in stmt else True

    res = await g2l_detect(Model(FakeProvider(responder=responder(TREE, sup))), "t", REFS)
    assert res.status is G2LStatus.UNDETERMINED and res.passed is None
    bad = res.paths[2]
    assert bad.supported is None and bad.error and "no json at all" in bad.raw

    def sup2(stmt: str, refs: str) -> bool | str:
        return "no json at all" if "translucent" in stmt else "2015" not in stmt

    res2 = await g2l_detect(Model(FakeProvider(responder=responder(TREE, sup2))), "t", REFS)
    assert res2.status is G2LStatus.FAILED


def test_aggregate_is_and() -> None:
    def pc(s: bool | None) -> PathCheck:
        return PathCheck(0, ("a",), s, "", 0, 1)

    assert aggregate([pc(True), pc(True)]) is G2LStatus.PASSED
    assert aggregate([pc(True), pc(False)]) is G2LStatus.FAILED
    assert aggregate([pc(None), pc(False)]) is G2LStatus.FAILED
    assert aggregate([pc(True), pc(None)]) is G2LStatus.UNDETERMINED
    assert aggregate([]) is G2LStatus.UNDETERMINED


def test_long_references_are_chunked_within_the_budget() -> None:
    long_doc = " ".join(f"Sentence number {i} says something about topic {i}." for i in range(60))
    refs = [Reference("A", "Short note."), Reference("B", long_doc), Reference("C", "Tail.")]
    chunks = chunk_references(refs, budget=120)
    assert len(chunks) > 3
    for chunk in chunks:
        assert sum(estimate_tokens(p.text) for p in chunk) <= 120 + len(chunk)
    pieces = [p for c in chunks for p in c]
    # Nothing is lost or reordered, and split parts are labelled.
    assert " ".join(p.text for p in pieces if p.label.startswith("B")) == long_doc
    assert [p.label for p in pieces][:2] == ["A", "B (part 1)"]
    assert pieces[-1].label == "C"
    # Everything fits: one chunk, documents whole.
    assert [[p.label for p in c] for c in chunk_references(refs[:1] + refs[2:], 120)] == [
        ["A", "C"]
    ]


async def test_a_path_is_supported_if_any_chunk_supports_it() -> None:
    filler = " ".join(f"Filler sentence {i} about rivers." for i in range(40))
    refs = [filler, "The frog was described in 2015 in Costa Rica. " + filler]
    tree = {"tree": {"text": "Frog", "children": ["described in 2015", "lives on the Moon"]}}

    def sup(stmt: str, refs_block: str) -> bool:
        return "2015" in stmt and "described in 2015" in refs_block

    fake = FakeProvider(responder=responder(tree, sup))
    res = await g2l_detect(Model(fake), "t", refs, G2LConfig(reference_tokens=150))
    assert res.chunks >= 3
    assert res.status is G2LStatus.FAILED
    found, moon = res.paths
    assert found.supported is True and found.chunk is not None and found.chunk > 0
    assert found.chunks_checked == found.chunk + 1  # stopped at the first support
    assert moon.supported is False and moon.chunks_checked == res.chunks  # every chunk said no


async def test_claim_adapter_uses_dag_roots_and_maps_to_verdicts() -> None:
    dag = Dag.from_records(
        [
            {"id": "r1", "text": REFS[0], "sources": []},
            {"id": "r2", "text": REFS[1], "sources": []},
            {"id": "t", "text": "Summary.", "sources": ["r1", "r2"]},
        ]
    )
    tree = {"tree": {"text": "Frog", "children": ["translucent belly"]}}
    fake = FakeProvider(responder=responder(tree, lambda s, r: "translucent" in r))
    out = await g2l_claim(Model(fake), Claim("c1", "The frog's belly is translucent."), dag)
    assert out.verdict is Verdict.FULLY_SUPPORTED and out.score == 1.0
    tree_call = next(c for c in fake.calls if "Text to organise:" in c.prompt)
    assert "The frog's belly is translucent." in tree_call.prompt
    check = next(c for c in fake.calls if "<<< statement" in c.prompt)
    assert "<<< node r1\n" in check.prompt and "<<< node r2\n" in check.prompt


def _server_responder(tree: object, supported: Callable[[str, str], bool | str]) -> Any:
    inner = responder(tree, supported)

    def reply(request: dict[str, Any]) -> str:
        return inner([Message(m["role"], m["content"]) for m in request["messages"]])

    return reply


def test_detect_cli_text_and_refs_writes_the_report(tmp_path: Path) -> None:
    text = tmp_path / "summary.txt"
    text.write_text("H. dianae is a glass frog from Costa Rica, described in 2015.")
    r1, r2 = tmp_path / "a.txt", tmp_path / "b.txt"
    r1.write_text(REFS[0])
    r2.write_text(REFS[1])
    out = tmp_path / "g2l.json"
    sup = _server_responder(TREE, lambda stmt, refs: "2015" not in stmt)
    with FakeOpenAIServer(responder=sup) as srv:
        res = CliRunner().invoke(
            cli,
            [
                *("detect", "--method", "g2l", "--text", str(text), "--refs", str(r1), str(r2)),
                *("--out", str(out), "--model", "openai/m"),
            ],
            env={"VERITRAIL_BASE_URL": srv.base_url, "OPENAI_API_KEY": "k", "VERITRAIL_CACHE": "0"},
        )
    assert res.exit_code == 0, res.output
    assert "failed" in res.output and "It was described in 2015" in res.output
    report = json.loads(out.read_text())
    assert report["format"] == "veritrail-g2l-report" and report["status"] == "failed"
    assert report["references"] == [str(r1), str(r2)]
    assert report["failing_paths"] == [1] and len(report["paths"]) == 3
    assert report["cost"]["g2l_check"]["lm_calls"] == 3


def test_detect_cli_over_a_dag_checks_the_terminal_against_the_roots(tmp_path: Path) -> None:
    dag = tmp_path / "d.json"
    dag.write_text(
        json.dumps(
            {
                "nodes": [
                    {"id": "r1", "text": REFS[0], "sources": []},
                    {"id": "r2", "text": REFS[1], "sources": []},
                    {"id": "mid", "text": "A frog summary.", "sources": ["r1", "r2"]},
                    {"id": "t", "text": "The frog is translucent.", "sources": ["mid"]},
                ]
            }
        )
    )
    seen: list[str] = []

    def sup(stmt: str, refs: str) -> bool:
        seen.append(refs)
        return True

    out = tmp_path / "g2l.json"
    with FakeOpenAIServer(responder=_server_responder(TREE, sup)) as srv:
        res = CliRunner().invoke(
            cli,
            ["detect", "--dag", str(dag), "--out", str(out), "--model", "openai/m"],
            env={"VERITRAIL_BASE_URL": srv.base_url, "OPENAI_API_KEY": "k", "VERITRAIL_CACHE": "0"},
        )
        assert res.exit_code == 0, res.output
        report = json.loads(out.read_text())
        assert report["status"] == "passed" and report["text"] == "The frog is translucent."
        assert report["references"] == [f"{dag}#r1", f"{dag}#r2"]
        # roots only: the intermediate node is not a reference
        assert all("<<< node r1" in r and "A frog summary" not in r for r in seen)
        res = CliRunner().invoke(cli, ["detect", "--dag", str(dag), "--text", str(dag)])
        assert res.exit_code == 2 and "not both" in res.output


def test_detect_cli_attaches_its_result_to_a_veritrail_report(tmp_path: Path) -> None:
    dag = tmp_path / "d.json"
    dag.write_text(
        json.dumps(
            {
                "nodes": [
                    {"id": "r1", "text": REFS[0], "sources": []},
                    {"id": "t", "text": "The frog's belly is translucent.", "sources": ["r1"]},
                ]
            }
        )
    )
    claims = tmp_path / "claims.json"
    claims.write_text(json.dumps(["The frog's belly is translucent."]))
    oracle = tmp_path / "oracle.json"
    oracle.write_text(
        json.dumps(
            {
                "claims": [
                    {
                        "claim": "The frog's belly is translucent.",
                        "evidence": {"r1": [1]},
                        "verdicts": ["Fully Supported"],
                    }
                ]
            }
        )
    )
    report = tmp_path / "report.json"
    runner = CliRunner()
    res = runner.invoke(
        cli,
        [
            "verify",
            str(dag),
            "--claims",
            str(claims),
            "--oracle",
            str(oracle),
            "--out",
            str(report),
        ],
    )
    assert res.exit_code == 0, res.output
    with FakeOpenAIServer(responder=_server_responder(TREE, lambda s, r: True)) as srv:
        res = runner.invoke(
            cli,
            [
                *("detect", "--dag", str(dag), "--out", str(tmp_path / "g2l.json")),
                *("--attach", str(report), "--model", "openai/m"),
            ],
            env={"VERITRAIL_BASE_URL": srv.base_url, "OPENAI_API_KEY": "k", "VERITRAIL_CACHE": "0"},
        )
    assert res.exit_code == 0, res.output
    doc = json.loads(report.read_text())
    assert doc["format"] == "veritrail-report" and doc["claims"][0]["verdict"] == "Fully Supported"
    assert doc["g2l"]["status"] == "passed" and len(doc["g2l"]["paths"]) == 3
    from veritrail.html import EXTRA_SECTION_KEYS, render_html

    assert "g2l" in EXTRA_SECTION_KEYS
    assert "It was described in 2015" in render_html(doc)


WICE_DEV = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "data"
    / "wice"
    / "data"
    / "entailment_retrieval"
    / "claim"
    / "dev.jsonl"
)


@pytest.mark.embedded
@pytest.mark.slow
async def test_embedded_model_on_a_wice_claim() -> None:
    """Structure only, on a real WiCE claim with a slice of its cited article as the reference."""
    pytest.importorskip("xllamacpp")
    registry = pytest.importorskip("veritrail.lm.registry")
    if not WICE_DEV.is_file():
        pytest.skip("shared/data/wice is not beside the checkout")
    row = json.loads(WICE_DEV.read_text(encoding="utf-8").splitlines()[0])
    reference = " ".join(row["evidence"][5:18])  # the gold supporting sentences and around them
    model = registry.get_model("local/smollm2-135m", cache=False)
    try:
        out = await g2l_claim(
            model,
            Claim("w0", row["claim"]),
            [reference],
            G2LConfig(tree_max_tokens=400, check_max_tokens=150, max_parallel=1),
        )
    finally:
        await model.aclose()
    res = out.result
    report = json.loads(json.dumps(g2l_report(res, model=model.name)))
    assert report["status"] == res.status.value and report["reference_chunks"] == 1
    if res.tree is None:
        assert res.status is G2LStatus.TREE_FAILED and res.tree_error and res.tree_raw
        assert res.tree_attempts == 2 and out.verdict is None
        return
    assert [p.nodes for p in res.paths] == tree_paths(res.tree)
    assert len(res.paths) == len(res.tree.leaves())
    assert all(p.supported in (True, False, None) and p.chunks_checked <= 1 for p in res.paths)
    assert res.status is aggregate(res.paths)
    assert out.verdict in (Verdict.FULLY_SUPPORTED, Verdict.NOT_FULLY_SUPPORTED, None)
    assert model.usage.per_step()["g2l_check"].lm_calls >= len(res.paths)
