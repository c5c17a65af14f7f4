"""Batch throughput on Ray: 1 vs 2 workers against a loopback OpenAI fake (issue 18).

    python benchmarks/bench_batch.py [--jobs 4] [--claims 600] [--concurrency 512] [--latency 0.2]
                                     [--server fast|threaded] [--repeat N] [--send-interval S]

The fake server runs in its own process and gives the deterministic replies of
`bench_schedule.py` (each claim = 1 decomposition + 3 × (evidence + verdict) = 7 calls, 200 ms
each). `--server threaded` is `bench_schedule.ServerProcess` (the test suite's
`FakeOpenAIServer`: a thread per connection, ~0.2–0.3 ms of CPU per request); `--server fast`
(default) is `FastServer` below: one asyncio event loop, replies pre-encoded (status line,
headers and JSON body built once per step), ~0.05 ms per request. On a 2-core machine the
server's CPU is taken from the workers being measured, so the cheaper server is the fairer
stand-in for an endpoint that runs elsewhere; the client does exactly the same work with
either (same requests, same reply bodies apart from the id and token counts). The
batch is `--jobs` jobs of `--claims` claims over the summarization tree of `bench_schedule.py`,
run through the library (`veritrail.batch.run_batch` + `RayExecutor`) on a local Ray started
with 2 CPUs, response cache off, total concurrency `--concurrency` split over the workers,
`--shard-size` claims per shard (default: one shard per job; each worker actor runs several
shards at once over one model layer, so small jobs fill its budget together). One executor
serves every run, keeping its two worker actors between runs (1 worker uses the first; the
warm-up run starts both). Both worker counts run in the same sitting, in alternating order when
`--repeat` > 1.

Printed per run: wall time, model calls/s (and the steady-state rate: the fake server's requests
per second between the 10th and 90th percentile of their arrival, without the batch's head and
tail, which are not CPU-bound and last as long for 1 or 2 workers), client CPU per call (CPU of
the Ray worker processes during the run, measured inside each worker actor), the driver's CPU
(the whole driver process, and the part spent building and writing the jobs' reports), and the
fake server's CPU (from /proc), then the throughput ratio of 2 workers to 1 (target ≥ 1.7 when
the client CPU is the bottleneck; the whole-run ratio is the headline, the steady-state one
follows it), and whether it was: each worker's event-loop busy share and the ceiling the budget
sets (concurrency / latency). With the run's collector policy (run/gcpolicy.py) one worker needs
~0.7 ms per call, so two workers at the default 512 (256 each: at most 1,280 calls/s apiece) are
bounded by the budget, not their CPU; `--concurrency 1024 --claims 1500` is the CPU-bound
setting (benchmarks/README.md). On a 2-core machine the server's own CPU competes with two
workers: read the server CPU line before judging the ratio (docs/scale.md). `--send-interval` is
`RayExecutor(send_interval=...)` (default 0.1 s; 0 sends each shard's results as soon as they are
ready, as before the driver's group commit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_schedule import ServerProcess, tree_records
from bench_schedule import responder as step_reply

import veritrail.batch.driver as batch_driver
from veritrail.batch import RayExecutor, load_manifest, prepare_jobs, run_batch
from veritrail.batch.ray_worker import SEND_INTERVAL
from veritrail.dag import Dag, save_dag

REPORT_CPU = [0.0]
"""Driver CPU seconds spent in `finish_job` (build and write a job's report), all runs."""


def _timed_finish_job(*args: Any, **kwargs: Any) -> Any:
    # Wraps the driver's `finish_job` to split the driver's CPU into reports vs recording and
    # scheduling (the report is the same work for every executor; the rest is the Ray path's).
    c0 = time.process_time()
    try:
        return _finish_job(*args, **kwargs)
    finally:
        REPORT_CPU[0] += time.process_time() - c0


_finish_job = batch_driver.finish_job
batch_driver.finish_job = _timed_finish_job


class _FastHTTP(asyncio.Protocol):
    """HTTP/1.1 keep-alive, one request at a time per connection (as the client's pool sends):
    read the head and body, pick the pre-encoded reply, send it `latency` seconds later."""

    def __init__(self, srv: FastServer) -> None:
        self.srv = srv
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].lower()
            i = head.find(b"content-length:")
            length = 0
            if i >= 0:
                j = head.find(b"\r\n", i)
                length = int(head[i + 15 : j if j >= 0 else None])
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            self.srv.request(self, head.startswith(b"post"), body)

    def send(self, reply: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(reply)


class FastServer:
    """The benchmark's cheap fake endpoint (see the module docstring); `serve_fast` runs it."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.replies: dict[str, bytes] = {}
        self.count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.service: list[float] = []
        self.first_request = 0.0  # wall clock (time.time) of the first request received
        self.last_reply = 0.0  # and of the last reply sent
        self.arrivals: list[float] = []  # wall clock of every request (the steady-state rate)

    def encoded(self, content: str) -> bytes:
        """The whole HTTP response for one reply content (built once per distinct content)."""
        got = self.replies.get(content)
        if got is None:
            body = json.dumps(
                {
                    "id": "chatcmpl-fast",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": "fake-model",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                            "logprobs": None,
                        }
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                }
            ).encode()
            got = (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n".encode()
                + b"Connection: keep-alive\r\n\r\n"
                + body
            )
            self.replies[content] = got
        return got

    def request(self, conn: _FastHTTP, post: bool, body: bytes) -> None:
        t0 = time.perf_counter()
        self.count += 1
        now = time.time()
        self.arrivals.append(now)
        if self.count == 1:
            self.first_request = now
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        content = step_reply(json.loads(body)) if post and body else "unexpected request"
        reply = self.encoded(content)

        def answer() -> None:
            self.in_flight -= 1
            self.service.append(time.perf_counter() - t0)
            self.last_reply = time.time()
            conn.send(reply)

        asyncio.get_running_loop().call_later(self.latency, answer)

    def stats(self) -> dict[str, Any]:
        """As `bench_schedule.ServerProcess.stats`."""
        times = sorted(self.service) or [0.0]
        return {
            "count": self.count,
            "max_in_flight": self.max_in_flight,
            "service_mean_ms": statistics.fmean(times) * 1e3,
            "service_p95_ms": times[int(len(times) * 0.95)] * 1e3,
            "first_request": self.first_request,
            "last_reply": self.last_reply,
            **steady_state(self.arrivals),
        }

    def reset(self) -> None:
        """Zero the counters."""
        self.count = self.max_in_flight = 0
        self.service = []
        self.first_request = self.last_reply = 0.0
        self.arrivals = []


STEADY = (0.1, 0.9)
"""The share of a run's requests between which its steady-state rate is measured."""


def steady_state(arrivals: list[float]) -> dict[str, float]:
    """Requests per second between the 10th and the 90th percentile of their arrival times.

    A batch starts with its workers building their first budget of requests and ends with its
    last claims finishing their chains of 200 ms calls one after another, with fewer and fewer
    calls in flight; neither stretch is bounded by the client CPU, and both last about as long
    whatever the number of workers, so they pull the whole run's ratio towards 1. The middle
    80% of the requests is where the client CPU is the bottleneck (the issue's condition).
    """
    n = len(arrivals)
    if n < 10:
        return {}
    lo, hi = int(n * STEADY[0]), int(n * STEADY[1])
    span = arrivals[hi] - arrivals[lo]
    return {"steady_rate": (hi - lo) / span if span > 0 else float("nan"), "steady_span": span}


def serve_fast(latency: float) -> None:
    """`--serve-fast`: run `FastServer` until stdin closes; `count` / `reset` as `--serve`."""

    async def main() -> None:
        srv = FastServer(latency)
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _FastHTTP(srv), "127.0.0.1", 0, backlog=1024)
        port = server.sockets[0].getsockname()[1]
        print(f"http://127.0.0.1:{port}/v1", flush=True)
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            if line.strip() == "reset":
                srv.reset()
            print(json.dumps(srv.stats()), flush=True)
        server.close()

    asyncio.run(main())


