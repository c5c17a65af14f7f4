"""GraphRAG adapter on the two real indexes in shared/data/graphrag (needs pyarrow)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

pq = pytest.importorskip("pyarrow.parquet")

from veritrail.adapters.graphrag import (  # noqa: E402
    CaptureCallbacks,
    GlobalSearchCapture,
    GraphRagIndexError,
    Layout,
    build_index_dag,
    build_query_dag,
    default_terminal_report,
    entity_node,
    load_index,
    relationship_node,
    report_ids_from_context,
    report_node,
    text_unit_node,
)
from veritrail.dag import Dag, load_dag  # noqa: E402
from veritrail.method.config import VerifyConfig  # noqa: E402
from veritrail.method.loop import verify_claims  # noqa: E402
from veritrail.method.oracle import Oracle  # noqa: E402
from veritrail.records import Claim, Termination, Verdict  # noqa: E402

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "graphrag"
INDEXES = ["tests_verbs_data", "operation_dulce"]
TABLES = ["text_units", "entities", "relationships", "communities", "community_reports"]

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="shared/data/graphrag not present")


def _rows(folder: Path, name: str) -> list[dict]:
    return pq.read_table(folder / f"{name}.parquet").to_pylist()


def _in_degree_by_stage(dag: Dag) -> Counter[int]:
    return Counter(
        {st: sum(len(n.sources) for n in dag if n.stage == st) for st in {n.stage for n in dag}}
    )


@pytest.mark.parametrize("name", INDEXES)
def test_index_dag_counts_match_the_tables(name: str) -> None:
    folder = DATA / name
    tu, ents, rels, comms, reps = (_rows(folder, t) for t in TABLES)
    index = load_index(folder)
    assert index.layout is Layout.CURRENT and not index.has_raw_extractions
    dag = build_index_dag(index)

    by_stage = Counter(n.stage for n in dag)
    assert by_stage == {1: len(tu), 2: len(ents) + len(rels), 3: len(reps)}
    assert dag.meta["stage_names"]["3"] == "community reports"

    # Edges into stage 2 = the text_unit_ids lists; into stage 3 = community membership plus
    # child reports, plus the plumbing edges into the terminal that the meta counts.
    edges = _in_degree_by_stage(dag)
    assert edges[2] == sum(len(set(r["text_unit_ids"])) for r in ents + rels)
    reported = {r["community"] for r in reps}
    comm = {c["community"]: c for c in comms}
    expected_report_edges = sum(
        len(comm[c]["entity_ids"])
        + len(comm[c]["relationship_ids"])
        + sum(1 for ch in comm[c]["children"] if ch in reported)
        for c in reported
    )
    plumbing = dag.meta["graphrag"]["plumbing_edges"]
    assert edges[3] == expected_report_edges + plumbing
    assert plumbing > 0  # both indexes have relationships outside every community

    top = default_terminal_report(index)
    assert dag.terminal == report_node(top.community) and top.level == 0


@pytest.mark.parametrize("name", INDEXES)
def test_every_description_points_at_existing_text_units(name: str) -> None:
    index = load_index(DATA / name)
    dag = build_index_dag(index)
    tu_nodes = {text_unit_node(t) for t in index.text_units}
    assert tu_nodes == set(dag.roots)
    for e in index.entities:
        n = dag.node(entity_node(e))
        assert n.sources and set(n.sources) <= tu_nodes
        assert len(n.sources) == len(set(e.text_unit_ids))
    for r in index.relationships:
        n = dag.node(relationship_node(r))
        assert n.sources and set(n.sources) <= tu_nodes
    # Original GraphRAG ids are kept in the meta for every node.
    assert dag.meta["original_ids"][text_unit_node(index.text_units[0])] == index.text_units[0].id


@pytest.mark.parametrize("name", INDEXES)
def test_parent_reports_draw_on_child_reports_with_ordered_stages(name: str) -> None:
    index = load_index(DATA / name)
    dag = build_index_dag(index)
    with_children = [c for c in index.communities if c.children]
    assert with_children
    for c in with_children:
        parent = dag.node(report_node(c.community))
        for ch in c.children:
            assert report_node(ch) in parent.sources
            assert dag.stage(report_node(ch)) <= parent.stage


def test_terminal_report_keeps_only_its_ancestors() -> None:
    index = load_index(DATA / "operation_dulce")
    top = next(c for c in index.communities if c.children)
    dag = build_index_dag(index, terminal_report=top.community)
    assert dag.terminal == report_node(top.community)
    assert dag.meta["graphrag"]["plumbing_edges"] == 0
    # Every entity of the community and of its sub-communities is in; nothing else at stage 2.
    ent_ids = set(top.entity_ids) | {
        e for c in index.communities if c.parent == top.community for e in c.entity_ids
    }
    ent_nodes = {entity_node(e) for e in index.entities if e.id in ent_ids}
    assert ent_nodes <= {n.id for n in dag}
    assert dag.meta["graphrag"]["nodes_dropped"] > 0
    # The report's own id and its "report-N" node id name the same terminal.
    rep = next(r for r in index.reports if r.community == top.community)
    assert build_index_dag(index, terminal_report=rep.id).terminal == dag.terminal
    with pytest.raises(GraphRagIndexError, match="unknown community report"):
        build_index_dag(index, terminal_report="nope")


def _v1_copy(src: Path, dst: Path, *, drop_hierarchy: bool) -> None:
    dst.mkdir()
    for t in TABLES:
        table = pq.read_table(src / f"{t}.parquet")
        if drop_hierarchy and t in ("communities", "community_reports"):
            table = table.drop_columns(
                [c for c in ("parent", "children") if c in table.column_names]
            )
        pq.write_table(table, dst / f"create_final_{t}.parquet")


@pytest.mark.parametrize("drop_hierarchy", [False, True])
def test_v1_file_names_give_the_same_dag(tmp_path: Path, drop_hierarchy: bool) -> None:
    src = DATA / "tests_verbs_data"
    _v1_copy(src, tmp_path / "v1", drop_hierarchy=drop_hierarchy)
    v1 = load_index(tmp_path / "v1")
    assert v1.layout is Layout.V1 and v1.inferred_hierarchy is drop_hierarchy
    a = build_index_dag(load_index(src))
    b = build_index_dag(v1)
    assert {n.id: (n.sources, n.stage) for n in a} == {n.id: (n.sources, n.stage) for n in b}


def test_raw_extraction_snapshots_add_a_stage(tmp_path: Path) -> None:
    # The shared indexes were built without `snapshots.raw_graph`; build GraphRAG's raw snapshot
    # layout from their tables (one description per (entity, text unit) pair, in list order).
    src = DATA / "operation_dulce"
    dst = tmp_path / "idx"
    shutil.copytree(src, dst)
    import pyarrow as pa

    ents = _rows(src, "entities")
    rels = _rows(src, "relationships")
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "title": e["title"],
                    "type": e["type"],
                    "description": [e["description"]] * len(e["text_unit_ids"]),
                    "text_unit_ids": e["text_unit_ids"],
                }
                for e in ents
            ]
        ),
        dst / "raw_entities.parquet",
    )
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "source": r["source"],
                    "target": r["target"],
                    "description": [r["description"]] * len(r["text_unit_ids"]),
                    "text_unit_ids": r["text_unit_ids"],
                }
                for r in rels
            ]
        ),
        dst / "raw_relationships.parquet",
    )
    index = load_index(dst)
    assert index.has_raw_extractions
    dag = build_index_dag(index)
    by_stage = Counter(n.stage for n in dag)
    n_raw = sum(len(e["text_unit_ids"]) for e in ents + rels)
    assert by_stage == {
        1: 5,
        2: n_raw,
        3: len(ents) + len(rels),
        4: len(_rows(src, "community_reports")),
    }
    assert dag.meta["stage_names"]["2"] == "raw per-chunk extractions"
    e0 = index.entities[0]
    srcs = dag.node(entity_node(e0)).sources
    assert len(srcs) == len(e0.text_unit_ids) and all(s.startswith("raw-entity-") for s in srcs)
    assert all(dag.is_root(t) for s in srcs for t in dag.sources(s))


def _capture(index_name: str) -> tuple[GlobalSearchCapture, list[int]]:
    index = load_index(DATA / index_name)
    level1 = [r.community for r in index.reports if r.level == 1]
    cap = GlobalSearchCapture(
        question="Who leads the mission?",
        map_responses=[
            {
                "report_ids": [str(c) for c in level1[:2]],
                "points": [{"answer": "Alex Mercer leads the squad.", "score": 80}],
            },
            {"report_ids": level1[2:], "points": [{"answer": "Nothing relevant.", "score": 0}]},
        ],
        answer="Alex Mercer leads the Paranormal Military Squad.",
    )
    return cap, level1


def test_captured_global_search_dag() -> None:
    cap, level1 = _capture("operation_dulce")
    dag = build_query_dag(load_index(DATA / "operation_dulce"), cap)
    assert dag.terminal == "answer" and dag.stage("answer") == 5
    # The zero-score map answer is dropped, as GraphRAG's reduce drops it.
    assert dag.sources("answer") == ("map-0",)
    assert set(dag.sources("map-0")) == {report_node(c) for c in level1[:2]}
    assert dag.meta["graphrag"]["question"] == cap.question
    assert dag.meta["stage_names"]["4"] == "map answers"


def test_capture_callbacks_collect_graphrag_style_results() -> None:
    class Result:  # the attributes GraphRAG's SearchResult carries into the callbacks
        def __init__(self, ctx: str, response: object) -> None:
            self.context_text = ctx
            self.response = response

    cb = CaptureCallbacks()
    ctx = "-----Reports-----\nid|title|occurrence weight|content|rank\n7|Squad|1.0|The squad ...\nmore text|8.5\n8|Dulce|0.5|Base|7.0\n"
    assert report_ids_from_context(ctx) == ["7", "8"]
    cb.on_map_response_start([ctx])
    cb.on_map_response_end([Result(ctx, [{"answer": "Point.", "score": 50}])])
    cb.on_reduce_response_end("Final.")
    cap = cb.capture("Q?")
    dag = build_query_dag(load_index(DATA / "operation_dulce"), cap)
    assert (
        set(dag.sources("map-0")) == {"report-7", "report-8"}
        and dag.node("answer").text == "Final."
    )


async def test_oracle_walks_from_answer_through_a_report_back_to_a_text_unit(
    tmp_path: Path,
) -> None:
    index = load_index(DATA / "operation_dulce")
    cap, level1 = _capture("operation_dulce")
    cap_path = tmp_path / "capture.json"
    cap_path.write_text(cap.model_dump_json(), encoding="utf-8")
    dag = build_query_dag(index, GlobalSearchCapture.from_file(cap_path))
    com = next(c for c in index.communities if c.community == level1[0])
    ent = next(e for e in index.entities if e.id == com.entity_ids[0])
    tu = next(t for t in index.text_units if t.id == ent.text_unit_ids[0])
    chain = ["map-0", report_node(com.community), entity_node(ent), text_unit_node(tu)]
    oracle = Oracle.from_dict(
        {
            "claims": [
                {
                    "claim": "Alex Mercer leads the Paranormal Military Squad.",
                    "evidence": {n: [0] for n in chain},
                    "verdicts": ["Fully Supported"],
                }
            ]
        }
    )
    [res] = await verify_claims(
        dag,
        [Claim("c1", "Alex Mercer leads the Paranormal Military Squad.")],
        oracle.steps(),
        VerifyConfig(q=1),
    )
    assert res.verdict is Verdict.FULLY_SUPPORTED
    assert res.termination is Termination.ROOTS_ONLY
    checked = [n for it in res.iterations for n in it.nodes_with_evidence]
    assert checked[: len(chain)] == chain
    assert res.provenance == (tuple(chain),)


async def test_oracle_on_the_big_index_from_a_report(tmp_path: Path) -> None:
    index = load_index(DATA / "tests_verbs_data")
    parent = next(c for c in index.communities if c.children and c.level == 0)
    dag = build_index_dag(index, terminal_report=parent.community)
    # Evidence: child report → one of its entities → one of that entity's text units.
    child = next(c for c in index.communities if c.community == parent.children[0])
    ent = next(e for e in index.entities if e.id == child.entity_ids[0])
    tu = next(t for t in index.text_units if t.id == ent.text_unit_ids[0])
    path = tmp_path / "dag.json"
    from veritrail.dag import save_dag

    save_dag(dag, path)
    dag = load_dag(path)
    chain = [report_node(child.community), entity_node(ent), text_unit_node(tu)]
    oracle = Oracle.from_dict(
        {
            "claims": [
                {"claim": "x", "evidence": {n: [0] for n in chain}, "verdicts": ["Fully Supported"]}
            ]
        }
    )
    [res] = await verify_claims(dag, [Claim("c1", "x")], oracle.steps(), VerifyConfig(q=3))
    assert res.verdict is Verdict.FULLY_SUPPORTED
    assert any(text_unit_node(tu) in p for p in res.provenance)
    assert res.cost.nodes_read < len(dag)


def test_cli_from_graphrag_writes_a_valid_dag(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from veritrail.cli.main import cli

    out = tmp_path / "dag.json"
    r = CliRunner().invoke(cli, ["from-graphrag", str(DATA / "operation_dulce"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    dag = load_dag(out)
    assert len(dag) == 5 + 39 + 107 + 10
    cap, _ = _capture("operation_dulce")
    cp = tmp_path / "cap.json"
    cp.write_text(json.dumps(cap.model_dump()), encoding="utf-8")
    r = CliRunner().invoke(
        cli,
        ["from-graphrag", str(DATA / "operation_dulce"), "--capture", str(cp), "--out", str(out)],
    )
    assert r.exit_code == 0, r.output
    assert load_dag(out).terminal == "answer"
    r = CliRunner().invoke(cli, ["from-graphrag", str(tmp_path), "--out", str(out)])
    assert r.exit_code != 0 and "index output folder" in r.output


async def test_our_global_search_records_map_and_reduce() -> None:
    import re as _re

    from veritrail.lm.fake import FakeProvider
    from veritrail.lm.model import Model
    from veritrail.pipelines.graphrag_search import (
        GlobalSearchConfig,
        global_search,
        pack_batches,
        select_reports,
    )

    index = load_index(DATA / "tests_verbs_data")
    cfg = GlobalSearchConfig(community_level=1, batch_tokens=6000)
    selected = select_reports(index, 1)
    # Level cut: every level-1 report, plus level-0 reports without reported children.
    reported = {r.community for r in index.reports}
    kids = {c.community: c.children for c in index.communities}
    assert {r.community for r in selected} == {
        r.community for r in index.reports if r.level == 1
    } | {
        r.community
        for r in index.reports
        if r.level == 0 and not any(k in reported for k in kids[r.community])
    }
    batches = pack_batches(sorted(selected, key=lambda r: (-r.rank, r.community)), cfg.batch_tokens)
    assert len(batches) > 2

    def responder(messages):  # type: ignore[no-untyped-def]
        user = "\n".join(m.content for m in messages)  # re-asks repeat the original prompt
        if "Analyst notes" in user:
            return "Scrooge is visited by three spirits."
        comms = [int(x) for x in _re.findall(r"<<< report (\d+)", user)]
        # Only the batch holding the top-ranked report finds something relevant.
        if batches[0][0].community in comms:
            return json.dumps({"points": [{"description": "Scrooge meets spirits.", "score": 90}]})
        if batches[1][0].community in comms:
            return "not json at all"  # kept as one low-score point
        return json.dumps({"points": []})

    fake = FakeProvider(responder=responder)
    res = await global_search(index, "What happens to Scrooge?", Model(fake, max_reasks=1), cfg)
    dag = res.dag
    # One call per batch, one re-ask for the unreadable reply, one reduce.
    assert len(fake.calls) == len(batches) + 2
    assert dag.terminal == "answer" and dag.node("answer").text == res.answer
    assert dag.sources("answer") == ("map-0", "map-1")
    assert set(dag.sources("map-0")) == {report_node(r.community) for r in batches[0]}
    assert dag.node("map-1").text == "not json at all"
    stages = Counter(n.stage for n in dag)
    assert stages[4] == 2 and stages[5] == 1 and stages[1] >= 1
    assert dag.meta["graphrag"]["batches"] == len(batches)
    assert dag.meta["graphrag"]["map_parse_errors"] == 1
    # The capture of our run rebuilds the same DAG.
    again = build_query_dag(index, res.capture)
    assert {n.id: n.sources for n in again} == {n.id: n.sources for n in dag}
    # Only what the answer depends on is kept: the two batches' reports and their sub-reports.
    want = {r.community for b in batches[:2] for r in b}
    stack = list(want)
    while stack:
        for ch in kids.get(stack.pop(), ()):
            if ch in reported and ch not in want:
                want.add(ch)
                stack.append(ch)
    assert {n.id for n in dag if n.stage == 3} == {report_node(c) for c in want}


async def test_global_search_with_nothing_relevant_fails_clearly() -> None:
    from veritrail.lm.fake import FakeProvider
    from veritrail.lm.model import Model
    from veritrail.pipelines.graphrag_search import GlobalSearchError, global_search

    fake = FakeProvider(responder=lambda m: '{"points": [{"description": "x", "score": 0}]}')
    with pytest.raises(GlobalSearchError, match="none of the"):
        await global_search(load_index(DATA / "operation_dulce"), "Q?", Model(fake))


def test_cli_from_graphrag_runs_our_search_against_a_loopback_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from veritrail.cli.main import cli
    from veritrail.testing.fake_openai_server import FakeOpenAIServer

    def responder(req: dict) -> str:
        user = req["messages"][-1]["content"]
        if "Analyst notes" in user:
            return "The squad investigates Dulce base."
        return json.dumps({"points": [{"description": "The squad goes to Dulce.", "score": 70}]})

    out, cap = tmp_path / "dag.json", tmp_path / "cap.json"
    with FakeOpenAIServer(responder=responder) as server:
        monkeypatch.setenv("VERITRAIL_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("VERITRAIL_CACHE", "0")
        args = ["from-graphrag", str(DATA / "operation_dulce"), "--out", str(out)]
        r = CliRunner().invoke(
            cli,
            [
                *args,
                "--question",
                "What is the mission?",
                "--model",
                "openai/m",
                "--batch-tokens",
                "3000",
                "--save-capture",
                str(cap),
            ],
        )
        assert r.exit_code == 0, r.output
    dag = load_dag(out)
    assert dag.node("answer").text == "The squad investigates Dulce base."
    n_maps = sum(1 for n in dag if n.stage == 4)
    assert n_maps == len(dag.sources("answer")) >= 2
    assert dag.meta["graphrag"]["model"] == "openai/m"
    again = build_query_dag(
        load_index(DATA / "operation_dulce"), GlobalSearchCapture.from_file(cap)
    )
    assert len(again) == len(dag)
    r = CliRunner().invoke(cli, [*args, "--question", "Q", "--capture", str(cap)])
    assert r.exit_code == 2 and "only one of" in r.output
