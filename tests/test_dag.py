"""The Dag API, the file formats (JSON, JSON Lines, sniffing, meta) and the shipped JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from veritrail.dag import (
    Dag,
    DagProblem,
    DagValidationError,
    Node,
    ProblemCode,
    dag_schema,
    iter_node_records,
    load_dag,
    save_dag,
)

# Figure-1-like hierarchical summarization: four chunks, two merges, one final summary.
RECORDS: list[dict[str, Any]] = [
    {"id": "c1", "text": "Chunk one.", "sources": []},
    {"id": "c2", "text": "Chunk two.", "sources": []},
    {"id": "c3", "text": "Chunk three."},
    {"id": "s1", "text": "Summary of one and two.", "sources": ["c1", "c2"]},
    {"id": "s2", "text": "Summary of three.", "sources": ["c3"]},
    {"id": "x", "text": "Extra step.", "sources": ["s2"]},
    {"id": "final", "text": "Final.", "sources": ["s1", "x", "c3"]},
]


def test_api() -> None:
    g = Dag.from_records(RECORDS, meta={"pipeline": "hier"})
    assert len(g) == 7
    assert "s1" in g
    assert "nope" not in g
    assert [n.id for n in g] == ["c1", "c2", "c3", "s1", "s2", "x", "final"]
    assert g.node("s1") == Node("s1", "Summary of one and two.", ("c1", "c2"), 2)
    assert g.sources("final") == ("s1", "x", "c3")
    assert g.children("c3") == ["s2", "final"]
    assert g.children("final") == []
    assert g.roots == frozenset({"c1", "c2", "c3"})
    assert g.is_root("c3")
    assert not g.is_root("s2")
    assert g.terminal == "final"
    assert g.meta == {"pipeline": "hier"}
    assert g.edges == 7
    assert not g.stages_given
    with pytest.raises(KeyError):
        g.node("nope")


def test_default_stage_is_longest_path_from_a_root() -> None:
    g = Dag.from_records(RECORDS)
    assert {n.id: n.stage for n in g} == {
        "c1": 1,
        "c2": 1,
        "c3": 1,
        "s1": 2,
        "s2": 2,
        "x": 3,
        "final": 4,
    }


def test_given_stages_are_kept_and_may_repeat_along_an_edge() -> None:
    recs = [dict(r, stage=st) for r, st in zip(RECORDS, [1, 1, 1, 2, 2, 2, 5], strict=True)]
    g = Dag.from_records(recs)
    assert g.stages_given
    assert g.stage("x") == 2
    assert g.stage("final") == 5


def test_children_built_lazily_when_constructed_directly() -> None:
    nodes = {"a": Node("a", "A.", (), 1), "b": Node("b", "B.", ("a",), 2)}
    g = Dag(nodes, "b")
    assert g.children("a") == ["b"]
    assert g.roots == frozenset({"a"})


def test_single_node_dag_is_valid() -> None:
    g = Dag.from_records([{"id": "only", "text": "Just this."}])
    assert g.terminal == "only"
    assert g.is_root("only")
    assert g.stage("only") == 1


def test_problem_codes_and_str() -> None:
    with pytest.raises(DagValidationError) as ei:
        Dag.from_records(
            [
                {"id": "r", "text": "R."},
                *({"id": f"t{i}", "text": "T.", "sources": ["r"]} for i in range(25)),
            ]
        )
    (p,) = ei.value.problems
    assert p.code == ProblemCode.SEVERAL_TERMINALS == "several_terminals"
    assert len(p.ids) == 25
    assert str(p).endswith("t18, t19, … (+5)")
    assert p.to_dict()["ids"] == [f"t{i}" for i in range(25)]
    assert "several_terminals" in str(ei.value)
    assert (
        str(DagProblem("empty_dag", "the DAG has no nodes", ()))
        == "[empty_dag] the DAG has no nodes"
    )


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_save_load_round_trip(tmp_path: Path, suffix: str) -> None:
    g = Dag.from_records(RECORDS, meta={"run": 7, "name": "ünïcode"})
    p = tmp_path / f"dag{suffix}"
    save_dag(g, p)
    h = load_dag(p)
    assert h.to_records() == g.to_records()
    assert h.meta == g.meta
    assert h.terminal == g.terminal
    assert h.stages_given  # saved files carry their stages


def test_saved_json_is_one_node_per_line(tmp_path: Path) -> None:
    p = tmp_path / "dag.json"
    save_dag(Dag.from_records(RECORDS), p)
    lines = p.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(RECORDS) + 2
    assert json.loads(p.read_text(encoding="utf-8"))["nodes"][0]["id"] == "c1"


def test_jsonl_comments_blank_lines_and_meta(tmp_path: Path) -> None:
    p = tmp_path / "dag.jsonl"
    body = "".join(json.dumps(r) + "\n" for r in RECORDS)
    p.write_text('\n// exported by test\n{"meta": {"q": "why?"}}\n\n' + body, encoding="utf-8")
    g = load_dag(p)
    assert g.meta == {"q": "why?"}
    assert len(g) == 7


def test_jsonl_content_in_a_json_named_file_is_sniffed(tmp_path: Path) -> None:
    p = tmp_path / "dag.json"
    p.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    assert load_dag(p).terminal == "final"


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"nodes": RECORDS}),
        json.dumps({"nodes": RECORDS}) + "\n",
        json.dumps({"meta": {"a": 1}, "nodes": RECORDS}, indent=2),
        json.dumps(RECORDS),
        "\ufeff" + json.dumps({"nodes": RECORDS}, indent=1),
    ],
)
def test_json_documents_in_any_layout(tmp_path: Path, text: str) -> None:
    p = tmp_path / "dag.json"
    p.write_text(text, encoding="utf-8")
    assert load_dag(p).terminal == "final"


def test_jsonl_stream_is_lazy_and_reports_bad_lines_at_the_end(tmp_path: Path) -> None:
    p = tmp_path / "dag.jsonl"
    p.write_text(
        '{"id": "a", "text": "A."}\nnot json\n{"id": "b", "text": "B.", "sources": ["a"]}\n',
        encoding="utf-8",
    )
    records, meta = iter_node_records(p)
    assert meta == {}
    got = []
    with pytest.raises(DagValidationError) as ei:
        got.extend(records)
    assert [r["id"] for r in got] == ["a", "b"]
    assert ei.value.problems[0].code == ProblemCode.BAD_JSON
    assert ei.value.problems[0].ids == ("line 2",)


def test_extra_fields_are_ignored() -> None:
    g = Dag.from_records([{"id": "a", "text": "A.", "kind": "chunk", "sources": [], "stage": None}])
    assert g.node("a") == Node("a", "A.", (), 1)


def test_schema_ships_and_accepts_valid_files(tmp_path: Path) -> None:
    schema = dag_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    assert v.is_valid({"nodes": RECORDS, "meta": {"x": 1}})
    assert v.is_valid(RECORDS)
    p = tmp_path / "dag.json"
    save_dag(Dag.from_records(RECORDS), p)
    assert v.is_valid(json.loads(p.read_text(encoding="utf-8")))
    node = {"$ref": "#/$defs/node", "$defs": schema["$defs"]}
    assert jsonschema.Draft202012Validator(node).is_valid(RECORDS[0])


@pytest.mark.parametrize(
    "bad",
    [
        {"nodes": []},
        {"nodes": [{"id": "a"}]},
        {"nodes": [{"id": "", "text": "A."}]},
        {"nodes": [{"id": "a", "text": "  "}]},
        {"nodes": [{"id": "a", "text": "A.", "stage": 0}]},
        {"nodes": [{"id": "a", "text": "A.", "sources": ["b", "b"]}]},
        {"nodes": [{"id": "a", "text": "A.", "sources": "b"}]},
        {"meta": {}},
    ],
)
def test_schema_rejects_what_the_loader_rejects_per_node(bad: dict[str, Any]) -> None:
    v = jsonschema.Draft202012Validator(dag_schema())
    assert not v.is_valid(bad)
    with pytest.raises(DagValidationError):
        Dag.from_records(bad.get("nodes", []))


# -- input rules (veritrail.textio): BOM, encodings, nesting ------------------------------------


def _jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


@pytest.mark.parametrize("name", ["dag.json", "dag.jsonl", "sniffed.json"])
def test_a_utf8_bom_is_accepted_in_both_formats(tmp_path: Path, name: str) -> None:
    p = tmp_path / name
    body = json.dumps({"nodes": RECORDS}) if name == "dag.json" else _jsonl(RECORDS)
    p.write_bytes(b"\xef\xbb\xbf" + body.encode("utf-8"))
    assert load_dag(p).terminal == "final"


def test_a_bom_before_the_meta_line_of_json_lines(tmp_path: Path) -> None:
    p = tmp_path / "dag.jsonl"
    p.write_bytes(
        b"\xef\xbb\xbf" + (json.dumps({"meta": {"q": 1}}) + "\n" + _jsonl(RECORDS)).encode()
    )
    records, meta = iter_node_records(p)
    assert meta == {"q": 1}
    assert len(list(records)) == len(RECORDS)


@pytest.mark.parametrize("name", ["dag.json", "dag.jsonl"])
@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_utf16_and_utf32_are_refused_with_a_clear_message(
    tmp_path: Path, name: str, encoding: str
) -> None:
    p = tmp_path / name
    body = json.dumps({"nodes": RECORDS}) if name == "dag.json" else _jsonl(RECORDS)
    p.write_bytes(body.encode(encoding))  # Python writes the byte order mark first
    with pytest.raises(DagValidationError) as ei:
        load_dag(p)
    (problem,) = ei.value.problems
    assert problem.code == ProblemCode.BAD_ENCODING
    assert str(ei.value) == (
        f"DAG file {p}: the file is {encoding.upper()} (it starts with a {encoding.upper()} "
        "byte order mark); save it as UTF-8"
    )


def test_latin1_json_names_the_byte_offset_line_and_column(tmp_path: Path) -> None:
    p = tmp_path / "dag.json"
    text = '{"nodes": [\n  {"id": "r", "text": "café"},\n  {"id": "t", "text": "T", "sources": ["r"]}\n]}'
    p.write_bytes(text.encode("latin-1"))
    with pytest.raises(DagValidationError) as ei:
        load_dag(p)
    offset = text.encode("latin-1").index(b"\xe9")
    column = text.splitlines()[1].index("é") + 1  # 27
    assert str(ei.value) == (
        f"DAG file {p}: not UTF-8: byte 0xe9 at offset {offset} (line 2, column {column}); "
        "save the file as UTF-8"
    )
    assert ei.value.problems[0].code == ProblemCode.BAD_ENCODING


def test_a_latin1_line_of_json_lines_is_reported_with_the_others(tmp_path: Path) -> None:
    p = tmp_path / "dag.jsonl"
    good = '{"id": "r", "text": "Ünïcode root."}\n'.encode()
    bad = '{"id": "t", "text": "café", "sources": ["r"]}\n'.encode("latin-1")
    p.write_bytes(b"\xef\xbb\xbf" + good + bad + b"{not json}\n")
    with pytest.raises(DagValidationError) as ei:
        load_dag(p)
    codes = [(x.code, x.ids) for x in ei.value.problems]
    assert (ProblemCode.BAD_ENCODING, ("line 2",)) in codes
    assert (ProblemCode.BAD_JSON, ("line 3",)) in codes
    enc = next(x for x in ei.value.problems if x.code == ProblemCode.BAD_ENCODING)
    # Offsets count from the start of the file (BOM included); columns count characters.
    offset = 3 + len(good) + bad.index(b"\xe9")
    column = bad.index(b"\xe9") + 1  # the line before it is ASCII: 25
    assert f"byte 0xe9 at offset {offset} (line 2, column {column})" in enc.message
    assert str(ei.value).startswith(f"{p}: invalid DAG (")


@pytest.mark.parametrize("name", ["dag.json", "dag.jsonl"])
def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path: Path, name: str) -> None:
    p = tmp_path / name
    p.write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(DagValidationError) as ei:
        load_dag(p)
    assert ei.value.problems[0].code == ProblemCode.TOO_DEEP
    assert "nested too deeply" in str(ei.value)


def test_meta_deeper_than_the_limit_is_refused(tmp_path: Path) -> None:
    from veritrail.textio import MAX_DEPTH

    def nested(levels: int) -> str:  # `levels` objects inside the meta object
        return '{"a": ' * levels + "1" + "}" * levels

    ok = tmp_path / "ok.json"
    ok.write_text(f'{{"meta": {nested(MAX_DEPTH - 1)}, "nodes": {json.dumps(RECORDS)}}}')
    assert load_dag(ok).terminal == "final"
    deep = tmp_path / "deep.json"
    deep.write_text(f'{{"meta": {nested(MAX_DEPTH)}, "nodes": {json.dumps(RECORDS)}}}')
    with pytest.raises(DagValidationError, match="nested too deeply") as ei:
        load_dag(deep)
    assert ei.value.problems[0].code == ProblemCode.TOO_DEEP
    deep_jsonl = tmp_path / "deep.jsonl"
    deep_jsonl.write_text(f'{{"meta": {nested(MAX_DEPTH)}}}\n' + _jsonl(RECORDS))
    with pytest.raises(DagValidationError, match="nested too deeply"):
        load_dag(deep_jsonl)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e999", "9" * 5000])
def test_json_is_strict(tmp_path: Path, number: str) -> None:
    p = tmp_path / "dag.json"
    p.write_text(f'{{"meta": {{"x": {number}}}, "nodes": {json.dumps(RECORDS)}}}')
    with pytest.raises(DagValidationError) as ei:
        load_dag(p)
    assert ei.value.problems[0].code == ProblemCode.BAD_JSON
    assert str(ei.value).startswith(f"DAG file {p}: not valid JSON: ")


def test_veritrail_dag_names_every_dag_name() -> None:
    """`veritrail.dag` stays the one module to import from, though the code lives in three."""
    import veritrail.dag as facade

    assert sorted(facade.__all__) == [
        "Dag",
        "DagProblem",
        "DagValidationError",
        "Node",
        "PerDag",
        "ProblemCode",
        "dag_schema",
        "iter_node_records",
        "load_dag",
        "save_dag",
    ]
    assert all(getattr(facade, name) is not None for name in facade.__all__)


def test_the_run_fingerprint_hashes_every_dag_module() -> None:
    """The DAG's model, validation and reading decide a run's results, so a resumed run must be
    finished by the same code: every `dag*.py` module is in the code fingerprint."""
    import veritrail
    from veritrail.run.fingerprint import verify_code_files

    pkg = Path(veritrail.__file__).resolve().parent
    modules = set(pkg.glob("dag*.py"))
    assert {p.name for p in modules} >= {"dag.py", "dag_model.py", "dag_validate.py", "dag_io.py"}
    assert modules <= set(verify_code_files())