class FastServerProcess(ServerProcess):
    """`FastServer` in its own process, with `ServerProcess`'s interface."""

    def __init__(self, latency: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve-fast", "--latency", str(latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy so far (all processes, from /proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(x) for x in fields]
    busy = sum(ticks[:8]) - ticks[3] - ticks[4]  # everything but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


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
    manifest: Path,
    srv: ServerProcess,
    workers: int,
    a: argparse.Namespace,
    tag: str,
    ex: RayExecutor,
) -> dict[str, Any]:
    """One batch with `workers` of `ex`'s Ray workers in a fresh runs directory; its figures."""
    entries = load_manifest(manifest)
    flags = {
        "model": "openai/fake-model",
        "base_url": srv.base_url,
        "cache": "off",
        "concurrency": a.concurrency,
        "runs_dir": str(manifest.parent / f"runs-{tag}"),
    }
    jobs = prepare_jobs(manifest, entries, flags=flags, config_path=None, html=False)
    ex.workers = workers
    ex.concurrency = a.concurrency
    ex.shard_size = a.shard_size or a.claims
    srv.reset()
    s0 = proc_cpu(srv.proc.pid)
    m0 = machine_busy()
    r0 = REPORT_CPU[0]
    c0 = time.process_time()
    t0 = time.perf_counter()
    start = time.time()
    res = run_batch(
        jobs,
        ex,
        manifest=str(manifest),
        summary_dir=manifest.parent / f"summary-{tag}",
        concurrency=a.concurrency,
    )
    wall = time.perf_counter() - t0
    end = time.time()
    driver_cpu = time.process_time() - c0
    report_cpu = REPORT_CPU[0] - r0
    server_cpu = proc_cpu(srv.proc.pid) - s0
    busy = machine_busy() - m0
    st = srv.stats()
    if res.exit_code != 0:
        raise SystemExit(f"batch failed (exit {res.exit_code}): {res.summary['totals']}")
    calls = int(st["count"])
    return {
        "workers": workers,
        "wall": wall,
        "calls": calls,
        "calls_per_s": calls / wall,
        "steady_per_s": st.get("steady_rate", float("nan")),
        "steady_span": st.get("steady_span", float("nan")),
        "worker_cpu_ms_per_call": ex.stats.worker_cpu_seconds / calls * 1e3,
        "driver_cpu_ms_per_call": driver_cpu / calls * 1e3,
        "report_cpu_ms_per_call": report_cpu / calls * 1e3,
        "server_cpu_ms_per_call": server_cpu / calls * 1e3,
        "max_in_flight": st["max_in_flight"],
        "service_mean_ms": st["service_mean_ms"],
        # Seconds from the batch's start to the server's first request (the worker builds its
        # first budget of requests before any leaves), and from the last reply to the batch's
        # end (the driver's tail: the reports, built once every claim of a job is in).
        "head": st["first_request"] - start if st.get("first_request") else float("nan"),
        "tail": end - st["last_reply"] if st.get("last_reply") else float("nan"),
        # Cores busy on the whole machine during the run, and how many of them were this
        # benchmark's (workers + driver + server); the rest is other work on a shared machine.
        "machine_cores_busy": busy / wall,
        "bench_cores": (ex.stats.worker_cpu_seconds + driver_cpu + server_cpu) / wall,
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
    ap.add_argument("--server", choices=["fast", "threaded"], default="fast")
    ap.add_argument(
        "--send-interval",
        type=float,
        default=SEND_INTERVAL,
        help=f"seconds a task gathers results into one item (default {SEND_INTERVAL})",
    )
    ap.add_argument("--serve-fast", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.serve_fast:
        serve_fast(a.latency)
        return

    import ray

    load_before = os.getloadavg()[0]
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")  # the workers inherit it
    os.environ["VERITRAIL_PRICES"] = ""
    srv = FastServerProcess(a.latency) if a.server == "fast" else ServerProcess(a.latency)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            manifest = write_inputs(Path(tmp), a.jobs, a.claims)
            # One executor for every run: its worker actors are kept between runs (1 worker
            # uses the first of them), as one long batch keeps them.
            ex = RayExecutor(send_interval=a.send_interval, keep_workers=True)
            # Warm-up: start both worker actors and import veritrail in them (not measured).
            (Path(tmp) / "warm").mkdir()
            warm = write_inputs(Path(tmp) / "warm", 2, 2)
            one_run(warm, srv, 2, argparse.Namespace(**{**vars(a), "claims": 2}), "warm", ex)
            runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
            order = [1, 2]
            for r in range(a.repeat):
                for w in order if r % 2 == 0 else order[::-1]:
                    runs[w].append(one_run(manifest, srv, w, a, f"w{w}-{r}", ex))
            ex.close()
    finally:
        ray.shutdown()
        srv.close()
    print(
        f"{a.jobs} jobs x {a.claims} claims (7 calls each), concurrency {a.concurrency} "
        f"(split over the workers), latency {a.latency * 1e3:.0f} ms, {a.server} server, "
        f"Ray num_cpus=2, send interval {a.send_interval:g} s, "
        f"machine: {os.cpu_count()} cores, load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after"
    )
    for w in (1, 2):
        for x in runs[w]:
            print(
                f"  {w} worker{'s' if w > 1 else ' '}: {x['calls']} calls in {x['wall']:.2f} s = "
                f"{x['calls_per_s']:.0f} calls/s (steady {x['steady_per_s']:.0f} over the middle "
                f"{x['steady_span']:.1f} s); client CPU {x['worker_cpu_ms_per_call']:.2f} ms/call "
                f"(driver {x['driver_cpu_ms_per_call']:.3f} of which reports "
                f"{x['report_cpu_ms_per_call']:.3f}, fake server "
                f"{x['server_cpu_ms_per_call']:.2f}); server max in flight {x['max_in_flight']}, "
                f"service mean {x['service_mean_ms']:.0f} ms; head {x['head']:.2f} s, "
                f"tail {x['tail']:.2f} s; cores busy "
                f"{x['machine_cores_busy']:.2f} (this benchmark {x['bench_cores']:.2f})"
            )
    one = statistics.median(x["calls_per_s"] for x in runs[1])
    two = statistics.median(x["calls_per_s"] for x in runs[2])
    print(f"  2 workers / 1 worker throughput: {two / one:.2f}x  (target >= 1.7)")
    one_s = statistics.median(x["steady_per_s"] for x in runs[1])
    two_s = statistics.median(x["steady_per_s"] for x in runs[2])
    print(
        f"  2 workers / 1 worker steady-state throughput (middle {STEADY[1] - STEADY[0]:.0%} "
        f"of the requests): {two_s / one_s:.2f}x"
    )
    # Whether the client CPU was the bottleneck (the target's condition): each worker's busy
    # share of its core, and the ceiling the budget alone sets (Little's law: calls in flight /
    # latency), which the workers' CPU cannot beat.
    cores = os.cpu_count() or 1
    for w in (1, 2):
        busy = statistics.median(
            x["worker_cpu_ms_per_call"] * x["calls_per_s"] / 1e3 / w for x in runs[w]
        )
        machine = statistics.median(x["machine_cores_busy"] for x in runs[w])
        # CPU-bound: the workers' loops are busy, or the machine has no core left for them.
        bound = busy >= 0.9 or machine >= 0.9 * cores
        print(
            f"  {w} worker{'s' if w > 1 else ' '}: each worker busy {busy:.0%} of a core, "
            f"machine {machine:.2f} of {cores} cores busy; budget ceiling "
            f"{a.concurrency / a.latency:.0f} calls/s ({a.concurrency} in flight / "
            f"{a.latency:g} s) -> "
            + ("CPU-bound" if bound else "NOT CPU-bound: raise --concurrency")
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
