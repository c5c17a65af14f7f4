"""`veritrail eval`: compare VeriTrail with the baselines on a labelled dataset (docs/evaluation.md)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click

from ..display import unpriced_models
from ..method.config import VerifyConfig
from .common import budget_options, cache_option
from .common import fail as _fail

# The method's defaults come from `VerifyConfig` (one source for every default, issue 15).
_DEFAULT = VerifyConfig()

_INJECTED_METHODS = ("veritrail:q=1", "earliest-stage", "rag:k=15", "direct")
"""The methods of `eval injected:DIR` with a model and no --method (docs/inject.md)."""


def _require_eval_extra() -> None:
    """Exit 2 with one line naming the `eval` extra when a module it installs is missing (the
    metrics need numpy): before reading the dataset, never a traceback."""
    import importlib.util

    for name in ("numpy",):
        if importlib.util.find_spec(name) is None:
            _fail(
                f"veritrail eval needs the `eval` extra ({name} is not installed): "
                "pip install 'veritrail[eval]'"
            )


@click.command("eval")
@click.argument("dataset")
@click.option(
    "--method",
    "methods",
    multiple=True,
    help="kind[:key=value,...]; kinds: veritrail (q=, evidence=), oracle (q=), rag (k=, embedder=), "
    "direct (budget=, seed=), g2l, nli (model=, chunk=, threshold=, batch=), sirg (classifier=, "
    "..., earliest-stage (coverage=); docs/evaluation.md). Repeatable. Default: oracle without --model; "
    "veritrail:q=1, veritrail:q=3, rag:k=15, direct with one.",
)
@click.option(
    "--model", "model_name", default=None, help="provider/model used by every LM-based method."
)
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint (vLLM, Ollama, ...).")
@cache_option
@click.option(
    "--prices",
    "prices_path",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="JSON price table for $/claim.",
)
@click.option("--threads", type=int, default=None, help="CPU threads of the embedded local/ model.")
@click.option("--limit", type=int, default=None, help="Use only the first N claims.")
@click.option(
    "--sentences-per-chunk",
    type=int,
    default=10,
    show_default=True,
    help="WiCE: article sentences per root node.",
)
@click.option(
    "--q",
    "default_q",
    type=int,
    default=_DEFAULT.q,
    show_default=True,
    help="q for methods that give none.",
)
@click.option(
    "--samples",
    type=int,
    default=_DEFAULT.samples,
    show_default=True,
    help="Soft prediction: samples per call (docs/method.md#soft-prediction).",
)
@click.option(
    "--threshold",
    type=int,
    default=_DEFAULT.threshold,
    show_default=True,
    help="Soft prediction: votes needed.",
)
@click.option(
    "--embedder",
    type=click.Choice(["minilm-onnx", "minilm-st", "hashing"]),
    default="minilm-onnx",
    show_default=True,
    help="RAG embeddings (hashing = lexical fallback, not semantic).",
)
@click.option(
    "--max-decomposition-calls",
    type=int,
    default=_DEFAULT.max_decomposition_calls,
    show_default=True,
    help="VeriTrail: sub-claim decomposition calls per claim (docs/method.md#sub-claims).",
)
@click.option(
    "--direct-budget",
    type=int,
    default=None,
    help="Direct verification: token budget for the roots.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--bootstrap",
    type=int,
    default=1000,
    show_default=True,
    help="Bootstrap iterations for stage CIs.",
)
@click.option("--parallel-items", type=int, default=2, show_default=True)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write results.json, table.md and plots here.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "markdown", "json"]),
    default="table",
    show_default=True,
)
@click.option("--no-plots", is_flag=True, help="Skip the PNG/SVG plots.")
@click.option(
    "--quiet", is_flag=True, help="No progress lines on stderr (the results are still printed)."
)
@click.option(
    "--progress-interval",
    type=click.FloatRange(min=1.0),
    default=30.0,
    show_default=True,
    help="Seconds between progress lines when stderr is not a terminal.",
)
@click.option(
    "--save-dataset",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the (converted) dataset in our format and stop.",
)
@budget_options
def eval_cmd(
    dataset: str,
    methods: tuple[str, ...],
    model_name: str | None,
    base_url: str | None,
    cache: str | None,
    prices_path: str | None,
    threads: int | None,
    limit: int | None,
    sentences_per_chunk: int,
    default_q: int,
    samples: int,
    threshold: int,
    embedder: str,
    max_decomposition_calls: int,
    direct_budget: int | None,
    seed: int,
    bootstrap: int,
    parallel_items: int,
    out_dir: str | None,
    fmt: str,
    no_plots: bool,
    quiet: bool,
    progress_interval: float,
    save_dataset: str | None,
    max_cost: float | None,
    max_tokens: int | None,
) -> None:
    """Run detectors on DATASET and print a results table (rows = methods, columns = metrics).

    DATASET is a file in our format (.json/.jsonl), a WiCE claim file, FABLES.json, a FABLES+ /
    DiverseSumm+ style directory, or one of those prefixed with wice:, fables:, layout:, veritrail:.
    injected:DIR (written by `veritrail inject`) reports recall of the injected claims, stage
    and node accuracy, and false alarms (docs/inject.md).
    reviewed:PATH (a run directory or a runs directory) takes the claims people reviewed
    (`veritrail review`) and prints the judge–human agreement (confusion matrix, Cohen's kappa)
    of the runs' own verdicts and of each --method (none by default).
    """
    _require_eval_extra()
    from ..detectors.registry import BuildContext, build_method
    from ..eval.datasets import DatasetError, open_dataset
    from ..eval.datasets import save_dataset as write_dataset
    from ..eval.runner import EvalProgress, run_eval, summarize
    from ..eval.tables import render_markdown, render_terminal, summary_to_json

    try:
        ds = open_dataset(dataset, sentences_per_chunk=sentences_per_chunk)
    except (DatasetError, OSError, ValueError) as exc:
        _fail(str(exc))
    if limit is not None:
        ds = ds.head(limit)
    from ..eval import agreement as agree

    if agree.is_reviewed(ds) and not methods and not save_dataset:
        _print_agreement(agree.agreements(ds), fmt, out_dir)
        return
    if save_dataset:
        write_dataset(ds, save_dataset)
        click.echo(f"{len(ds.items)} items, {ds.n_claims} claims written to {save_dataset}")
        return
    try:
        # Only what the flags set; every other setting is VerifyConfig's own default.
        base = VerifyConfig(
            q=default_q,
            samples=samples,
            threshold=threshold,
            max_decomposition_calls=max_decomposition_calls,
        )
    except ValueError as exc:
        _fail(str(exc))

    model: Any = None
    if base_url and not model_name:
        _fail("--base-url needs --model (the model the endpoint serves)")
    if model_name:
        from ..run.model_spec import ModelSpec
        from ..run.settings import model_cache

        spec = ModelSpec(
            model_name,
            base_url=base_url,
            cache=model_cache(cache),
            prices=prices_path,
            threads=threads,
        )
        try:
            model = spec.build()
        except (ValueError, RuntimeError, OSError) as exc:
            _fail(str(exc))
    budget = _budget(max_cost, max_tokens)
    if model is not None and budget is not None:
        from ..lm.budget import NoPriceError, check_priced

        try:
            check_priced(model.name, model.price, budget)  # before any call: exit 2
        except NoPriceError as exc:
            asyncio.run(model.aclose())
            _fail(str(exc))
        model.budget = budget
    injected = ds.meta.get("source") == "injected"
    if injected and not methods:
        # Injected hallucinations: VeriTrail against the stage baseline (and RAG, direct).
        methods = _INJECTED_METHODS if model is not None else ("earliest-stage",)
    specs = list(methods) or (
        ["veritrail:q=1", "veritrail:q=3", "rag:k=15", "direct"]
        if model is not None
        else ["oracle"]
    )
    ctx = BuildContext(
        model=model,
        base_config=base,
        samples=samples,
        threshold=threshold,
        default_embedder=embedder,
        token_budget=direct_budget,
        seed=seed,
    )
    try:
        built = [build_method(s, ctx) for s in specs]
    except (ValueError, RuntimeError, OSError) as exc:
        _fail(str(exc))

    # Progress as `verify` shows it (issue 19): items done per method, calls, tokens, dollars,
    # elapsed and time left, on stderr. A terminal gets one line rewritten in place every
    # second; a file or pipe gets a line every --progress-interval seconds and one at the end.
    # A model with no known price counts 0 dollars: progress and tables say "unknown" instead.
    unpriced = unpriced_models(model.notes) if model is not None else ()
    figures = EvalProgress([m.name for m in built], len(ds.items))
    figures.unpriced = unpriced
    tty = sys.stderr.isatty()
    if model is not None:
        chained = model.on_call

        def on_call(event: Any) -> None:
            figures.call(event)
            if chained is not None:
                chained(event)

        model.on_call = on_call

    def show(final: bool = False) -> None:
        if quiet:
            return
        if tty:
            click.echo("\r\x1b[K" + figures.line(), err=True, nl=final)
        else:
            click.echo(figures.line(), err=True)

    async def ticker() -> None:
        while True:
            await asyncio.sleep(1.0 if tty else progress_interval)
            show()

    async def go() -> Any:
        task = asyncio.create_task(ticker())
        try:
            return await run_eval(
                ds, built, max_parallel_items=parallel_items, progress=figures.item_done
            )
        finally:
            task.cancel()
            show(final=True)
            if model is not None:
                await model.aclose()

    run = asyncio.run(go())
    if injected:
        _print_injected(ds, run, fmt, out_dir, model_name, bootstrap, seed)
        _budget_stop(budget, ds.n_claims)
        return
    summary = summarize(run, bootstrap=bootstrap, seed=seed)
    doc = summary_to_json(summary, run)
    doc["meta"] = {**doc["meta"], "methods": specs, "model": model_name, "embedder": embedder}
    if unpriced:
        doc["meta"]["notes"] = list(model.notes)

    if out_dir:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(
            json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8"
        )
        (out / "table.md").write_text(render_markdown(summary, unpriced=unpriced), encoding="utf-8")
        if not no_plots:
            from ..eval.plots import plot_error_stages, plot_precision_recall

            try:
                plot_precision_recall(summary, out / "precision_recall")
                plot_error_stages(summary, out / "error_stages")
            except RuntimeError as exc:  # matplotlib missing: the tables are still written
                click.echo(f"warning: {exc}", err=True)

    if agree.is_reviewed(ds):
        ags = agree.agreements(ds, run)
        doc["agreement"] = [a.to_json() for a in ags]
        if out_dir:
            (Path(out_dir) / "results.json").write_text(
                json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8"
            )
    if fmt == "json":
        extra = {"agreement": doc["agreement"]} if "agreement" in doc else {}
        click.echo(json.dumps({**summary_to_json(summary), **extra}, indent=1, ensure_ascii=False))
    elif fmt == "markdown":
        click.echo(render_markdown(summary, unpriced=unpriced), nl=False)
    else:
        from rich.console import Console

        console = Console()
        # A wide table: when piped, do not squeeze it into the default 80 columns.
        Console(width=console.width if console.is_terminal else 220).print(
            render_terminal(summary, unpriced=unpriced)
        )
    if agree.is_reviewed(ds) and fmt != "json":
        _print_agreement(agree.agreements(ds, run), fmt, None)
    _budget_stop(budget, ds.n_claims)


def _budget(max_cost: float | None, max_tokens: int | None) -> Any:
    """The eval's spending cap: the flags, else `VERITRAIL_MAX_COST` / `VERITRAIL_MAX_TOKENS`
    (as for verify; eval reads no TOML file); None when neither is set."""
    from .. import environment
    from ..lm.budget import Budget
    from ..run.settings import SettingsError, coerce_setting

    given: dict[str, Any] = {"max_cost": max_cost, "max_tokens": max_tokens}
    try:
        for name, value in list(given.items()):
            if value is not None:
                given[name] = coerce_setting(name, value, f"option --{name.replace('_', '-')}")
                continue
            raw = environment.setting_value(name)
            if raw is not None and raw.strip():
                var = environment.setting_variable(name)
                given[name] = coerce_setting(name, raw, f"environment {var}")
    except SettingsError as exc:
        _fail(str(exc))
    if given["max_cost"] is None and given["max_tokens"] is None:
        return None
    return Budget(max_cost=given["max_cost"], max_tokens=given["max_tokens"])


def _budget_stop(budget: Any, claims: int) -> None:
    """Exit 3 with one line when the cap refused calls: the claims after it have no answer."""
    if budget is None or budget.reached is None:
        return
    from ..lm.budget import raise_cap

    click.echo(
        f"{budget.reached}: calls after it were refused, so some of the {claims} claims were not "
        "verified (failures in the table); run the same command with a higher cap "
        f"({raise_cap(budget)}): the calls made are cached",
        err=True,
    )
    sys.exit(3)


def _print_agreement(ags: list[Any], fmt: str, out_dir: str | None) -> None:
    """The judge–human agreement of a reviewed dataset, in `fmt`; with `out_dir`, also
    agreement.json and agreement.md there."""
    from ..eval.agreement import render_markdown, render_terminal

    docs = [a.to_json() for a in ags]
    if out_dir:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "agreement.json").write_text(
            json.dumps(docs, indent=1, ensure_ascii=False), encoding="utf-8"
        )
        (out / "agreement.md").write_text(render_markdown(ags), encoding="utf-8")
    if fmt == "json":
        click.echo(json.dumps({"agreement": docs}, indent=1, ensure_ascii=False))
    elif fmt == "markdown":
        click.echo(render_markdown(ags), nl=False)
    else:
        from rich.console import Console

        console = Console()
        Console(width=console.width if console.is_terminal else 220).print(render_terminal(ags))


def _print_injected(
    ds: Any,
    run: Any,
    fmt: str,
    out_dir: str | None,
    model_name: str | None,
    bootstrap: int,
    seed: int,
) -> None:
    """The figures of `eval injected:DIR` (docs/inject.md), in `fmt`; with `out_dir`, also
    injected.json and injected.md there."""
    from ..eval.injected import render_markdown, render_terminal, summarize_injected
    from ..lm.demo import DEMO_LABEL, is_demonstration

    dags = {item.id: ds.dag(item) for item in ds.items}
    summary = summarize_injected(
        run,
        roots={i: frozenset(d.roots) for i, d in dags.items()},
        terminals={i: d.terminal for i, d in dags.items()},
        resamples=bootstrap,
        seed=seed,
        label=f"{model_name}: {DEMO_LABEL}" if is_demonstration(model_name) else None,
    )
    doc = {**summary.to_json(), "model": model_name}
    if out_dir:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "injected.json").write_text(
            json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        (out / "injected.md").write_text(render_markdown(summary), encoding="utf-8")
    if fmt == "json":
        click.echo(json.dumps(doc, indent=1, ensure_ascii=False))
    elif fmt == "markdown":
        click.echo(render_markdown(summary), nl=False)
    else:
        from rich.console import Console

        console = Console()
        Console(width=console.width if console.is_terminal else 220).print(render_terminal(summary))
