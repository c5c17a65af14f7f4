"""veritrail against RAGAS and DeepEval on the same answers and the same server (issue 38, item 6).

    python benchmarks/bench_peers.py [--sizes 10,50,200] [--quick] [--latency 0.2]
                                     [--concurrency 16] [--seed 0] [--no-faults]
                                     [--fault-rate 0.15] [--tools veritrail-check,...]
                                     [--cache-dir ~/.cache/veritrail-bench] [--out FILE]

The corpus (`peers_corpus.py`): per answer 5 sentences over 3 source paragraphs, about 30% of
the sentences with one content word changed, deterministic from `--seed`. Four tools run on it,
one after the other, each against its own `FakeOpenAIServer` on 127.0.0.1 with the same fixed
latency per call (`--latency`, 200 ms) and the same concurrency:

* `veritrail-check`: `veritrail batch` over one DAG per answer in the layout `veritrail check`
  writes (source paragraphs -> answer), claims extracted from the answer;
* `veritrail-2stage`: the same over sources -> chunk summaries -> answer;
* `ragas`: RAGAS 0.4.3 `Faithfulness` (statement generator + NLI statement prompt);
* `deepeval`: DeepEval 4.3.1 `FaithfulnessMetric` (truths, claims, verdicts, reason).

RAGAS and DeepEval run in virtualenvs this script creates once under `--cache-dir` (pinned
versions, reused afterwards, never installed into the environment running veritrail), through
`peers_run_ragas.py` / `peers_run_deepeval.py` started with the venv's python. The server answers
each tool by its own parser (`peers_responders.py`) with one rule: a sentence is one claim,
supported when all its content words occur in the context (veritrail: `veritrail.lm.overlap`).
veritrail is driven only through its CLI, so the figures are whatever the current code does.

Counted at the server: calls, characters of prompt (message text), schema (`response_format`,
`tools`) and completion; tokens = characters / 4. Claims: veritrail's reported claim count,
for the peers the statements/claims their extraction returned (5 per answer here). Measured on
the client process (`os.wait4`): wall (process start to exit, imports included), the time to
its first model call, CPU (user + system) and peak RSS.

The fault table (at the smallest size, unless `--no-faults`): the same runs with the server
answering `--fault-rate` of the calls with HTTP 429, HTTP 500, or a 200 whose JSON content is
cut in half (seeded by the request, so every run gets the same faults). For each tool: exit
status, answers/claims that got a result or an error, and silent changes (a result given as
usual that differs from the fault-free run's).

Results are printed and, with `--out`, written as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers_corpus import Item, make_corpus, write_batch, write_corpus
from peers_responders import RESPONDERS, Counted, tally

from veritrail.testing.fake_openai_server import FakeOpenAIServer, FaultKind

HERE = Path(__file__).resolve().parent
PEERS = {"ragas": ("ragas", "0.4.3"), "deepeval": ("deepeval", "4.3.1")}
TOOLS = ("veritrail-check", "veritrail-2stage", "ragas", "deepeval")
MODEL = "gpt-4o-mini"  # a name every tool knows (DeepEval picks structured outputs by it)
FAULTS = {
    "429": FaultKind.RATE_LIMIT,
    "500": FaultKind.SERVER_ERROR,
    "truncated JSON": FaultKind.TRUNCATED_CONTENT,
}


# -- the peers' virtualenvs ---------------------------------------------------------------------


def peer_python(tool: str, cache_dir: Path) -> Path:
    """The python of `tool`'s virtualenv, created and installed on first use (pinned)."""
    package, version = PEERS[tool]
    venv = cache_dir / f"{package}-{version}"
    python = venv / "bin" / "python"
    if python.exists() and _installed_version(python, package) == version:
        return python
    print(f"creating {venv} ({package}=={version}; once) ...", flush=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"{package}=={version}"],
        check=True,
    )
    got = _installed_version(python, package)
    if got != version:
        raise SystemExit(f"error: {package} {version} did not install in {venv} (got {got})")
    return python


