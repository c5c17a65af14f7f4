"""`veritrail inject`'s citation kinds: a marker moved to a source that does not support the
sentence (gold misattributed), markers dropped (gold uncited); deterministic, the variants
validate, content untouched; DAGs with no marker are left out and the command says so."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.dag import Dag, load_dag
from veritrail.inject import Kind, make_variants
from veritrail.inject.cite import (
    cited_sentences,
    strip_markers,
    support_share,
    wrong_citation,
)
from veritrail.method.claims import load_claims
from veritrail.method.segment import split_sentences

# Three sources on unrelated subjects and an answer citing each: every sentence supported by
# the source it cites, by no other.
CITED: list[dict[str, Any]] = [
    {
        "id": "mill.txt",
        "text": "The Harbour Mill opened in 1850 beside the river Tamsin. "
        "Its miller, Edith Crane, ground barley for twelve farms.",
        "sources": [],
    },
    {
        "id": "comet.txt",
        "text": "Astronomers tracked the comet Velora for nine months. "
        "Its tail stretched across four degrees of the evening sky.",
        "sources": [],
    },
    {
        "id": "choir.txt",
        "text": "The Northgate choir sang at the cathedral festival in 1998. "
        "Forty singers travelled by train from Northgate.",
        "sources": [],
    },
    {
        "id": "answer",
        "text": "The Harbour Mill opened in 1850 beside the river Tamsin [1]. "
        "Edith Crane ground barley for twelve farms [1]. "
        "Astronomers tracked the comet Velora for nine months [2]. "
        "The Northgate choir sang at the cathedral festival in 1998 [3].",
        "sources": ["mill.txt", "comet.txt", "choir.txt"],
    },
]

PLAIN: list[dict[str, Any]] = [
    {"id": "r", "text": "The Harbour Mill opened in 1850 beside the river.", "sources": []},
    {"id": "t", "text": "The Harbour Mill opened in 1850 beside the river.", "sources": ["r"]},
]


def write(path: Path, nodes: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"nodes": nodes}), encoding="utf-8")
    return path


def inject(*args: str) -> Any:
    return CliRunner().invoke(cli, ["inject", *args])


def files_of(d: Path) -> dict[str, bytes]:
    return {
        p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()
    }


def test_citation_kinds_gold_and_content_unchanged(tmp_path: Path) -> None:
    dag = write(tmp_path / "dag.json", CITED)
    out = tmp_path / "inj"
    r = inject(
        str(dag),
        "--n",
        "6",
        "--kinds",
        "wrong-citation,dropped-citation",
        "--seed",
        "1",
        "--out",
        str(out),
    )
    assert r.exit_code == 0, r.output
    manifest = json.loads((out / "injected.json").read_text("utf-8"))
    assert manifest["citations"] == "auto" and "not_applicable" not in manifest
    clean = load_dag(out / "clean" / "dag.json")
    clean_claims = {c.id: c.text for c in load_claims(out / "clean" / "claims.json")}
    # Claims are the sentences without their markers.
    assert clean_claims["t1"] == "The Harbour Mill opened in 1850 beside the river Tamsin."
    kinds = [v["kind"] for v in manifest["variants"]]
    assert kinds.count("wrong-citation") == 3 and kinds.count("dropped-citation") == 3
    sources = {n["id"]: n["text"] for n in CITED if not n["sources"]}
    order = list(sources)
    for v in manifest["variants"]:
        variant = load_dag(out / v["dag"])  # validates
        terminal = variant.node("answer").text
        # Only the terminal's markers changed: the same sentences once markers are stripped.
        assert [n.text for n in variant if n.id != "answer"] == [
            n.text for n in clean if n.id != "answer"
        ]
        assert [strip_markers(s) for s in split_sentences(terminal)] == [
            strip_markers(s) for s in split_sentences(clean.node("answer").text)
        ]
        claims = {c.id: c.text for c in load_claims(out / v["claims"])}
        assert claims["injected"] in clean_claims.values()  # the true sentence, as it was
        assert claims["injected"] not in [claims[c] for c in v["untouched"]]
        gold = json.loads((out / v["gold"]).read_text("utf-8"))["claims"][0]
        assert gold["label"] == "Fully Supported"
        assert (v["stage"], v["node"], v["path"]) == (2, "answer", ["answer"])
        if v["kind"] == "wrong-citation":
            assert gold["citation"] == v["citation"] == "misattributed"
            before = v["original"][v["original"].rindex("[") + 1 : -2]
            after = v["injected"][v["injected"].rindex("[") + 1 : -2]
            assert before != after
            # The new marker names a source that does not hold the sentence's words.
            wrong = sources[order[int(after) - 1]]
            assert support_share(v["original"], wrong) <= 1 / 3
        else:
            assert gold["citation"] == v["citation"] == "uncited"
            assert "[" not in v["injected"] and "[" in v["original"]
    # Byte-identical for a seed.
    again = tmp_path / "again"
    r = inject(
        str(dag),
        "--n",
        "6",
        "--kinds",
        "wrong-citation,dropped-citation",
        "--seed",
        "1",
        "--out",
        str(again),
    )
    assert r.exit_code == 0 and files_of(again) == files_of(out)


def test_content_kinds_keep_the_markers(tmp_path: Path) -> None:
    # `number` must not turn "[1]" into "[3]": markers are hidden from the perturbation.
    dag = Dag.from_records(CITED)
    inj = make_variants(dag, n=4, seed=0, kinds=(Kind.NUMBER, Kind.ENTITY_SWAP))
    assert inj.citations and len(inj.variants) == 4
    for v in inj.variants:
        assert v.original[v.original.rindex("[") :] == v.injected[v.injected.rindex("[") :]
        assert v.claim == strip_markers(v.injected) and "[" not in v.claim


def test_default_kinds_on_a_dag_without_markers_leave_the_citation_kinds_out(
    tmp_path: Path,
) -> None:
    dag = write(tmp_path / "plain.json", PLAIN)
    out = tmp_path / "o"
    r = inject(str(dag), "--n", "2", "--kinds", "number,wrong-citation", "--out", str(out))
    assert r.exit_code == 0, r.output
    assert "left out: wrong-citation (the final output has no citation marker" in r.output
    manifest = json.loads((out / "injected.json").read_text("utf-8"))
    assert manifest["kinds"] == ["number"] and "citations" not in manifest
    assert manifest["not_applicable"][0]["kind"] == "wrong-citation"
    # Only citation kinds asked: nothing to do, exit 2 with one line, nothing written.
    r = inject(str(dag), "--kinds", "wrong-citation", "--out", str(tmp_path / "none"))
    assert r.exit_code == 2, r.output
    assert "only for a DAG whose final output carries citation markers" in r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output
    assert not (tmp_path / "none").exists()


def test_wrong_citation_in_other_marker_styles() -> None:
    # Names: the replacement is a marker the answer already uses for the other source.
    nodes = [dict(n) for n in CITED]
    nodes[3] = {
        **nodes[3],
        "text": "The Harbour Mill opened in 1850 beside the river Tamsin (Source: mill.txt). "
        "Astronomers tracked the comet Velora for nine months (Source: comet.txt).",
    }
    dag = Dag.from_records(nodes)
    cited = cited_sentences(dag)
    assert [c.sources for c in cited] == [("mill.txt",), ("comet.txt",)]
    edit = wrong_citation(dag, cited[0], random.Random(0))
    assert edit is not None and edit[2] == "(Source: comet.txt)"
    # No other source qualifies when every other one holds the sentence's words.
    same = [dict(n) for n in CITED]
    same[1] = {**same[1], "text": same[0]["text"]}
    dag = Dag.from_records(same)
    first = cited_sentences(dag)[0]
    edit = wrong_citation(dag, first, random.Random(0))
    assert edit is not None and edit[2] == "[3]"  # comet.txt now holds it: only choir.txt
