"""A batch's start-up: seconds from `veritrail batch` starting to its first model call (issue 38).

    python benchmarks/bench_batch_startup.py [--jobs 10 50 200] [--latency 0.2] [--concurrency 64]
                                             [--first-call-only]

Each size writes `--jobs` DAGs in the layout `veritrail check` writes (three source paragraphs
-> a five-sentence answer) and a manifest whose jobs extract their claims (`"claims": null`),
then runs `veritrail batch` as a process against a loopback `FakeOpenAIServer` answering with
the word-overlap responder (`--latency` seconds a call). Printed per size: the seconds from the
process's start to the server's first request, the CPU seconds the process had used by then
(from /proc: the figure that does not depend on the machine's load), the whole wall time (unless
`--first-call-only`, which stops the batch at its first call), the requests served and the exit
status. Start-up is CPU-bound: read the machine's load beside it (printed).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from veritrail.dag import Dag, save_dag
from veritrail.testing import FakeOpenAIServer
from veritrail.testing.overlap import loopback_env, responder

_CLI = (
    "import sys; from veritrail.cli.main import main; sys.argv[0] = 'veritrail'; sys.exit(main())"
)


def write_jobs(root: Path, n: int) -> Path:
    """`n` check-layout DAGs and their manifest (claims extracted by the batch)."""
    lines = []
    for k in range(n):
        recs: list[dict[str, Any]] = [
            {
                "id": f"s{p}",
                "text": f"Paragraph {p} of answer {k}. The orchard {k} grows apples number {p}. "
                f"It was planted in {1900 + p}.",
            }
            for p in range(3)
        ]
        recs.append(
            {
                "id": "answer",
                "text": " ".join(f"The orchard {k} grows apples number {i}." for i in range(5)),
                "sources": ["s0", "s1", "s2"],
            }
        )
        save_dag(Dag.from_records(recs), root / f"dag{k}.json")
        job = {"id": f"j{k}", "dag": f"dag{k}.json", "claims": None, "out": f"reports/j{k}.json"}
        lines.append(json.dumps(job))
    manifest = root / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return manifest


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_size(n: int, a: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        manifest = write_jobs(root, n)
        first: list[float] = []
        cpu: list[float] = []
        child: list[int] = []
        arrived = threading.Event()

        def reply(req: dict[str, Any]) -> str:
            if not first:
                first.append(time.monotonic())
                if child:
                    cpu.append(proc_cpu(child[0]))
                arrived.set()
            return responder(req)

        with FakeOpenAIServer(responder=reply, latency=a.latency) as srv:
            env = {**os.environ, **loopback_env(srv)}
            cmd = [sys.executable, "-c", _CLI, "batch", str(manifest), "--quiet"]
            cmd += ["--runs-dir", str(root / "runs"), "--summary-dir", str(root)]
            cmd += ["--concurrency", str(a.concurrency)]
            t0 = time.monotonic()
            proc = subprocess.Popen(
                cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            child.append(proc.pid)
            if a.first_call_only:
                while not arrived.wait(0.1) and proc.poll() is None:
                    pass
                proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=3600)
            wall = time.monotonic() - t0
            out = {
                "jobs": n,
                "first_call_s": round(first[0] - t0, 2) if first else None,
                "first_call_cpu_s": round(cpu[0], 2) if cpu else None,
                "wall_s": None if a.first_call_only else round(wall, 1),
                "requests": srv.count,
                "exit": proc.returncode,
                "load": round(os.getloadavg()[0], 2),
            }
            if not first or (proc.returncode not in (0, 1, 3) and not a.first_call_only):
                out["stderr"] = err.decode("utf-8", "replace")[-2000:]
            return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--jobs", type=int, nargs="+", default=[10, 50, 200])
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--first-call-only", action="store_true")
    a = ap.parse_args(argv)
    for n in a.jobs:
        print(json.dumps(one_size(n, a)), flush=True)


if __name__ == "__main__":
    main()