def _installed_version(python: Path, package: str) -> str | None:
    proc = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def veritrail_command() -> list[str]:
    """`veritrail` of the environment running this script."""
    exe = Path(sys.executable).parent / "veritrail"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "from veritrail.cli.main import main; main()"]


# -- one run ------------------------------------------------------------------------------------


def _child_env(base_url: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERITRAIL_", "OPENAI_")) and k.lower() not in _PROXIES
    }
    env.update(
        {
            "OPENAI_API_KEY": "sk-bench-loopback",
            "OPENAI_BASE_URL": base_url,
            "NO_PROXY": "127.0.0.1",
            "VERITRAIL_PRICES": "",
            # The peers phone home unless told not to; nothing may leave 127.0.0.1.
            "DEEPEVAL_TELEMETRY_OPT_OUT": "1",
            "RAGAS_DO_NOT_TRACK": "true",
            "HF_HUB_OFFLINE": "1",
            "PYTHONWARNINGS": "ignore",
        }
    )
    return env


_PROXIES = {"http_proxy", "https_proxy", "all_proxy"}


def run_tool(
    tool: str,
    items: list[Item],
    work: Path,
    *,
    latency: float,
    concurrency: int,
    cache_dir: Path,
    fault: FaultKind | None = None,
    fault_rate: float = 0.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Run `tool` over `items` against a fresh loopback server; the counted figures."""
    work.mkdir(parents=True, exist_ok=True)
    kind = "veritrail" if tool.startswith("veritrail") else tool
    responder = Counted(RESPONDERS[kind])
    rates = {fault: fault_rate} if fault is not None else None
    with FakeOpenAIServer(responder, latency=latency, fault_rates=rates, seed=seed) as srv:
        if kind == "veritrail":
            layout = "check" if tool == "veritrail-check" else "two_stage"
            manifest = write_batch(items, layout, work)
            cmd = [
                *veritrail_command(),
                "batch",
                str(manifest),
                "--model",
                f"openai/{MODEL}",
                "--base-url",
                srv.base_url,
                "--concurrency",
                str(concurrency),
                "--cache",
                "off",
                "--summary-dir",
                str(work),
                "--quiet",
            ]
        else:
            corpus = work / "corpus.json"
            write_corpus(items, corpus)
            cmd = [
                str(peer_python(tool, cache_dir)),
                str(HERE / f"peers_run_{tool}.py"),
                str(corpus),
                str(work / "result.json"),
                "--base-url",
                srv.base_url,
                "--concurrency",
                str(concurrency),
                "--model",
                MODEL,
            ]
        measured = _measure(cmd, _child_env(srv.base_url), work, srv)
        requests = srv.requests
        faults_served = len(srv.faults_served)
    prompt, schema = tally(requests)
    outcome = _veritrail_outcome(work) if kind == "veritrail" else _peer_outcome(work, items)
    return {
        "tool": tool,
        "answers": len(items),
        "calls": len(requests),
        "prompt_chars": prompt,
        "schema_chars": schema,
        "completion_chars": responder.completion_chars,
        "unrecognised_prompts": responder.unrecognised,
        "faults_served": faults_served,
        **measured,
        **outcome,
    }


def _measure(
    cmd: list[str], env: dict[str, str], work: Path, srv: FakeOpenAIServer
) -> dict[str, Any]:
    """Run `cmd`; wall, time to the first request at `srv`, CPU and peak RSS of the child."""
    out = open(work / "stdout.txt", "wb")  # noqa: SIM115 - closed below, after the child exits
    err = open(work / "stderr.txt", "wb")  # noqa: SIM115
    t0 = time.perf_counter()
    first: list[float] = []

    def watch() -> None:
        # Waits on the server's arrival condition: no polling, no race with the run.
        if srv.wait_for_requests(1, timeout=3600):
            first.append(time.perf_counter() - t0)

    import threading

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, cwd=work)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.close()
    err.close()
    watcher.join(timeout=0.1)
    return {
        "exit": proc.returncode,
        "wall_s": round(wall, 3),
        "first_call_s": round(first[0], 3) if first else None,
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # Linux: kilobytes
        "stderr_tail": (work / "stderr.txt").read_text(errors="replace")[-600:],
    }


def _veritrail_outcome(work: Path) -> dict[str, Any]:
    """Claims, verdicts and errors from the batch's reports (per claim: job, text, verdict)."""
    summary_path = work / "batch-summary.json"
    claims: dict[str, list[list[str | None]]] = {}
    if summary_path.exists():
        for job in json.loads(summary_path.read_text())["jobs"]:
            out = Path(job["out"])
            if out.exists():
                report = json.loads(out.read_text())
                claims[job["id"]] = [
                    [c["text"], c["verdict"] if not c.get("error") else None]
                    for c in report["claims"]
                ]
    n = sum(len(v) for v in claims.values())
    errored = sum(1 for v in claims.values() for _, verdict in v if verdict is None)
    return {
        "claims": n,
        "claims_errored": errored,
        "answers_done": sum(1 for v in claims.values() if all(x[1] is not None for x in v)),
        "results": claims,
    }


def _peer_outcome(work: Path, items: list[Item]) -> dict[str, Any]:
    """Per-answer scores of a peer (None = the answer got no score)."""
    path = work / "result.json"
    data = json.loads(path.read_text()) if path.exists() else {"crashed": "no result file"}
    scores: dict[str, float | None] = {it.id: None for it in items}
    for row in data.get("answers", []):
        score = row.get("score")
        ok = score is not None and not (isinstance(score, float) and math.isnan(score))
        scores[row["id"]] = float(score) if ok and not row.get("error") else None
    done = sum(1 for s in scores.values() if s is not None)
    return {
        # Each peer's extraction returns one statement per sentence here (5 per answer).
        "claims": sum(len(it.answer_sentences) for it in items),
        "answers_done": done,
        "crashed": data.get("crashed"),
        "results": scores,
    }


# -- figures ------------------------------------------------------------------------------------


def figures(r: dict[str, Any]) -> dict[str, float]:
    """Per-answer and per-claim figures of one run (tokens = characters / 4)."""
    answers = max(1, r["answers"])
    claims = max(1, r["claims"])
    p, s, c = (r[k] / 4 for k in ("prompt_chars", "schema_chars", "completion_chars"))
    return {
        "calls_per_answer": r["calls"] / answers,
        "tokens_per_claim": (p + s + c) / claims,
        "prompt_per_claim": p / claims,
        "schema_per_claim": s / claims,
        "completion_per_claim": c / claims,
        "tokens_per_answer": (p + s + c) / answers,
    }


def print_size(n: int, runs: dict[str, dict[str, Any]]) -> None:
    print(f"\n== {n} answers ==")
    head = (
        f"{'tool':<17}{'exit':>5}{'calls/ans':>10}{'tok/claim (p+s+c)':>28}{'tok/ans':>9}"
        f"{'wall s':>8}{'1st call':>9}{'CPU s':>7}{'RSS MB':>8}"
    )
    print(head)
    for tool, r in runs.items():
        f = figures(r)
        split = (
            f"{f['tokens_per_claim']:,.0f} ({f['prompt_per_claim']:,.0f}+"
            f"{f['schema_per_claim']:,.0f}+{f['completion_per_claim']:,.0f})"
        )
        first = f"{r['first_call_s']:.1f}" if r["first_call_s"] is not None else "-"
        print(
            f"{tool:<17}{r['exit']:>5}{f['calls_per_answer']:>10.1f}{split:>28}"
            f"{f['tokens_per_answer']:>9,.0f}{r['wall_s']:>8.1f}{first:>9}{r['cpu_s']:>7.1f}"
            f"{r['peak_rss_mb']:>8.0f}"
        )
        if r["unrecognised_prompts"]:
            print(f"  ! {r['unrecognised_prompts']} prompts the responder did not recognise")
    for vt in ("veritrail-check", "veritrail-2stage"):
        if vt not in runs:
            continue
        for peer in ("ragas", "deepeval"):
            if peer not in runs:
                continue
            a, b = figures(runs[vt]), figures(runs[peer])
            print(
                f"  {vt}/{peer}: calls/answer x{_ratio(a['calls_per_answer'], b['calls_per_answer'])}"
                f", tokens/claim x{_ratio(a['tokens_per_claim'], b['tokens_per_claim'])}"
                f", tokens/answer x{_ratio(a['tokens_per_answer'], b['tokens_per_answer'])}"
                f", wall x{_ratio(runs[vt]['wall_s'], runs[peer]['wall_s'])}"
                f", CPU x{_ratio(runs[vt]['cpu_s'], runs[peer]['cpu_s'])}"
                f", RSS x{_ratio(runs[vt]['peak_rss_mb'], runs[peer]['peak_rss_mb'])}"
            )


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


# (name, numerator tool, denominator tool, figure, limit, smallest size it applies at)
TARGETS = (
    ("check tokens/answer <= 2x RAGAS", "veritrail-check", "ragas", "tokens_per_answer", 2.0, 0),
    (
        "check calls/answer <= 2x DeepEval",
        "veritrail-check",
        "deepeval",
        "calls_per_answer",
        2.0,
        0,
    ),
    ("2-stage tokens/answer <= 3x RAGAS", "veritrail-2stage", "ragas", "tokens_per_answer", 3.0, 0),
    ("wall at 200 <= 2x DeepEval", "veritrail-check", "deepeval", "wall_s", 2.0, 200),
)


def targets(sizes: dict[int, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The issue's done-when targets, checked at every size measured."""
    out = []
    for n, runs in sizes.items():
        for name, mine, peer, figure, limit, min_size in TARGETS:
            if n < min_size or mine not in runs or peer not in runs:
                continue
            a, b = ({**runs[t], **figures(runs[t])}[figure] for t in (mine, peer))
            if b:
                ratio = a / b
                out.append(
                    {
                        "size": n,
                        "target": name,
                        "ratio": round(ratio, 2),
                        "limit": limit,
                        "met": ratio <= limit,
                    }
                )
    return out


# -- faults -------------------------------------------------------------------------------------


def fault_row(tool: str, clean: dict[str, Any], faulty: dict[str, Any]) -> dict[str, Any]:
    """What `tool` did under a fault, against its fault-free run on the same answers."""
    row: dict[str, Any] = {
        "tool": tool,
        "exit": faulty["exit"],
        "faults_served": faulty["faults_served"],
        "calls": faulty["calls"],
    }
    if tool.startswith("veritrail"):
        base, got = clean["results"], faulty["results"]
        changed = missing = 0
        for job, claims in base.items():
            new = got.get(job)
            if new is None:
                missing += len(claims)
                continue
            if len(new) != len(claims):
                changed += abs(len(new) - len(claims))
            for old, cur in zip(claims, new, strict=False):
                if cur[1] is not None and (cur[0] != old[0] or cur[1] != old[1]):
                    changed += 1
        row.update(
            unit="claims",
            total=clean["claims"],
            ok=faulty["claims"] - faulty["claims_errored"],
            errored=faulty["claims_errored"] + missing,
            silent_changes=changed,
        )
    else:
        base, got = clean["results"], faulty["results"]
        scored = [k for k, v in got.items() if v is not None]
        changed = sum(1 for k in scored if base.get(k) is not None and abs(got[k] - base[k]) > 1e-9)
        row.update(
            unit="answers",
            total=len(base),
            ok=len(scored),
            errored=len(base) - len(scored),
            silent_changes=changed,
            crashed=faulty.get("crashed"),
        )
    return row


def print_faults(rows: list[dict[str, Any]], rate: float) -> None:
    print(f"\n== faults ({rate:.0%} of calls), against the fault-free run ==")
    print(
        f"{'fault':<16}{'tool':<17}{'exit':>5}{'served':>7}{'calls':>7}  "
        f"{'unit':<8}{'ok':>5}{'errored':>8}{'silently changed':>17}"
    )
    for r in rows:
        print(
            f"{r['fault']:<16}{r['tool']:<17}{r['exit']:>5}{r['faults_served']:>7}{r['calls']:>7}  "
            f"{r['unit']:<8}{r['ok']:>5}{r['errored']:>8}{r['silent_changes']:>17}"
            + (f"  crashed: {' '.join(r['crashed'].split())[:70]}" if r.get("crashed") else "")
        )


# -- main ---------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="10,50,200", help="answers per run, comma-separated")
    ap.add_argument("--quick", action="store_true", help="3 answers, 50 ms latency")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per call at the server")
    ap.add_argument("--concurrency", type=int, default=16, help="calls in flight, every tool")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--no-faults", action="store_true", help="skip the fault table")
    ap.add_argument("--fault-rate", type=float, default=0.15)
    ap.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "veritrail-bench")
    ap.add_argument("--workdir", type=Path, help="keep the runs here (default: a temp dir)")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args()
    sizes = [3] if args.quick else [int(s) for s in args.sizes.split(",") if s.strip()]
    latency = 0.05 if args.quick and args.latency == 0.2 else args.latency
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = set(tools) - set(TOOLS)
    if unknown:
        print(f"error: unknown tools {sorted(unknown)} (known: {', '.join(TOOLS)})")
        return 2
    for tool in tools:
        if tool in PEERS:
            peer_python(tool, args.cache_dir)  # before any timing: a first install is slow
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-peers-"))
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(
        f"bench_peers: sizes {sizes}, latency {latency * 1000:.0f} ms, concurrency "
        f"{args.concurrency}, seed {args.seed}, load average {os.getloadavg()[0]:.1f}"
    )
    by_size: dict[int, dict[str, dict[str, Any]]] = {}
    for n in sizes:
        items = make_corpus(n, args.seed)
        runs: dict[str, dict[str, Any]] = {}
        for tool in tools:
            runs[tool] = run_tool(
                tool,
                items,
                work / f"n{n}" / tool,
                latency=latency,
                concurrency=args.concurrency,
                cache_dir=args.cache_dir,
                seed=args.seed,
            )
        by_size[n] = runs
        print_size(n, runs)
    goal = targets(by_size)
    if goal:
        print("\n== done-when targets (issue 38) ==")
        for g in goal:
            print(
                f"  {g['size']:>4} answers: {g['target']}: x{g['ratio']} {'met' if g['met'] else 'NOT met'}"
            )
    fault_rows: list[dict[str, Any]] = []
    if not args.no_faults:
        n = min(sizes)
        items = make_corpus(n, args.seed)
        for label, kind in FAULTS.items():
            for tool in tools:
                faulty = run_tool(
                    tool,
                    items,
                    work / f"fault-{kind.value}" / tool,
                    latency=latency,
                    concurrency=args.concurrency,
                    cache_dir=args.cache_dir,
                    fault=kind,
                    fault_rate=args.fault_rate,
                    seed=args.seed,
                )
                fault_rows.append({"fault": label, **fault_row(tool, by_size[n][tool], faulty)})
        print_faults(fault_rows, args.fault_rate)
    if args.out:
        payload = {
            "started": started,
            "sizes": sizes,
            "latency_s": latency,
            "concurrency": args.concurrency,
            "seed": args.seed,
            "versions": {t: PEERS[t][1] for t in tools if t in PEERS},
            "runs": {
                str(n): {
                    t: {**{k: v for k, v in r.items() if k != "results"}, **figures(r)}
                    for t, r in runs.items()
                }
                for n, runs in by_size.items()
            },
            "targets": goal,
            "fault_rate": args.fault_rate,
            "faults": fault_rows,
        }
        args.out.write_text(json.dumps(payload, indent=1), encoding="utf-8")
        print(f"\nwrote {args.out}")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
