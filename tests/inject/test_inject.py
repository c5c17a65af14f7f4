"""`veritrail inject`: planted hallucinations reach the final output, gold stage and node are the
first node stating them, files are byte-identical for a seed, bad input exits 2 with one line."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from veritrail.cli.main import cli
from veritrail.dag import Dag, load_dag
from veritrail.inject import Kind, Vocabulary, make_variants, perturb
from veritrail.inject.perturb import CONTENT_KINDS
from veritrail.method.claims import load_claims
from veritrail.method.segment import split_sentences

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "dag.json"

# Three stages, names, numbers and auxiliaries everywhere, so every kind applies at every stage.
NODES: list[dict[str, Any]] = [
    {
        "id": "r1",
        "text": "Alice Moreau founded the Velo Club in 1921 with twelve riders. "
        "The club was based in Lyon. Bruno Keller joined it in 1930.",
        "sources": [],
    },
    {
        "id": "r2",
        "text": "Bruno Keller won the regional race three times. Alice Moreau was its first "
        "president. The race is held every May in Lyon.",
        "sources": [],
    },
    {
        "id": "m1",
        "text": "Alice Moreau founded the Velo Club in 1921 with twelve riders. "
        "Bruno Keller was a member from 1930.",
        "sources": ["r1"],
    },
    {
        "id": "m2",
        "text": "Bruno Keller won the regional race three times. Alice Moreau was the first "
        "president of the race.",
        "sources": ["r2"],
    },
    {
        "id": "final",
        "text": "Alice Moreau founded the Velo Club in 1921. Bruno Keller was a member from "
        "1930 and won the regional race three times. Alice Moreau was the first president.",
        "sources": ["m1", "m2"],
    },
]


def write_dag(path: Path, nodes: list[dict[str, Any]] = NODES) -> Path:
    path.write_text(json.dumps({"nodes": nodes}), encoding="utf-8")
    return path


def files_of(d: Path) -> dict[str, bytes]:
    return {
        p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()
    }


def check_injection(out: Path) -> list[dict[str, Any]]:
    """Every variant of `out` against the rules of docs/inject.md; returns the variants."""
    manifest = json.loads((out / "injected.json").read_text(encoding="utf-8"))
    assert manifest["format"] == "veritrail-injected" and manifest["version"] == 1
    clean = load_dag(out / "clean" / "dag.json")
    clean_claims = {c.id: c.text for c in load_claims(out / "clean" / "claims.json")}
    for v in manifest["variants"]:
        dag = load_dag(out / v["dag"])  # validates
        claims = {c.id: c.text for c in load_claims(out / v["claims"])}
        text = claims["injected"]
        assert text == v["injected"]
        # The final output states the injected claim as one of its sentences.
        assert text in [s.strip() for s in split_sentences(dag.node(dag.terminal).text)]
        # Gold: the node stating it first (its sources do not), at its stage in the clean DAG.
        node = dag.node(v["node"])
        assert v["stage"] == clean.stage(v["node"]) == node.stage and node.sources
        assert text in node.text
        assert not any(text in dag.node(s).text for s in node.sources)
        assert text not in "\n".join(n.text for n in clean)
        assert v["path"][0] == v["node"] and v["path"][-1] == dag.terminal
        # Only the path changed.
        changed = {n.id for n in dag if n.text != clean.node(n.id).text}
        assert changed <= set(v["path"]) and v["node"] in changed
        # Untouched claims: clean final-output sentences still there verbatim.
        for cid in v["untouched"]:
            assert claims[cid] == clean_claims[cid]
            assert claims[cid] in dag.node(dag.terminal).text
        gold = json.loads((out / v["gold"]).read_text(encoding="utf-8"))["claims"]
        assert gold[0] == {
            "id": "injected",
            "label": "Not Fully Supported",
            "kind": v["kind"],
            "stage": v["stage"],
            "node": v["node"],
        }
    return list(manifest["variants"])


def test_every_kind_at_every_stage(tmp_path: Path) -> None:
    dag = write_dag(tmp_path / "dag.json")
    out = tmp_path / "inj"
    r = CliRunner().invoke(cli, ["inject", str(dag), "--n", "8", "--seed", "3", "--out", str(out)])
    assert r.exit_code == 0, r.output
    variants = check_injection(out)
    assert {(v["kind"], v["stage"]) for v in variants} == {
        (k.value, s) for k in CONTENT_KINDS for s in (2, 3)
    }
    # No marker in its final output: the citation kinds are left out, and the command says so.
    assert "left out: wrong-citation" in r.output and "dropped-citation" in r.output


def test_byte_identical_for_a_seed_and_different_for_another(tmp_path: Path) -> None:
    dag = write_dag(tmp_path / "dag.json")
    outs = []
    for name, seed in (("a", "5"), ("b", "5"), ("c", "6")):
        r = CliRunner().invoke(
            cli, ["inject", str(dag), "--n", "6", "--seed", seed, "--out", str(tmp_path / name)]
        )
        assert r.exit_code == 0, r.output
        outs.append(files_of(tmp_path / name))
    assert outs[0] == outs[1]
    assert outs[0] != outs[2]


def test_kinds_stages_and_untouched_cap(tmp_path: Path) -> None:
    dag = write_dag(tmp_path / "dag.json")
    out = tmp_path / "inj"
    r = CliRunner().invoke(
        cli,
        [
            "inject",
            str(dag),
            "--n",
            "4",
            "--kinds",
            "number,negation",
            "--stages",
            "2",
            "--max-untouched",
            "1",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    variants = check_injection(out)
    assert len(variants) == 4
    assert {v["kind"] for v in variants} == {"number", "negation"}
    assert {v["stage"] for v in variants} == {2}
    assert all(len(v["untouched"]) <= 1 for v in variants)


def test_quickstart_dag(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        cli, ["inject", str(QUICKSTART), "--n", "6", "--seed", "0", "--out", str(tmp_path / "q")]
    )
    assert r.exit_code == 0, r.output
    assert len(check_injection(tmp_path / "q")) == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kinds", "typo"], "unknown kind 'typo'"),
        (["--stages", "1"], "stage(s) 1 hold no node above the sources"),
        (["--stages", "two"], "--stages takes stage numbers"),
        (["--n", "0"], "--n must be at least 1"),
    ],
)
def test_bad_options_exit_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    dag = write_dag(tmp_path / "dag.json")
    r = CliRunner().invoke(cli, ["inject", str(dag), *args, "--out", str(tmp_path / "o")])
    assert r.exit_code == 2, r.output
    assert message in r.output and len(r.output.strip().splitlines()) == 1
    assert "Traceback" not in r.output
    assert not (tmp_path / "o").exists()


def test_bad_inputs_exit_2(tmp_path: Path) -> None:
    dag = write_dag(tmp_path / "dag.json")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    r = CliRunner().invoke(cli, ["inject", str(dag), "--out", str(busy)])
    assert r.exit_code == 2 and "not an empty directory" in r.output
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": [{"id": "a", "text": "x", "sources": ["zz"]}]}')
    r = CliRunner().invoke(cli, ["inject", str(bad), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "Traceback" not in r.output
    flat = write_dag(
        tmp_path / "flat.json",
        [{"id": "r", "text": "Only a source.", "sources": []}],
    )
    r = CliRunner().invoke(cli, ["inject", str(flat), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "nothing to inject into" in r.output


VOCAB = Vocabulary.of_texts(n["text"] for n in NODES)


@pytest.mark.parametrize(
    ("kind", "sentence", "expect"),
    [
        (Kind.NUMBER, "Bruno Keller joined it in 1930.", "1930"),
        (Kind.NUMBER, "He won three times.", "three"),
        (Kind.NEGATION, "The club was based in Lyon.", "was not based"),
        (Kind.NEGATION, "The club was not based in Lyon.", "was based"),
        (Kind.ENTITY_SWAP, "Alice Moreau was its first president.", "Alice Moreau"),
        (Kind.FABRICATED, "Alice Moreau was its first president.", None),
    ],
)
def test_each_kind_changes_what_it_says(kind: Kind, sentence: str, expect: str | None) -> None:
    out = perturb(kind, sentence, VOCAB, random.Random(0), sentence)
    assert out is not None and out != sentence
    if kind is Kind.NUMBER or kind is Kind.ENTITY_SWAP:
        assert expect is not None and expect not in out
    elif kind is Kind.NEGATION:
        assert expect is not None and expect in out
    if kind is Kind.ENTITY_SWAP:
        assert any(n in out for n in VOCAB.names if n != "Alice Moreau")  # a name of the DAG
    if kind is Kind.FABRICATED:
        assert out.startswith("Alice Moreau ")


def test_kinds_that_do_not_apply_say_so() -> None:
    rng = random.Random(0)
    assert perturb(Kind.NUMBER, "No digits here at all.", VOCAB, rng) is None
    assert perturb(Kind.NEGATION, "Lyon hosts the race each May.", VOCAB, rng) is None
    assert perturb(Kind.ENTITY_SWAP, "nobody is named in this one.", VOCAB, rng) is None


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 10))
def test_any_seed_gives_valid_variants(seed: int, n: int) -> None:
    dag = Dag.from_records(NODES)
    inj = make_variants(dag, n=n, seed=seed)
    assert 1 <= len(inj.variants) <= n
    for v in inj.variants:
        terminal = v.dag.node(v.dag.terminal).text
        assert v.injected in [s.strip() for s in split_sentences(terminal)]
        assert not any(v.injected in v.dag.node(s).text for s in v.dag.sources(v.node))


def test_a_dag_from_the_recorder(tmp_path: Path) -> None:
    from veritrail.pipelines.recorder import Recorder

    rec = Recorder(meta={"pipeline": "digest"})
    q1 = rec.source(
        "Revenue grew by 12% in the first quarter. The Lisbon office opened in March.", id="q1"
    )
    q2 = rec.source("Revenue fell by 3% in the second quarter. Costs were flat.", id="q2")
    s1 = rec.step("summarize", inputs=[q1], output="Revenue grew by 12% in the first quarter.")
    s2 = rec.step("summarize", inputs=[q2], output="Revenue fell by 3% in the second quarter.")
    final = rec.step(
        "combine",
        inputs=[s1, s2],
        output="Revenue grew by 12% in the first quarter. Revenue fell by 3% in the second "
        "quarter. The Lisbon office opened in March.",
    )
    dag = tmp_path / "dag.json"
    rec.save(dag, terminal=final)
    r = CliRunner().invoke(
        cli, ["inject", str(dag), "--n", "4", "--kinds", "number", "--out", str(tmp_path / "o")]
    )
    assert r.exit_code == 0, r.output
    variants = check_injection(tmp_path / "o")
    assert len(variants) == 4 and {v["stage"] for v in variants} == {2, 3}
