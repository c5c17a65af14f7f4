"""`veritrail dag validate FILE` and `veritrail dag stats FILE`.

Both exit with status 2 when the file cannot be read or the DAG is invalid, after printing every
problem. This module imports only the DAG layer, so checking a 100K-node file costs little more
than parsing it (see benchmarks/README.md).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import click

from ..dag import Dag, DagValidationError, load_dag

EXIT_INVALID = 2
"""Exit status for an unreadable file or an invalid DAG."""


@click.group("dag")
def dag() -> None:
    """Check and describe generation DAG files (JSON or JSON Lines; see docs/dag-format.md)."""


def _load_or_exit(file: str, as_json: bool) -> Dag:
    try:
        return load_dag(file)
    except DagValidationError as exc:
        if not as_json:
            # Reported by the group, as `verify` reports it: a file-level problem on one line,
            # else a header naming the file and one indented line per problem; exit 2.
            raise
        doc = {"file": file, "valid": False, "problems": [p.to_dict() for p in exc.problems]}
        click.echo(json.dumps(doc, ensure_ascii=False, indent=2))
        sys.exit(EXIT_INVALID)


def summary(g: Dag) -> dict[str, Any]:
    """Nodes, edges, stages and terminal of a valid DAG (the `validate` line)."""
    stages = sorted({n.stage for n in g})
    return {
        "nodes": len(g),
        "edges": g.edges,
        "roots": len(g.roots),
        "stages": len(stages),
        "stage_range": [stages[0], stages[-1]],
        "stages_given": g.stages_given,
        "terminal": g.terminal,
    }


@dag.command("validate")
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object instead of text.")
def validate(file: str, as_json: bool) -> None:
    """Validate FILE: print a one-line summary, or every problem and exit with status 2."""
    g = _load_or_exit(file, as_json)
    s = summary(g)
    if as_json:
        click.echo(json.dumps({"file": file, "valid": True, **s}, ensure_ascii=False, indent=2))
        return
    how = "given" if s["stages_given"] else "computed"
    click.echo(
        f"OK: {file}: {s['nodes']} nodes, {s['edges']} edges, {s['roots']} roots, "
        f"{s['stages']} stages ({how}), terminal {s['terminal']!r}"
    )


def _spread(values: list[int], ids: list[str]) -> dict[str, Any]:
    if not values:
        return {"count": 0, "mean": 0.0, "median": 0.0, "max": 0, "max_node": None}
    k = max(range(len(values)), key=values.__getitem__)
    return {
        "count": len(values),
        "mean": round(statistics.fmean(values), 2),
        "median": statistics.median(values),
        "max": values[k],
        "max_node": ids[k],
    }


def stats_of(g: Dag) -> dict[str, Any]:
    """Per-stage node and token counts, fan-in and fan-out of a valid DAG."""
    from ..method.tokens import estimate_tokens

    per_nodes: Counter[int] = Counter()
    per_tokens: Counter[int] = Counter()
    per_edges: Counter[int] = Counter()
    fan_in: list[int] = []
    in_ids: list[str] = []
    fan_out: list[int] = []
    out_ids: list[str] = []
    for n in g:
        per_nodes[n.stage] += 1
        per_tokens[n.stage] += estimate_tokens(n.text)
        per_edges[n.stage] += len(n.sources)
        if n.sources:
            fan_in.append(len(n.sources))
            in_ids.append(n.id)
        if n.id != g.terminal:
            fan_out.append(len(g.children(n.id)))
            out_ids.append(n.id)
    stages = [
        {
            "stage": st,
            "nodes": per_nodes[st],
            "tokens": per_tokens[st],
            "mean_fan_in": round(per_edges[st] / per_nodes[st], 2),
        }
        for st in sorted(per_nodes)
    ]
    term = g.node(g.terminal)
    return {
        **summary(g),
        "tokens": sum(per_tokens.values()),
        "terminal_stage": term.stage,
        "terminal_sources": len(term.sources),
        "per_stage": stages,
        "fan_in": _spread(fan_in, in_ids),
        "fan_out": _spread(fan_out, out_ids),
    }


@dag.command("stats")
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object instead of a table.")
def stats(file: str, as_json: bool) -> None:
    """Nodes and estimated tokens per stage, roots, terminal, fan-in and fan-out of FILE."""
    g = _load_or_exit(file, as_json)
    s = stats_of(g)
    if as_json:
        click.echo(json.dumps({"file": file, **s}, ensure_ascii=False, indent=2))
        return
    how = "given" if s["stages_given"] else "computed"
    click.echo(
        f"{Path(file).name}: {s['nodes']:,} nodes, {s['edges']:,} edges, ~{s['tokens']:,} tokens"
    )
    click.echo(
        f"roots: {s['roots']:,}   terminal: {s['terminal']!r} (stage {s['terminal_stage']}, {s['terminal_sources']} sources)"
    )
    click.echo(f"stages ({how}):")
    click.echo(f"  {'stage':>5}  {'nodes':>9}  {'tokens (est.)':>13}  {'mean fan-in':>11}")
    for row in s["per_stage"]:
        click.echo(
            f"  {row['stage']:>5}  {row['nodes']:>9,}  {row['tokens']:>13,}  {row['mean_fan_in']:>11.2f}"
        )
    for key, what in (
        ("fan_in", "sources per non-root node"),
        ("fan_out", "children per non-terminal node"),
    ):
        f = s[key]
        click.echo(
            f"{key.replace('_', '-')} ({what}): mean {f['mean']:.2f}, median {f['median']:g}, "
            f"max {f['max']} ({f['max_node']})"
        )
