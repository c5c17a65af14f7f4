"""Prompt templates: package data files next to the steps, rendered strictly, with fenced data.

A template is a Markdown file in a `prompts/` folder beside the code that uses it (the method's in
`veritrail/method/prompts/`, the detectors' and the reference pipelines' in their own rooms; names
are unique across them) with two sections, `## system` and
`## user`; variables are written `{{name}}`. Rendering fails on a missing or an unused variable,
so a template and its caller cannot drift apart silently. Untrusted text (node contents and ids,
claims, questions, earlier replies) is passed through `fence()`, which wraps it in delimiter lines
the instructions refer to, normalises every Unicode line break and neutralises any delimiter-looking
line inside it, and escapes its label, so source text cannot pose as instructions.

Users can override any template: `prompt_dir(DIR)` (a context manager; a run's `prompt_dir`
setting, or env `VERITRAIL_PROMPT_DIR`) makes files found there win over the packaged ones;
`export_prompts(DIR)` writes the defaults. The directory is a context variable, not a process
global: each run (and each job of a batch, in the same event loop) renders with its own, and
the tasks a run starts inherit it.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from .. import environment
from ..errors import InputProblem
from ..lm.base import Message

_VAR = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
_SECTION = re.compile(r"^##\s+(system|user)\s*$", re.MULTILINE)

_override_dir: ContextVar[Path | None] = ContextVar("veritrail_prompt_dir", default=None)


class PromptError(InputProblem, ValueError):
    """A template is malformed or was rendered with the wrong variables."""


def set_prompt_dir(path: str | Path | None) -> None:
    """Use templates from `path` where present, in the current context and the tasks it starts
    from now on (None: the packaged defaults, or `VERITRAIL_PROMPT_DIR`). For a scope that ends,
    use `prompt_dir`."""
    _override_dir.set(Path(path) if path is not None else None)


@contextlib.contextmanager
def prompt_dir(path: str | Path | None) -> Iterator[None]:
    """Render with the templates of `path` (where it has one) inside the block; None leaves the
    current choice as it is. What a run and each job of a batch use: two jobs with different
    directories can run in one event loop, since each task sees its own context."""
    if path is None:
        yield
        return
    token = _override_dir.set(Path(path))
    try:
        yield
    finally:
        _override_dir.reset(token)


def _override() -> Path | None:
    chosen = _override_dir.get()
    if chosen is not None:
        return chosen
    env = environment.get("VERITRAIL_PROMPT_DIR")
    return Path(env) if env else None


# The packages whose `prompts/` folder ships templates. The method's come first; template names
# are unique across the folders (a test keeps them so).
PROMPT_PACKAGES = ("veritrail.method", "veritrail.detectors.g2l", "veritrail.pipelines")


def _packaged_files() -> dict[str, Traversable]:
    out: dict[str, Traversable] = {}
    for pkg in PROMPT_PACKAGES:
        root = resources.files(pkg) / "prompts"
        for p in root.iterdir():
            if p.name.endswith(".md"):
                out.setdefault(p.name[:-3], p)
    return out


def packaged_prompt_names() -> list[str]:
    """Names (without .md) of the templates shipped in the package."""
    return sorted(_packaged_files())


def overridden(name: str) -> bool:
    """Whether the current prompt directory overrides the template `name`."""
    o = _override()
    return o is not None and (o / f"{name}.md").is_file()


def prompt_source(name: str) -> str:
    """The template text for `name`: the override if one exists, else the packaged file."""
    o = _override()
    if o is not None and (o / f"{name}.md").is_file():
        return (o / f"{name}.md").read_text(encoding="utf-8")
    f = _packaged_files().get(name)
    if f is None or not f.is_file():
        raise PromptError(f"no prompt template named {name!r}")
    return f.read_text(encoding="utf-8")


def export_prompts(dest: str | Path) -> list[Path]:
    """Write every packaged template to `dest` for editing; returns the paths written."""
    d = Path(dest)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for name, f in sorted(_packaged_files().items()):
        p = d / f"{name}.md"
        p.write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
        out.append(p)
    return out


@dataclass(frozen=True, slots=True)
class Prompt:
    """A parsed template."""

    name: str
    system: str
    user: str

    @property
    def variables(self) -> set[str]:
        """Every variable the template uses."""
        return set(_VAR.findall(self.system)) | set(_VAR.findall(self.user))

    def render(self, **values: str) -> list[Message]:
        """Fill the template; every variable must be given and every value used."""
        missing = self.variables - values.keys()
        unused = values.keys() - self.variables
        if missing or unused:
            raise PromptError(
                f"prompt {self.name!r}: missing {sorted(missing)} unused {sorted(unused)}"
            )

        def fill(t: str) -> str:
            return _VAR.sub(lambda m: values[m.group(1)], t)

        msgs = []
        if self.system.strip():
            msgs.append(Message("system", fill(self.system).strip()))
        msgs.append(Message("user", fill(self.user).strip()))
        return msgs


def load_prompt(name: str) -> Prompt:
    """Parse the template `name` (override first, then packaged).

    Parsed templates are kept per (name, override file and its modification time): a run reads
    each template once, and an edited override is still picked up.
    """
    o = _override()
    path = o / f"{name}.md" if o is not None else None
    try:
        stamp = path.stat().st_mtime_ns if path is not None else None
    except OSError:
        stamp = None
    return _parsed(name, str(path) if stamp is not None else None, stamp)


def parse_prompt_file(path: str | Path) -> Prompt:
    """Read and parse one template file (an override); raises `textio.InputError` when the file
    cannot be read as UTF-8 and `PromptError` when it is not a template."""
    from ..textio import read_input_text

    p = Path(path)
    return _parse(p.stem, read_input_text(p, "prompt override"))


@functools.lru_cache(maxsize=256)
def _parsed(name: str, override: str | None, stamp: int | None) -> Prompt:
    if override:
        from ..textio import read_input_text

        return _parse(name, read_input_text(override, "prompt override"))
    return _parse(name, prompt_source(name))


def _parse(name: str, text: str) -> Prompt:
    parts = _SECTION.split(text)
    # parts = [preamble, "system", body, "user", body] (system optional)
    sections: dict[str, str] = {}
    for i in range(1, len(parts) - 1, 2):
        sections[parts[i]] = parts[i + 1]
    if "user" not in sections:
        raise PromptError(f"prompt {name!r} has no '## user' section")
    return Prompt(name, sections.get("system", ""), sections["user"])
