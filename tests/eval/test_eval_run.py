"""`veritrail eval` end to end on a WiCE slice: the gold oracle through the CLI, and every method
with the scripted provider through the Python API (same claims, same model, same verdict step)."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner
from sklearn.metrics import f1_score, roc_auc_score

from veritrail.cli.main import cli
from veritrail.detectors.embeddings import HashingEmbedder, top_k
from veritrail.detectors.registry import BuildContext, MethodSpec, build_method, known_methods
from veritrail.eval.datasets import EvalDataset, load_dataset, wice_items
from veritrail.eval.plots import plot_error_stages
from veritrail.eval.runner import run_eval, summarize
from veritrail.eval.tables import render_markdown, summary_to_json
from veritrail.lm.base import Message
from veritrail.lm.fake import FakeProvider
from veritrail.lm.model import Model
from veritrail.method.config import VerifyConfig

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
WICE_DEV = DATA / "wice" / "data" / "entailment_retrieval" / "claim" / "dev.jsonl"
pytestmark = pytest.mark.skipif(not WICE_DEV.is_file(), reason="shared/data not present")

_FENCE = re.compile(r"<<< ([^\n]*)\n(.*?)\n>>> end \1", re.S)
_WORD = re.compile(r"[A-Za-z0-9]{4,}")


def _blocks(text: str) -> dict[str, str]:
    return {label: body for label, body in _FENCE.findall(text)}


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def lexical_responder(messages: Sequence[Message]) -> str:
    """A deterministic stand-in model: word overlap decides evidence and verdicts. A shared
    prompt (docs/method.md#shared-prompts) gets, per claim c1..cN, its one-claim answer."""
    system, user = messages[0].content, messages[-1].content
    blocks = _blocks(user)
    if "claim c1" in blocks or "statement c1" in blocks:
        kind = "statement" if "statement c1" in blocks else "claim"
        entries = []
        k = 1
        while f"{kind} c{k}" in blocks:
            one = {**blocks, kind: blocks[f"{kind} c{k}"]}
            entries.append({"claim": f"c{k}", **json.loads(_lexical(system, one))})
            k += 1
        return json.dumps({"claims": entries})
    return _lexical(system, blocks)


def _lexical(system: str, blocks: dict[str, str]) -> str:
    if system.startswith("You split"):
        return json.dumps({"parts": [blocks["statement"]]})
    claim = _words(blocks["claim"])
    if system.startswith("You find evidence"):
        ids, texts = [], []
        for label, body in blocks.items():
            if not label.startswith("excerpt"):
                continue
            for m in re.finditer(r"^\[(\d+)\] (.*)$", body, re.M):
                if len(claim & _words(m.group(2))) >= 3:
                    ids.append(int(m.group(1)))
                    texts.append(m.group(2))
        summary = " ".join(texts)  # the summary restates the selected sentences
        return json.dumps(
            {"selected_ids": ids, "context_ids": [], "summary": summary, "missing": ""}
        )
    evidence = set().union(*(_words(b) for k, b in blocks.items() if k.startswith("item")))
    share = len(claim & evidence) / max(1, len(claim))
    verdict = "Fully Supported" if share >= 0.75 else "Not Fully Supported"
    return json.dumps({"reasoning": f"{share:.2f} of the claim's words occur", "verdict": verdict})


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_cli_oracle_on_wice_slice(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the `eval` extra: the plots
    out = tmp_path / "out"
    res = CliRunner().invoke(
        cli,
        [
            "eval",
            str(WICE_DEV),
            "--limit",
            "12",
            "--out",
            str(out),
            "--bootstrap",
            "100",
            "--format",
            "markdown",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "| Oracle (gold) q=3 |" in res.output
    doc = json.loads((out / "results.json").read_text())
    (row,) = doc["methods"]
    assert doc["claims"] == 12
    assert row["evidence"]["recall"] == 1.0  # the oracle selects a gold set
    assert row["evidence"]["precision"] == 1.0
    assert row["hard"]["macro_f1"] == 1.0 or row["hard"]["fully_supported"]["support"] == 0
    assert row["cost_per_claim"]["lm_calls"] == 0
    gold = doc["gold_labels"]
    preds = {p["claim"]: p for p in doc["predictions"]}
    assert {k: preds[k]["verdict"] for k in gold} == gold
    # WiCE is single-step: every correctly flagged claim points at the terminal's stage.
    nfs = sum(1 for v in gold.values() if v == "Not Fully Supported")
    assert row["error_stages"]["true_positives"] == nfs
    assert row["error_stages"]["rates"] == [{"stage": 2, "rate": 1.0, "ci95": [1.0, 1.0]}]
    for name in (
        "precision_recall.png",
        "precision_recall.svg",
        "error_stages.png",
        "error_stages.svg",
        "table.md",
    ):
        assert (out / name).stat().st_size > 0, name


@pytest.mark.slow
def test_cli_save_dataset_then_evaluate_it(tmp_path: Path) -> None:
    conv = tmp_path / "wice.jsonl"
    r1 = CliRunner().invoke(
        cli, ["eval", f"wice:{WICE_DEV}", "--limit", "3", "--save-dataset", str(conv)]
    )
    assert r1.exit_code == 0, r1.output
    assert len(conv.read_text().splitlines()) == 3
    r2 = CliRunner().invoke(
        cli, ["eval", str(conv), "--format", "json", "--no-plots", "--bootstrap", "10"]
    )
    assert r2.exit_code == 0, r2.output
    assert json.loads(r2.stdout)["methods"][0]["evidence"]["recall"] == 1.0  # progress: stderr


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_cli_rejects_model_methods_without_model(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")  # the `eval` extra (RAG's embedder is built first)
    res = CliRunner().invoke(cli, ["eval", str(WICE_DEV), "--limit", "2", "--method", "rag:k=3"])
    assert res.exit_code == 2 and "needs a model" in res.output


def _slice(n: int) -> EvalDataset:
    return EvalDataset("wice-dev", wice_items(WICE_DEV, sentences_per_chunk=10, limit=n))


async def test_all_methods_with_scripted_provider() -> None:
    ds = _slice(6)
    fake = FakeProvider(responder=lexical_responder)
    model = Model(fake)
    ctx = BuildContext(
        model=model,
        base_config=VerifyConfig(),
        embedder=lambda _n: HashingEmbedder(),
        default_embedder="hashing",
    )
    specs = ["veritrail:q=1", "veritrail:q=3", "rag:k=2", "direct:budget=600", "oracle"]
    methods = [build_method(s, ctx) for s in specs]
    run = await run_eval(ds, methods)
    assert run.methods == [
        "VeriTrail q=1",
        "VeriTrail q=3",
        "RAG k=2",
        "Direct (≤600 tok)",
        "Oracle (gold) q=3",
    ]
    for name in run.methods:
        assert set(run.predictions[name]) == set(run.gold)

    # RAG: exactly one verdict call per claim over the top-2 roots by embedding similarity.
    emb = HashingEmbedder()
    for item in ds.items:
        dag = ds.dag(item)
        roots = [n.id for n in dag if not n.sources]
        matrix = emb.embed([dag.node(r).text for r in roots])
        want = [roots[i] for i in top_k(emb.embed([item.claims[0].text])[0], matrix, 2)]
        p = run.predictions["RAG k=2"][item.id]
        assert p.detail["retrieved"] == want
        assert p.lm_calls == 1 and p.nodes_read == 2
        prompts = [
            c.prompt
            for c in fake.calls
            if "(source document) node" in c.prompt and item.claims[0].text in c.prompt
        ]
        assert any(
            all(f'node "{r}"\n' in pr for r in want)
            and pr.count("\n<<< item ") + pr.startswith("<<< item ") == 2
            for pr in prompts
        )
        d = run.predictions["Direct (≤600 tok)"][item.id]
        assert d.lm_calls == 1 and 0 < d.nodes_read <= len(roots)

    # VeriTrail: decomposition, evidence and verdict calls; evidence = root sentences of the trail.
    for p in run.predictions["VeriTrail q=1"].values():
        assert p.error is None, p.error
        assert p.lm_calls >= 2
        assert p.evidence is not None and all(n.startswith("chunk-") for n, _ in p.evidence)

    summary = summarize(run, bootstrap=50)
    kept = list(summary.exclusion.kept)
    for row in summary.rows:
        preds = run.predictions[row.method]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = f1_score(
                [run.gold[k].label.value for k in kept],
                [preds[k].verdict.value for k in kept if preds[k].verdict],
                average="macro",
                labels=["Fully Supported", "Not Fully Supported"],
                zero_division=0,
            )
        assert row.hard.macro_f1 == pytest.approx(expected)
    oracle = next(r for r in summary.rows if r.method.startswith("Oracle"))
    assert oracle.evidence_recall == 1.0
    md = render_markdown(summary)
    assert md.count("\n| ") >= len(specs) + 1
    doc = summary_to_json(summary, run)
    assert len(doc["predictions"]) == len(specs) * 6


async def test_soft_prediction_gives_scores_and_auroc() -> None:
    ds = _slice(8)
    model = Model(FakeProvider(responder=lexical_responder))
    ctx = BuildContext(
        model=model,
        base_config=VerifyConfig(samples=3, threshold=2),
        samples=3,
        threshold=2,
        embedder=lambda _n: HashingEmbedder(),
        default_embedder="hashing",
    )
    run = await run_eval(ds, [build_method("veritrail:q=1", ctx), build_method("rag:k=3", ctx)])
    summary = summarize(run, bootstrap=20)
    for row in summary.rows:
        preds = run.predictions[row.method]
        keys = [
            k for k in run.gold if all(run.predictions[m][k].score is not None for m in run.methods)
        ]
        labels = [run.gold[k].label.value == "Fully Supported" for k in keys]
        scores = [preds[k].score for k in keys]
        assert all(s in (0.0, 1 / 3, 2 / 3, 1.0) for s in scores)
        assert row.auroc_n == len(keys)
        if len(set(labels)) == 2:
            assert row.auroc == pytest.approx(roc_auc_score(labels, scores))
        else:
            assert row.auroc is None
    rag = next(r for r in summary.rows if r.method.startswith("RAG"))
    assert rag.calls_per_claim == 3  # three sampled verdicts per claim


def test_method_specs() -> None:
    spec = MethodSpec.parse("rag:k=5, embedder=hashing")
    assert spec.kind == "rag" and spec.get("k") == "5" and spec.get("embedder") == "hashing"
    with pytest.raises(ValueError, match="key=value"):
        MethodSpec.parse("rag:5")
    with pytest.raises(ValueError, match="unknown method"):
        build_method("nope", BuildContext(model=None, base_config=VerifyConfig()))
    assert {"veritrail", "oracle", "rag", "direct", "g2l"} <= set(known_methods())


async def test_g2l_method_hook_runs_g2ldetect_per_claim() -> None:
    tree = {"theme": "The claim", "branches": [{"name": "Part", "details": ["detail"]}]}

    def reply(messages: Sequence[Message]) -> str:
        text = "\n".join(m.content for m in messages)
        if "Text to organise:" in text:
            return json.dumps(tree)
        # Supported exactly when the references mention the claim's title word "Arnold".
        return json.dumps({"reason": "scripted", "supported": "Arnold" in text})

    ds = _slice(2)
    model = Model(FakeProvider(responder=reply))
    g2l = build_method("g2l", BuildContext(model=model, base_config=VerifyConfig()))
    run = await run_eval(ds, [g2l])
    preds = run.predictions["G2LDetect"]
    assert set(preds) == set(run.gold)
    for item in ds.items:
        p = preds[item.id]
        roots_text = " ".join(n.text for n in ds.dag(item) if not n.sources)
        expected = "Fully Supported" if "Arnold" in roots_text else "Not Fully Supported"
        assert p.verdict is not None and p.verdict.value == expected
        assert p.lm_calls >= 2 and p.error is None


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_cli_terminal_table_on_fables_slice(tmp_path: Path) -> None:
    fables = DATA / "fables" / "FABLES.json"
    res = CliRunner().invoke(
        cli, ["eval", f"fables:{fables}", "--limit", "30", "--bootstrap", "20", "--no-plots"]
    )
    assert res.exit_code == 0, res.output
    assert "veritrail eval — fables" in res.output
    assert "Oracle (gold) q=3" in res.output and "Macro F1" in res.output
    assert "30 claims" in res.output


async def test_error_stages_on_a_multi_step_dag(tmp_path: Path) -> None:
    """Hierarchical summaries where stage 2 invents a fact: the loop localises it, and the
    stage analysis compares q=1 with q=3."""
    pytest.importorskip("matplotlib")  # the `eval` extra
    nodes = [
        {
            "id": "r1",
            "text": "Alice founded Acme in 1990. Acme makes anvils for farmers.",
            "sources": [],
        },
        {"id": "r2", "text": "Bob joined Acme in 2001 as an engineer.", "sources": []},
        {
            "id": "s1",
            "text": "Alice founded Acme in 1990. Acme sells rockets worldwide.",
            "sources": ["r1"],
        },
        {"id": "s2", "text": "Bob joined Acme in 2001 as an engineer.", "sources": ["r2"]},
        {
            "id": "t",
            "text": "Alice founded Acme in 1990. Acme sells rockets worldwide. Bob joined Acme in 2001.",
            "sources": ["s1", "s2"],
        },
    ]
    fs, nfs = "Fully Supported", "Not Fully Supported"
    claims = [
        {
            "id": "c1",
            "text": "Alice founded Acme in 1990.",
            "label": fs,
            "gold_evidence": [[{"node": "r1", "sentences": [0]}]],
        },
        {"id": "c2", "text": "Acme sells rockets worldwide.", "label": nfs},
        {
            "id": "c3",
            "text": "Bob joined Acme in 2001.",
            "label": fs,
            "gold_evidence": [[{"node": "r2", "sentences": [0]}]],
        },
        {"id": "c4", "text": "Carol leads Acme since 2020.", "label": nfs},
    ]
    path = tmp_path / "ds.jsonl"
    path.write_text(json.dumps({"id": "book", "dag": {"nodes": nodes}, "claims": claims}) + "\n")
    ds = load_dataset(path)
    model = Model(FakeProvider(responder=lexical_responder))
    ctx = BuildContext(model=model, base_config=VerifyConfig())
    run = await run_eval(
        ds, [build_method("veritrail:q=1", ctx), build_method("veritrail:q=3", ctx)]
    )
    for name in run.methods:
        preds = run.predictions[name]
        got = {k: p.verdict.value for k, p in preds.items() if p.verdict}
        assert got == {k: g.label.value for k, g in run.gold.items()}
        assert preds["book/c2"].error_stages == (2,)  # s1 introduced the rockets
        assert preds["book/c4"].error_stages == (3,)  # never supported: the terminal's stage
        assert preds["book/c1"].evidence == frozenset({("r1", 0)})
    summary = summarize(run, bootstrap=100)
    for row in summary.rows:
        assert row.hard.macro_f1 == 1.0 and row.evidence_recall == 1.0
        assert [(r.stage, r.rate) for r in row.stage_rates] == [(2, 0.5), (3, 0.5)]
    (pair,) = summary.stage_pairs
    assert pair.jensen_shannon == pytest.approx(0.0)
    assert [(r.stage, r.rate) for r in summary.pooled_stages] == [(2, 0.5), (3, 0.5)]
    files = plot_error_stages(summary, tmp_path / "stages", formats=("svg",))
    assert files and "stage 3" in files[0].read_text()
