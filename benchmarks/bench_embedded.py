"""The quick start with the embedded model: wall time, calls, tokens, prefix-cache hits (issue 19).

Runs `veritrail verify examples/quickstart/dag.json --claims examples/quickstart/claims.json
--cache off` in this process (as a new user would, model start-up included), in a fresh
temporary directory per run, and prints one row per run:

    wall (whole command) · verification (the report's run.wall_seconds) · calls · tokens in/out ·
    prompt tokens the server answered from its prefix cache (share of tokens in) · threads ·
    load average (1 min) at start and end · verdicts

Calls and tokens are counted from `Model`'s `on_call` events (`Model._notify` is wrapped, so the
script works unchanged on older checkouts: run it with `PYTHONPATH=/path/to/old/src` for a
"before" figure; a checkout that does not count cached prompt tokens shows "n/a").

    python benchmarks/bench_embedded.py                     # 1 run, defaults
    python benchmarks/bench_embedded.py --runs 2 --threads 2 --concurrency 1
    PYTHONPATH=/tmp/j-before/src python benchmarks/bench_embedded.py --label before

Levers, one at a time: `--parallel N` (server slots; `--concurrency` follows unless given),
`--no-prefix-gate` (calls that repeat a prompt in flight are sent at once), `--threads N`
(instead of the automatic choice), `--prefix-store off|cold|DIR` (the stored system-prompt
states, `lm.prefix_store`: `off` = none, `cold` = a fresh empty folder for each run, as on a new
machine, DIR = that folder, warm after its first run; default: the user's own store). The row's
`states` column says how many system prompts were restored / saved (`-` on checkouts without
the store). Extra arguments after `--` go to `veritrail verify` unchanged.
The load average matters: on a shared 2-core machine every figure moves with it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"


def one_run(args: argparse.Namespace, extra: list[str]) -> dict[str, Any]:
    import veritrail
    from veritrail.cli.main import cli
    from veritrail.lm import model as lm_model

    events: list[Any] = []
    original = lm_model.Model._notify

    def spy(self: Any, event: Any) -> None:
        events.append(event)
        original(self, event)

    lm_model.Model._notify = spy  # type: ignore[method-assign]
    if args.no_prefix_gate:
        from veritrail.lm import local

        local.PrefixGate.blocker = lambda self, prompt: None  # type: ignore[method-assign]
    if args.parallel:
        os.environ["VERITRAIL_LOCAL_PARALLEL"] = str(args.parallel)
    states: list[dict[str, int]] = []
    from veritrail.lm import local as lm_local

    original_close = lm_local.LocalProvider.aclose

    async def close_spy(self: Any) -> None:
        if hasattr(self, "prefix_states"):
            states.append(dict(self.prefix_states))
        await original_close(self)

    lm_local.LocalProvider.aclose = close_spy  # type: ignore[method-assign]
    cold = (
        tempfile.TemporaryDirectory(prefix="vt-bench-prefix-")
        if args.prefix_store == "cold"
        else None
    )
    if cold is not None:
        os.environ["VERITRAIL_PREFIX_STORE"] = cold.name
    elif args.prefix_store:
        os.environ["VERITRAIL_PREFIX_STORE"] = args.prefix_store
    argv = [
        "verify",
        str(QUICKSTART / "dag.json"),
        "--claims",
        str(QUICKSTART / "claims.json"),
        "--out",
        "report.json",
        "--cache",
        "off",
        "--quiet",
    ]
    if args.model:
        argv += ["--model", args.model]
    if args.threads:
        argv += ["--threads", str(args.threads)]
    if args.concurrency:
        argv += ["--concurrency", str(args.concurrency)]
    argv += extra
    load0 = os.getloadavg()[0]
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="vt-bench-embedded-") as tmp:
        os.chdir(tmp)
        err = io.StringIO()
        t0 = time.perf_counter()
        try:
            with contextlib.redirect_stderr(err):
                cli.main(args=argv, prog_name="veritrail", standalone_mode=False)
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        finally:
            wall = time.perf_counter() - t0
            os.chdir(cwd)
            lm_model.Model._notify = original  # type: ignore[method-assign]
            lm_local.LocalProvider.aclose = original_close  # type: ignore[method-assign]
            if cold is not None:
                cold.cleanup()
        report = json.loads((Path(tmp) / "report.json").read_text(encoding="utf-8"))
    load1 = os.getloadavg()[0]
    ok = [e for e in events if e.error is None]
    cached_in: int | None = None
    if ok and all(hasattr(e, "cached_input_tokens") for e in ok):
        cached_in = sum(e.cached_input_tokens for e in ok)
    tokens_in = sum(e.input_tokens for e in ok)
    warning = next((ln for ln in err.getvalue().splitlines() if "embedded model" in ln), "")
    return {
        "label": args.label,
        "veritrail": str(Path(veritrail.__file__).parent),
        "exit": code,
        "wall_s": round(wall, 1),
        "verify_s": report.get("run", {}).get("wall_seconds"),
        "calls": len(ok),
        "failed_calls": len(events) - len(ok),
        "tokens_in": tokens_in,
        "tokens_out": sum(e.output_tokens for e in ok),
        "cached_in": cached_in,
        "cached_share": round(cached_in / tokens_in, 3)
        if cached_in is not None and tokens_in
        else None,
        "per_step_calls": dict(Counter(e.step for e in ok)),
        "per_step_tokens": {
            step: [
                sum(e.input_tokens for e in ok if e.step == step),
                sum(getattr(e, "cached_input_tokens", 0) for e in ok if e.step == step),
                sum(e.output_tokens for e in ok if e.step == step),
            ]
            for step in dict.fromkeys(e.step for e in ok)
        },
        "load_start": round(load0, 2),
        "load_end": round(load1, 2),
        "verdicts": {c["id"]: c.get("verdict") for c in report["claims"]},
        "prefix_states": states[0] if states else None,
        "warning": warning,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--label", default="current")
    p.add_argument("--model", default=None, help="default: the embedded default model")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--concurrency", type=int, default=None)
    p.add_argument("--parallel", type=int, default=None, help="server slots (new checkouts)")
    p.add_argument(
        "--no-prefix-gate", action="store_true", help="send shared-prefix calls at once (lever off)"
    )
    p.add_argument(
        "--prefix-store",
        default=None,
        help="off | cold (a fresh empty store per run) | a folder (default: the user's store)",
    )
    p.add_argument("--json", dest="json_out", default=None, help="append rows to this JSONL file")
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    args = p.parse_args(argv)
    print(
        "| label | wall s | verify s | calls | tokens in | tokens out | prefix-cached in "
        "| states restored/saved | load 1m start→end | verdicts |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for _ in range(args.runs):
        row = one_run(args, extra)
        share = (
            f"{row['cached_in']} ({100 * row['cached_share']:.0f}%)"
            if row["cached_share"] is not None
            else "n/a"
        )
        st = row["prefix_states"]
        kept = f"{st['restored']}/{st['saved']}" if st else "-"
        verdicts = " ".join(
            f"{k}={''.join(w[0] for w in (v or 'error').split())}"
            for k, v in row["verdicts"].items()
        )
        print(
            f"| {row['label']} | {row['wall_s']} | {row['verify_s']} | {row['calls']} "
            f"| {row['tokens_in']} | {row['tokens_out']} | {share} | {kept} "
            f"| {row['load_start']}→{row['load_end']} | {verdicts} |",
            flush=True,
        )
        print(f"  {row['warning']}", file=sys.stderr)
        print(f"  calls per step: {row['per_step_calls']}; exit {row['exit']}", file=sys.stderr)
        print(f"  tokens per step [in, cached, out]: {row['per_step_tokens']}", file=sys.stderr)
        if args.json_out:
            with open(args.json_out, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
