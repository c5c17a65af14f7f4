"""Batch throughput on Ray: 1 vs 2 workers against the loopback OpenAI fake (issue 18).

    python benchmarks/bench_batch.py [--jobs 4] [--claims 600] [--concurrency 512] [--latency 0.2]

The fake server runs in its own process (`bench_schedule.ServerProcess`, the same deterministic
replies: each claim = 1 decomposition + 3 × (evidence + verdict) = 7 calls, 200 ms each). The
batch is `--jobs` jobs of `--claims` claims over the summarization tree of `bench_schedule.py`,
run through the library (`veritrail.batch.run_batch` + `RayExecutor`) on a local Ray started
with 2 CPUs, response cache off, total concurrency `--concurrency` split over the workers, one
shard per job (a shard must hold enough claims to keep its share of the concurrency busy).
Both worker counts run in the same sitting, in alternating order when `--repeat` > 1.

Printed per run: wall time, model calls/s, client CPU per call (CPU of the Ray worker processes
running the tasks, measured inside each task), the driver's CPU, and the fake server's CPU (from
/proc), then the throughput ratio of 2 workers to 1 (target ≥ 1.7 when the client CPU is the
bottleneck). On a 2-core machine the server's own CPU competes with two workers: read the
server CPU line before judging the ratio (docs/scale.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_schedule import ServerProcess, tree_records

from veritrail.batch import RayExecutor, load_manifest, prepare_jobs, run_batch
from veritrail.dag import Dag, save_dag


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process so far, from /proc (0.0 where unavailable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_inputs(tmp: Path, jobs: int, claims: int) -> Path:
    """`jobs` copies of the tree DAG (distinct files) with `claims` claims each; the manifest."""
    dag = Dag.from_records(tree_records())
    lines = []
    for k in range(jobs):
        save_dag(dag, tmp / f"dag{k}.json")
        cl = [f"Claim number {i} of job {k} is stated in its chunks." for i in range(claims)]
        (tmp / f"claims{k}.json").write_text(json.dumps(cl))
        lines.append(
            json.dumps(
                {
                    "id": f"job{k}",
                    "dag": f"dag{k}.json",
                    "claims": f"claims{k}.json",
                    "out": f"out/job{k}.json",
                }
            )
        )
    m = tmp / "manifest.jsonl"
    m.write_text("\n".join(lines) + "\n")
    return m


def one_run(
    manifest: Path, srv: ServerProcess, workers: int, a: argparse.Namespace, tag: str
) -> dict[str, Any]:
    """One batch with `workers` Ray workers in a fresh runs directory; its figures."""
    entries = load_manifest(manifest)
    flags = {
        "model": "openai/fake-model",
        "base_url": srv.base_url,
        "cache": "off",
        "concurrency": a.concurrency,
        "runs_dir": str(manifest.parent / f"runs-{tag}"),
    }
    jobs = prepare_jobs(manifest, entries, flags=flags, config_path=None, html=False)
    ex = RayExecutor(
        workers=workers, concurrency=a.concurrency, shard_size=a.shard_size or a.claims
    )
    srv.reset()
    s0 = proc_cpu(srv.proc.pid)
    c0 = time.process_time()
    t0 = time.perf_counter()
    res = run_batch(
        jobs,
        ex,
        manifest=str(manifest),
        summary_dir=manifest.parent / f"summary-{tag}",
        concurrency=a.concurrency,
    )
    wall = time.perf_counter() - t0
    driver_cpu = time.process_time() - c0
    server_cpu = proc_cpu(srv.proc.pid) - s0
    st = srv.stats()
    if res.exit_code != 0:
        raise SystemExit(f"batch failed (exit {res.exit_code}): {res.summary['totals']}")
    calls = int(st["count"])
    return {
        "workers": workers,
        "wall": wall,
        "calls": calls,
        "calls_per_s": calls / wall,
        "worker_cpu_ms_per_call": ex.stats.worker_cpu_seconds / calls * 1e3,
        "driver_cpu_ms_per_call": driver_cpu / calls * 1e3,
        "server_cpu_ms_per_call": server_cpu / calls * 1e3,
        "max_in_flight": st["max_in_flight"],
        "service_mean_ms": st["service_mean_ms"],
    }


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--claims", type=int, default=600, help="claims per job")
    ap.add_argument("--concurrency", type=int, default=512)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--shard-size", type=int, default=None, help="default: one shard per job")
    ap.add_argument("--repeat", type=int, default=1, help="runs per worker count (alternating)")
    a = ap.parse_args(argv)

    import ray

    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")  # the workers inherit it
    os.environ["VERITRAIL_PRICES"] = ""
    srv = ServerProcess(a.latency)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            manifest = write_inputs(Path(tmp), a.jobs, a.claims)
            # Warm-up: start both worker processes and import veritrail in them (not measured).
            (Path(tmp) / "warm").mkdir()
            warm = write_inputs(Path(tmp) / "warm", 2, 2)
            one_run(warm, srv, 2, argparse.Namespace(**{**vars(a), "claims": 2}), "warm")
            runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
            order = [1, 2]
            for r in range(a.repeat):
                for w in order if r % 2 == 0 else order[::-1]:
                    runs[w].append(one_run(manifest, srv, w, a, f"w{w}-{r}"))
    finally:
        ray.shutdown()
        srv.close()
    print(
        f"{a.jobs} jobs x {a.claims} claims (7 calls each), concurrency {a.concurrency} "
        f"(split over the workers), latency {a.latency * 1e3:.0f} ms, Ray num_cpus=2, "
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}"
    )
    for w in (1, 2):
        for x in runs[w]:
            print(
                f"  {w} worker{'s' if w > 1 else ' '}: {x['calls']} calls in {x['wall']:.2f} s = "
                f"{x['calls_per_s']:.0f} calls/s; client CPU {x['worker_cpu_ms_per_call']:.2f} ms/call "
                f"(driver {x['driver_cpu_ms_per_call']:.2f}, fake server "
                f"{x['server_cpu_ms_per_call']:.2f}); server max in flight {x['max_in_flight']}, "
                f"service mean {x['service_mean_ms']:.0f} ms"
            )
    one = statistics.median(x["calls_per_s"] for x in runs[1])
    two = statistics.median(x["calls_per_s"] for x in runs[2])
    print(f"  2 workers / 1 worker throughput: {two / one:.2f}x  (target >= 1.7)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
