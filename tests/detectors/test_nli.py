"""The NLI judge and the NLI chunk baseline over a tiny randomly initialised model built here.

The model is a 1-layer BERT classifier with a word-level tokenizer trained in-process
(`veritrail.detectors.nli.build_tiny_nli_model`); its outputs are noise unless one output's bias
is raised (`favour`), which makes label mapping checkable end to end through a real forward pass.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402

from veritrail.cli.main import cli  # noqa: E402
from veritrail.dag import Dag  # noqa: E402
from veritrail.detectors.nli import (  # noqa: E402
    LabelRoles,
    NLIJudge,
    NLIModel,
    NLIModelError,
    build_tiny_nli_model,
    chunk_sentences,
    label_roles,
)
from veritrail.detectors.registry import BuildContext, build_method, known_methods  # noqa: E402
from veritrail.eval.datasets import load_dataset  # noqa: E402
from veritrail.eval.runner import run_eval, summarize  # noqa: E402
from veritrail.method.config import VerifyConfig  # noqa: E402
from veritrail.method.loop import verify_claims  # noqa: E402
from veritrail.method.steps import Steps, VerdictInput  # noqa: E402
from veritrail.records import Claim, Verdict  # noqa: E402
from veritrail.run.plugins import load_step  # noqa: E402

MNLI = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "overlap_steps.py"


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)  # 2 shared cores: one thread is the fastest


@pytest.fixture(scope="module")
def entailing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MNLI-labelled model that always says ENTAILMENT."""
    return build_tiny_nli_model(tmp_path_factory.mktemp("ent"), MNLI, favour=2)


