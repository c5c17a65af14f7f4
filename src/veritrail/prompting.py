"""Prompt templates: package data files next to the steps, rendered strictly, with fenced data.

A template is a Markdown file in `veritrail/prompts/` with two sections, `## system` and
`## user`; variables are written `{{name}}`. Rendering fails on a missing or an unused variable,
so a template and its caller cannot drift apart silently. Untrusted text (node contents, claims)
is passed through `fence()`, which wraps it in delimiter lines the instructions refer to and
neutralises any delimiter-looking line inside it, so source text cannot pose as instructions.

Users can override any template: `set_prompt_dir(DIR)` (or config/env `VERITRAIL_PROMPT_DIR`)
makes files found there win over the packaged ones; `export_prompts(DIR)` writes the defaults.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .lm.base import Message

_VAR = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
_SECTION = re.compile(r"^##\s+(system|user)\s*$", re.MULTILINE)
_FENCE_LINE = re.compile(r"^(\s*)(<<<|>>>)", re.MULTILINE)

_override_dir: Path | None = None


class PromptError(ValueError):
    """A template is malformed or was rendered with the wrong variables."""


def set_prompt_dir(path: str | Path | None) -> None:
    """Use templates from `path` where present (None restores the packaged defaults only)."""
    global _override_dir
    _override_dir = Path(path) if path is not None else None


def _override() -> Path | None:
    if _override_dir is not None:
        return _override_dir
    env = os.environ.get("VERITRAIL_PROMPT_DIR")
    return Path(env) if env else None


def packaged_prompt_names() -> list[str]:
    """Names (without .md) of the templates shipped in the package."""
    root = resources.files("veritrail") / "prompts"
    return sorted(p.name[:-3] for p in root.iterdir() if p.name.endswith(".md"))


def prompt_source(name: str) -> str:
    """The template text for `name`: the override if one exists, else the packaged file."""
    o = _override()
    if o is not None and (o / f"{name}.md").is_file():
        return (o / f"{name}.md").read_text(encoding="utf-8")
    f = resources.files("veritrail") / "prompts" / f"{name}.md"
    if not f.is_file():
        raise PromptError(f"no prompt template named {name!r}")
    return f.read_text(encoding="utf-8")


def export_prompts(dest: str | Path) -> list[Path]:
    """Write every packaged template to `dest` for editing; returns the paths written."""
    d = Path(dest)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for name in packaged_prompt_names():
        f = resources.files("veritrail") / "prompts" / f"{name}.md"
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


@functools.lru_cache(maxsize=256)
def _parsed(name: str, override: str | None, stamp: int | None) -> Prompt:
    text = Path(override).read_text(encoding="utf-8") if override else prompt_source(name)
    parts = _SECTION.split(text)
    # parts = [preamble, "system", body, "user", body] (system optional)
    sections: dict[str, str] = {}
    for i in range(1, len(parts) - 1, 2):
        sections[parts[i]] = parts[i + 1]
    if "user" not in sections:
        raise PromptError(f"prompt {name!r} has no '## user' section")
    return Prompt(name, sections.get("system", ""), sections["user"])


def fence(text: str, label: str) -> str:
    """Wrap untrusted `text` between `<<< label` and `>>> end label` lines.

    Lines inside the text that start like a fence line get a leading backslash, so the text can
    never close the fence or open a new one.
    """
    safe = _FENCE_LINE.sub(lambda m: m.group(1) + "\\" + m.group(2), text)
    return f"<<< {label}\n{safe}\n>>> end {label}"
