"""The command blocks of docs/*.md: each one is run by scripts/check_docs.py or carries a skip
marker with a reason, and the skipped ones' `veritrail` options exist. No venv, no network: the
venv run itself is scripts/check_docs.py's (scripts/test.sh)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scriptskit import load_check_docs

ROOT = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    return load_check_docs()


cd = _load()
BLOCKS = cd.all_blocks(cd.doc_pages())


def test_docs_have_command_blocks() -> None:
    assert len(BLOCKS) >= 20
    assert any(b.skip is None for b in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{b.file}:{b.line}")
def test_block_runs_or_says_why_not(block) -> None:  # type: ignore[no-untyped-def]
    assert not block.problems
    if block.skip is not None:
        assert len(block.skip) >= 10, "a skip reason says what the block needs"
        return
    # What runs installs only the package and its light extras, never torch or model weights.
    for command in block.installs:
        assert not cd.FORBIDDEN.search(command)
        cd.install_spec(command)
    if block.cwd:
        assert (ROOT / block.cwd).is_dir()


def test_no_coverage_problems() -> None:
    assert cd.coverage_problems(BLOCKS) == []


def test_skipped_commands_use_real_options() -> None:
    ns: dict[str, object] = {}
    exec(cd.USAGE_CODE, ns)
    todo = cd.skipped_argvs(BLOCKS)
    assert todo
    found = ns["usage_problems"]([argv for _, argv in todo])  # type: ignore[operator]
    bad = [f"{b.file}:{b.line}: {argv}: {p}" for (b, argv), p in zip(todo, found, strict=True) if p]
    assert bad == []


def test_usage_check_catches_wrong_commands() -> None:
    ns: dict[str, object] = {}
    exec(cd.USAGE_CODE, ns)
    argvs = [
        ["verify", "dag.json", "--claims", "c.json", "--html"],
        ["runs", "--dag", "x", "--status", "complete"],  # `runs` = `runs ls`
        ["verify", "dag.json", "--no-such-flag"],
        ["runs", "--no-such-flag"],
        ["no-such-command", "x"],
        ["cache", "stats", "--cache=x.sqlite"],
    ]
    got = ns["usage_problems"](argvs)  # type: ignore[operator]
    assert [p is None for p in got] == [True, True, False, False, False, True]


PAGE = """\
Intro.

<!-- docs-check: skip — needs an OpenAI key -->
```bash
veritrail verify dag.json \\
    --claims claims.json   # trailing comment
# a comment line

pip install 'veritrail[eval]'
```

```console
$ veritrail dag validate x.json
OK: x.json: 7 nodes
$ veritrail cache stats \\
    --cache other.sqlite
```

<!-- docs-check: cwd examples/quickstart -->
<!-- docs-check: exit 1 — the gate fails -->
```sh
veritrail verify dag.json --claims claims.json --max-unsupported 0
```

```console
output only, no prompt
```

```python
print("not a command block")
```

  ```shell
  $ echo indented
  ```
"""


def test_parser_markers_prompts_continuations() -> None:
    blocks = cd.parse_page(PAGE, "docs/x.md")
    assert [b.line for b in blocks] == [4, 12, 21, 33]
    first, console, gate, indented = blocks
    assert first.skip == "needs an OpenAI key"
    assert first.commands == [
        "veritrail verify dag.json --claims claims.json   # trailing comment",
        "pip install 'veritrail[eval]'",
    ]
    assert first.installs == ["pip install 'veritrail[eval]'"]
    assert cd.install_spec(first.installs[0]) == ["-e", ".[eval]"]
    assert console.skip is None
    assert console.commands == [
        "veritrail dag validate x.json",
        "veritrail cache stats --cache other.sqlite",
    ]
    assert (gate.cwd, gate.exit_code, gate.skip) == ("examples/quickstart", 1, None)
    assert indented.commands == ["echo indented"]


@pytest.mark.parametrize(
    ("marker", "problem"),
    [("skip", "skip marker without a reason"), ("frobnicate", "unknown docs-check marker")],
)
def test_bad_markers_are_problems(marker: str, problem: str) -> None:
    page = f"<!-- docs-check: {marker} -->\n```bash\nveritrail runs\n```\n"
    (block,) = cd.parse_page(page, "docs/x.md")
    assert block.problems and block.problems[0].startswith(problem)


@pytest.mark.parametrize("parts", [["a"], ["a", "b"], ["a", "b", "c", "d"]])
@pytest.mark.parametrize("prompt", ["", "$ "])
def test_continuations_join(parts: list[str], prompt: str) -> None:
    body = (prompt + " \\\n    ".join(parts)).split("\n")
    assert cd.block_commands(body, console=prompt == "$ ") == [" ".join(parts)]


WORD = st.text(alphabet="abcxyz-./=:", min_size=1, max_size=8).filter(
    lambda w: not w.startswith(("#", "$"))
)


@settings(max_examples=40, deadline=None)
@given(
    commands=st.lists(st.lists(WORD, min_size=1, max_size=6), min_size=1, max_size=4),
    breaks=st.lists(st.booleans(), min_size=24, max_size=24),
    console=st.booleans(),
)
def test_parser_roundtrip(commands: list[list[str]], breaks: list[bool], console: bool) -> None:
    """Commands written with `$ ` prompts (or not), broken anywhere between words with `\\`,
    with output lines after each in console blocks: parsed back word for word."""
    lines: list[str] = []
    k = 0
    for words in commands:
        line = ("$ " if console else "") + words[0]
        for w in words[1:]:
            if breaks[k % len(breaks)]:
                lines.append(line + " \\")
                line = "    " + w
            else:
                line += " " + w
            k += 1
        lines.append(line)
        if console:
            lines.append("some output")
    assert cd.block_commands(lines, console=console) == [" ".join(w) for w in commands]


def test_install_spec() -> None:
    assert cd.install_spec('pip install -e ".[view]"') == ["-e", ".[view]"]
    assert cd.install_spec("pip install veritrail  # core") == ["-e", "."]
    with pytest.raises(ValueError):
        cd.install_spec("pip install torch==2.13.0")


def test_veritrail_argvs() -> None:
    assert cd.veritrail_argvs("my_app | veritrail check - 'src/*.txt' --html  # x") == [
        ["check", "-", "src/*.txt", "--html"]
    ]
    assert cd.veritrail_argvs("X=1 veritrail sirg train [--k 15] && echo done") == [
        ["sirg", "train", "--k", "15"]
    ]
    assert cd.veritrail_argvs("python -m venv x") == []


def test_list_runs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    argv = sys.argv
    sys.argv = ["check_docs.py", "--list", "--only", "docs/report.md"]
    try:
        assert cd.main() == 0
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    assert "docs/report.md:" in out and "[run, in examples/quickstart]" in out
