"""Record what the embedded model would be asked, without running it: every request
`local/qwen2.5-coder-1.5b`'s provider sends during `veritrail eval` (or any command), with the
llama.cpp server replaced by the loopback fake answering with the word-overlap rules.

Why: the embedded model takes minutes a claim on two cores, so "did this change alter what the
small model sees?" is answered by comparing two checkouts' requests, not by re-running it. With
the same replies, two checkouts that send byte-identical requests in the same order get
byte-identical replies from llama.cpp too (temperature 0, same threads, same prompt cache state),
hence the same verdicts: a before/after quality figure carries over unchanged.

    python benchmarks/wice_slice.py /tmp/slice.jsonl
    python benchmarks/embedded_requests.py /tmp/after.jsonl -- eval wice:/tmp/slice.jsonl \
        --method veritrail:q=1 --method rag:k=15 --method direct --no-plots
    python benchmarks/embedded_requests.py /tmp/before.jsonl --code /tmp/old/src -- eval ...
    python benchmarks/embedded_requests.py --compare /tmp/before.jsonl /tmp/after.jsonl

The fake server always runs this checkout's code (so both sides get the same replies); the
command runs the checkout given by `--code` (a `src` folder, e.g. of `git worktree add`), in a
process of its own. `--model`, `--cache off` and `--threads 2` are added to the command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

MODEL = "local/qwen2.5-coder-1.5b"
FIELDS = ("messages", "response_format", "max_tokens", "temperature", "n")

# Runs in the command's process: the embedded server's start and stop are replaced, nothing
# else; the provider, its prompts and its reply handling are the checkout's own.
_CHILD = """
import sys
from veritrail.lm import local_server
url = sys.argv[1]
local_server.start_server = lambda config: local_server.StartedServer(None, url, "sk-fake", None)
async def _stop(box):
    return None
local_server.stop_server = _stop
from veritrail.cli.main import cli
sys.exit(cli.main(sys.argv[2:], standalone_mode=True))
"""


def record(out: Path, code: str | None, command: list[str]) -> int:
    from veritrail.lm import overlap
    from veritrail.testing.fake_openai_server import FakeOpenAIServer

    requests: list[dict[str, Any]] = []

    def responder(request: dict[str, Any]) -> str:
        requests.append({k: request.get(k) for k in FIELDS})
        return overlap.responder(request)

    srv = FakeOpenAIServer(responder=responder).start()
    env = dict(os.environ)
    if code:
        env["PYTHONPATH"] = code
    argv = [*command, "--model", MODEL, "--cache", "off", "--threads", "2"]
    try:
        rc = subprocess.run(
            [sys.executable, "-c", _CHILD, srv.base_url, *argv], env=env, check=False
        ).returncode
    finally:
        srv.stop()
    with out.open("w", encoding="utf-8") as f:
        for r in requests:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    print(f"{len(requests)} requests written to {out} (command exit {rc})", file=sys.stderr)
    return rc


def compare(a: Path, b: Path) -> int:
    la = a.read_text(encoding="utf-8").splitlines()
    lb = b.read_text(encoding="utf-8").splitlines()
    same_order = la == lb
    same_set = sorted(la) == sorted(lb)
    only_a = len(set(la) - set(lb))
    only_b = len(set(lb) - set(la))
    print(
        f"{a}: {len(la)} requests; {b}: {len(lb)}; identical in order: {same_order}; "
        f"identical as a set: {same_set}; only in the first: {only_a}, only in the second: {only_b}"
    )
    return 0 if same_order else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("out", nargs="?", type=Path)
    p.add_argument("--code", help="the src folder of the checkout to run (default: this one)")
    p.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    args, rest = p.parse_known_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None or not rest:
        p.error("give OUT and, after --, the veritrail command to run")
    command = rest[1:] if rest[0] == "--" else rest
    return record(args.out, args.code, command)


if __name__ == "__main__":
    sys.exit(main())
