"""Judge–human agreement on reviewed runs (`veritrail eval reviewed:PATH`): Cohen's kappa on a
hand-computed example and against scikit-learn, the confusion matrix, the reviewed dataset, and
the command's table."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from runsynth import write_run
from veritrail.cli.main import cli
from veritrail.detectors.base import Detection
from veritrail.eval.agreement import (
    LABELS,
    NO_VERDICT,
    RUN_JUDGE,
    agreement,
    agreements,
    cohen_kappa,
    confusion_matrix,
    render_markdown,
)
from veritrail.eval.datasets import DatasetError, claim_key, open_dataset
from veritrail.eval.runner import EvalRun
from veritrail.records import Verdict
from veritrail.runs.reviewing import add_review

FS, NFS, INC = Verdict.FULLY_SUPPORTED, Verdict.NOT_FULLY_SUPPORTED, Verdict.INCONCLUSIVE


def hand_example() -> list[tuple[Verdict, Verdict]]:
    """(human, judge): FS/FS 4, FS/NFS 1, NFS/NFS 3, NFS/FS 1, Inconclusive/FS 1."""
    return [(FS, FS)] * 4 + [(FS, NFS)] + [(NFS, NFS)] * 3 + [(NFS, FS)] + [(INC, FS)]


def test_kappa_of_a_hand_computed_example() -> None:
    # p_o = 7/10; rows (human) FS 5, NFS 4, Inc 1; columns (judge) FS 6, NFS 4, Inc 0;
    # p_e = (5*6 + 4*4 + 1*0) / 100 = 0.46; kappa = (0.7 - 0.46) / (1 - 0.46) = 0.2400 / 0.54.
    ag = agreement("judge", hand_example())
    assert ag.n == 10 and ag.observed == pytest.approx(0.7)
    assert ag.kappa == pytest.approx(0.24 / 0.54)
    assert ag.matrix[0][:3] == (4, 1, 0) and ag.matrix[1][:3] == (1, 3, 0)
    assert ag.matrix[2][:3] == (1, 0, 0) and all(row[3] == 0 for row in ag.matrix)


def test_kappa_edge_cases() -> None:
    assert cohen_kappa([[0, 0], [0, 0]]) is None  # no claim
    assert cohen_kappa([[5, 0], [0, 0]]) is None  # one label for everything: undefined
    assert cohen_kappa([[3, 0], [0, 2]]) == pytest.approx(1.0)
    assert cohen_kappa([[0, 3], [2, 0]]) < 0  # worse than chance
    ag = agreement("j", [(FS, None), (NFS, NFS)])
    assert ag.matrix[LABELS.index(FS.value)][LABELS.index(NO_VERDICT)] == 1
    assert agreement("j", []).kappa is None and agreement("j", []).observed is None


def test_kappa_equals_scikit_learns() -> None:
    from sklearn.metrics import cohen_kappa_score
    from sklearn.metrics import confusion_matrix as sk_confusion

    rng = random.Random(7)
    labels = [FS, NFS, INC]
    for n in (5, 37, 400):
        human = [rng.choice(labels) for _ in range(n)]
        # A judge that agrees two times in three, else guesses (sometimes no verdict).
        judge = [h if rng.random() < 0.66 else rng.choice([*labels, None]) for h in human]
        ag = agreement("j", list(zip(human, judge, strict=True)))
        h = [x.value for x in human]
        j = [NO_VERDICT if x is None else x.value for x in judge]
        assert ag.kappa == pytest.approx(cohen_kappa_score(h, j), abs=1e-12)
        expected = sk_confusion(h, j, labels=list(LABELS)).tolist()
        assert [list(r) for r in ag.matrix] == expected == confusion_matrix(h, j)


# -- reviewed runs as a dataset -------------------------------------------------------------------


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    a = write_run(root, "a-000000000001", claims=10)  # c4 and c9 Not Fully Supported
    b = write_run(root, "b-000000000002", claims=5, seed=3)
    write_run(root, "c-000000000003", claims=5)  # nobody reviewed it
    add_review(a, "c4", "not-supported", "right", author="ana")
    add_review(a, "c0", "not-supported", "wrong place", author="ana")
    add_review(a, "c1", "inconclusive", "cannot tell", author="bo")
    add_review(a, "c1", "supported", "on a second look", author="bo")  # the latest counts
    add_review(b, "c4", "supported", "it is there", author="ana")
    return root


def test_reviewed_runs_are_a_dataset_labelled_by_the_reviews(runs: Path) -> None:
    ds = open_dataset(f"reviewed:{runs}")
    assert ds.meta["source"] == "reviewed" and ds.meta["runs"] == 3
    assert [it.id for it in ds.items] == ["a-000000000001", "b-000000000002"]
    a = {c.id: c for c in ds.items[0].claims}
    assert set(a) == {"c0", "c1", "c4"} and a["c1"].label is FS and a["c0"].label is NFS
    assert a["c0"].meta["model_verdict"] == "Fully Supported"
    assert ds.items[0].dag_paths and Path(ds.items[0].dag_paths[0]).is_file()
    one = open_dataset(f"reviewed:{runs / 'b-000000000002'}")
    assert [it.id for it in one.items] == ["b-000000000002"] and one.n_claims == 1


def test_no_reviewed_claim_or_no_run_is_a_dataset_error(tmp_path: Path, runs: Path) -> None:
    with pytest.raises(DatasetError, match="no reviewed claim"):
        open_dataset(f"reviewed:{runs / 'c-000000000003'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no run directory"):
        open_dataset(f"reviewed:{tmp_path / 'empty'}")
    with pytest.raises(DatasetError, match="not a directory"):
        open_dataset(f"reviewed:{tmp_path / 'missing'}")


def test_agreement_of_the_runs_judge_and_of_a_method(runs: Path) -> None:
    ds = open_dataset(f"reviewed:{runs}")
    # judge of the runs: c4 NFS/NFS, c0 human NFS judge FS, c1 FS/FS, b/c4 human FS judge NFS.
    (own,) = agreements(ds)
    assert own.judge == RUN_JUDGE and own.n == 4 and own.observed == pytest.approx(0.5)
    assert own.kappa == pytest.approx(0.0)
    # A method that says Not Fully Supported to everything but one claim it has no verdict for.
    preds = {
        claim_key(it.id, c.id): Detection("always-nfs", claim_key(it.id, c.id), NFS)
        for it in ds.items
        for c in it.claims
        if not (it.id.startswith("b") and c.id == "c4")
    }
    run = EvalRun(ds.name, {}, ["always-nfs"], {"always-nfs": preds})
    _, method = agreements(ds, run)
    assert method.judge == "always-nfs" and method.n == 4 and method.observed == pytest.approx(0.5)
    assert method.matrix[LABELS.index(FS.value)][LABELS.index(NO_VERDICT)] == 1
    md = render_markdown([own, method])
    assert "| judge of the runs | 4 | 0.500 | 0.000 |" in md and "no verdict" in md


def test_eval_command_prints_the_agreement_table(tmp_path: Path, runs: Path) -> None:
    res = CliRunner().invoke(cli, ["eval", f"reviewed:{runs}", "--format", "markdown"])
    assert res.exit_code == 0, res.output
    assert "| judge of the runs | 4 | 0.500 | 0.000 |" in res.output
    assert "| Not Fully Supported | 1 | 1 | 0 |" in res.output
    res = CliRunner().invoke(
        cli, ["eval", f"reviewed:{runs}", "--format", "json", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)["agreement"][0]
    assert doc["n"] == 4 and doc["cohen_kappa"] == pytest.approx(0.0)
    assert json.loads((tmp_path / "o" / "agreement.json").read_text())[0]["n"] == 4
    assert (tmp_path / "o" / "agreement.md").is_file()
    res = CliRunner().invoke(cli, ["eval", f"reviewed:{runs}"])
    assert res.exit_code == 0 and "Cohen's kappa" in res.output
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(cli, ["eval", f"reviewed:{tmp_path / 'empty'}"])
    assert res.exit_code == 2 and "no run directory" in res.output


def test_eval_runs_methods_on_reviewed_runs_and_adds_their_agreement(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopback_model import loopback

    with loopback(monkeypatch):
        res = CliRunner().invoke(
            cli,
            [
                "eval",
                f"reviewed:{runs}",
                "--model",
                "openai/loopback",
                "--method",
                "veritrail:q=1",
                "--format",
                "json",
                "--no-plots",
                "--bootstrap",
                "10",
                "--quiet",
            ],
        )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["claims"] == 4 and len(doc["methods"]) == 1
    own, method = doc["agreement"]
    assert own["judge"] == RUN_JUDGE and own["n"] == 4
    assert method["judge"] == doc["methods"][0]["method"] and method["n"] == 4
    assert sum(map(sum, method["confusion_matrix"])) == 4