@pytest.fixture(scope="module")
def contradicting(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same labels, always CONTRADICTION."""
    return build_tiny_nli_model(tmp_path_factory.mktemp("con"), MNLI, favour=0)


@pytest.mark.parametrize(
    ("id2label", "n", "want"),
    [
        (MNLI, 3, LabelRoles((2,), (0,))),
        ({0: "entailment", 1: "neutral", 2: "contradiction"}, 3, LabelRoles((0,), (2,))),
        ({0: "not_entailment", 1: "entailment"}, 2, LabelRoles((1,))),
        ({0: "unsupported", 1: "supported"}, 2, LabelRoles((1,))),
        ({0: "Inconsistent", 1: "Consistent"}, 2, LabelRoles((1,))),
        ({0: "hallucinated", 1: "factual"}, 2, LabelRoles((1,))),
        ({0: "LABEL_0", 1: "LABEL_1"}, 2, LabelRoles((1,))),  # MiniCheck's convention
        ({0: "LABEL_0"}, 1, LabelRoles((0,), regression=True)),  # one score (HHEM-style)
    ],
)
def test_label_roles(id2label: dict[int, str], n: int, want: LabelRoles) -> None:
    assert label_roles(id2label, n) == want


def test_unreadable_labels_are_refused() -> None:
    with pytest.raises(NLIModelError, match=r"edit config\.json"):
        label_roles({0: "apple", 1: "pear", 2: "plum"}, 3)


def test_tiny_model_loads_scores_in_batches_and_maps_labels(
    entailing: Path, contradicting: Path, tmp_path: Path
) -> None:
    m = NLIModel(entailing, batch_size=2)
    assert m.roles == LabelRoles((2,), (0,))
    pairs = [("the river flooded the village", "nobody was hurt")] * 5 + [("x " * 400, "long")]
    scores = m.score(pairs)  # 3 batches, one premise longer than the window (truncated)
    assert len(scores) == 6 and all(s > 0.99 and c < 0.01 for s, c in scores)
    sup, con = NLIModel(contradicting).score(pairs[:1])[0]
    assert sup < 0.01 and con > 0.99
    # A random (unfavoured) model gives probabilities, deterministic for a given directory.
    noisy = NLIModel(build_tiny_nli_model(tmp_path / "noise", MNLI))
    a, b = noisy.score(pairs[:2]), noisy.score(pairs[:2])
    assert a == b and all(0.0 < s < 1.0 for s, _ in a)
    assert len(m.fingerprint) == 16 and m.fingerprint != noisy.fingerprint


def test_judge_verdicts_and_reasoning(entailing: Path, contradicting: Path) -> None:
    claim = Claim("c1", "the bridge was destroyed")
    ev = [
        VerdictInput(("r1",), True, "the river flooded the village in march. " * 60),
        VerdictInput(("n2",), False, "nobody was hurt."),
    ]
    yes = NLIJudge.from_path(entailing, chunk_tokens=50)
    assert len(yes.chunks(ev)) > 3  # the long root is cut; the summary is its own chunk
    out = asyncio.run(yes.judge(claim, (), ev))
    assert out.verdict == Verdict.FULLY_SUPPORTED and out.error is None
    assert "P(supported) 1.000" in out.reasoning
    no = asyncio.run(NLIJudge.from_path(contradicting).judge(claim, (), ev))
    assert no.verdict == Verdict.NOT_FULLY_SUPPORTED
    assert "P(contradiction) 1.000" in no.reasoning
    empty = asyncio.run(yes.judge(claim, (), [VerdictInput(("r",), True, "  ")]))
    assert empty.verdict == Verdict.NOT_FULLY_SUPPORTED


def test_chunk_sentences() -> None:
    assert chunk_sentences(["a" * 40, "b" * 40, "c" * 40], 22) == [[0, 1], [2]]
    assert chunk_sentences(["x" * 400], 10) == [[0]]
    with pytest.raises(ValueError):
        chunk_sentences(["a"], 0)


def _dag() -> Dag:
    return Dag.from_records(
        [
            {"id": "r1", "text": "The river flooded the village in March. Nobody was hurt."},
            {"id": "r2", "text": "Alice signed the contract in Paris. It rained all week."},
            {
                "id": "t",
                "text": "The village flooded. Alice signed in Paris.",
                "sources": ["r1", "r2"],
            },
        ]
    )


def test_nli_judge_plugs_into_the_loop(entailing: Path, contradicting: Path) -> None:
    rest = [
        load_step(k, f"{EXAMPLE}:{a}")
        for k, a in (("decomposer", "AndDecomposer"), ("selector", "OverlapSelector"))
    ]
    claims = [
        Claim("c1", "The village flooded in March."),
        Claim("c2", "Alice signed the contract."),
    ]
    for path, want in (
        (entailing, Verdict.FULLY_SUPPORTED),
        (contradicting, Verdict.NOT_FULLY_SUPPORTED),
    ):
        judge = load_step("judge", f"nli:{path}")
        assert judge.fingerprint["spec"] == f"nli:{path}"
        steps = Steps(rest[0].step, rest[1].step, judge.step)
        results = asyncio.run(verify_claims(_dag(), claims, steps, VerifyConfig(q=1)))
        assert [r.verdict for r in results] == [want, want]
        assert all(r.reasoning.startswith("NLI (") for r in results)


def _dataset(path: Path) -> Path:
    nodes = [{"id": n.id, "text": n.text, "sources": list(n.sources)} for n in _dag()]
    doc = {
        "format": "veritrail-eval",
        "version": 1,
        "name": "nli-mini",
        "items": [
            {
                "id": "i1",
                "dag": {"nodes": nodes},
                "claims": [
                    {"id": "c1", "text": "The village flooded.", "label": "Fully Supported"},
                    {"id": "c2", "text": "Bob sold a car.", "label": "Not Fully Supported"},
                ],
            }
        ],
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_nli_chunk_baseline_in_eval(entailing: Path, tmp_path: Path) -> None:
    assert "nli" in known_methods()
    ds = load_dataset(_dataset(tmp_path / "ds.json"))
    ctx = BuildContext(model=None, base_config=VerifyConfig())
    method = build_method(f"nli:model={entailing},chunk=8,threshold=0.6", ctx)
    assert method.name == f"NLI {entailing.name} chunk=8 t=0.6"
    run = asyncio.run(run_eval(ds, [method]))
    got = [run.predictions[method.name][k] for k in run.gold]  # dataset order
    assert [p.verdict for p in got] == [Verdict.FULLY_SUPPORTED] * 2
    assert all(p.score is not None and p.score > 0.99 and p.lm_calls == 0 for p in got)
    assert all(p.evidence and {k[0] for k in p.evidence} <= {"r1", "r2"} for p in got)
    assert got[0].detail["chunks"] >= 2  # chunk=8 tokens: each root is cut
    (row,) = summarize(run, bootstrap=10).rows
    assert row.claims == 2 and row.hard.accuracy == 0.5


def test_eval_cli_with_nli_method(entailing: Path, tmp_path: Path) -> None:
    ds = _dataset(tmp_path / "ds.json")
    args = ["eval", str(ds), "--method", f"nli:model={entailing}", "--format", "json"]
    res = CliRunner().invoke(cli, [*args, "--no-plots", "--bootstrap", "10", "--quiet"])
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout)["methods"][0]
    assert row["method"].startswith("NLI ") and row["claims"] == 2
    bad = CliRunner().invoke(cli, ["eval", str(ds), "--method", "nli:model=/nonexistent"])
    assert bad.exit_code == 2 and "no config.json" in bad.output
    nomodel = CliRunner().invoke(cli, ["eval", str(ds), "--method", "nli:chunk=3"])
    assert nomodel.exit_code == 2 and "needs model=PATH" in nomodel.output


def test_verify_cli_with_the_nli_judge(
    contradicting: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopback_model import loopback

    quick = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
    monkeypatch.chdir(tmp_path)
    args = [
        "verify",
        str(quick / "dag.json"),
        "--claims",
        str(quick / "claims.json"),
        "--out",
        "r.json",
        "--judge",
        f"nli:{contradicting}",
    ]
    with loopback(monkeypatch) as srv:  # the LM decomposer and selector; the judge is NLI
        res = CliRunner().invoke(cli, args)
        assert srv.count > 0
    assert res.exit_code == 0, res.output  # verdicts given (all unsupported), no gate set
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert {c["verdict"] for c in report["claims"]} == {"Not Fully Supported"}
    assert all(c["reasoning"].startswith("NLI (") for c in report["claims"])
