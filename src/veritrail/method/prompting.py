"""Prompt templates: package data files next to the steps, rendered strictly, with fenced data.

A template is a Markdown file in a `prompts/` folder beside the code that uses it (the method's in
`veritrail/method/prompts/`, the detectors' and the reference pipelines' in their own rooms; names
are unique across them) with two sections, `## system` and
`## user`; variables are written `{{name}}`. Rendering fails on a missing or an unused variable,
so a template and its caller cannot drift apart silently. Untrusted text (node contents and ids,
claims, questions, earlier replies) is passed through `fence()`, which wraps it in delimiter lines
the instructions refer to, normalises every Unicode line break and neutralises any delimiter-looking
line inside it, and escapes its label, so source text cannot pose as instructions.

Users can override any template: `set_prompt_dir(DIR)` (or config/env `VERITRAIL_PROMPT_DIR`)
makes files found there win over the packaged ones; `export_prompts(DIR)` writes the defaults.
"""

from __future__ import annotations

import functools
import json
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from ..lm.base import Message

_VAR = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
_SECTION = re.compile(r"^##\s+(system|user)\s*$", re.MULTILINE)

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


# The packages whose `prompts/` folder ships templates. The method's come first; template names
# are unique across the folders (a test keeps them so).
PROMPT_PACKAGES = ("veritrail.method", "veritrail.detectors", "veritrail.pipelines")


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


# Every boundary `str.splitlines()` recognises (a reader, or a tokenizer, may break a line at any
# of them); "\r\n" is one boundary.
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# "<", ">" and the only characters NFKC folds into them (small and fullwidth forms).
_ANGLES = "<>\ufe64\ufe65\uff1c\uff1e"
_ANGLE = re.compile(f"[{_ANGLES}]")
_MARKERS = ("<<<", ">>>")


def normalize_line_breaks(text: str) -> str:
    """`text` with every Unicode line boundary (CR LF, CR, VT, FF, FS, GS, RS, NEL, LS, PS) as LF."""
    return _LINE_BREAK.sub("\n", text)


def looks_like_fence_line(line: str) -> bool:
    """Whether a reader could take `line` for a fence line.

    Its first three visible characters (skipping whitespace and invisible characters such as
    zero-width spaces, bidi controls and other format or control characters), folded with NFKC
    (fullwidth and small forms of `<`/`>`), are `<<<` or `>>>`.
    """
    head: list[str] = []
    for ch in line:
        if ch.isspace() or not ch.isprintable():
            continue
        head.append(ch)
        if len(head) == 3:
            break
    return unicodedata.normalize("NFKC", "".join(head)).startswith(_MARKERS)


def _escape_char(ch: str) -> str:
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape_label(label: str) -> str:
    """`label` on one visible line: every character that is not printable, every whitespace
    character other than a plain space (line breaks included) and every `<`/`>` look-alike is
    written as a `\\uXXXX` escape, so no label can end its fence line or hold a fence marker."""
    if label.isascii() and label.isprintable() and not _ANGLE.search(label):
        return label
    return "".join(
        ch
        if ch == " " or (ch.isprintable() and not ch.isspace() and ch not in _ANGLES)
        else _escape_char(ch)
        for ch in label
    )


def quote_id(node_id: str) -> str:
    """An untrusted id for a fence label: a JSON string literal in printable ASCII with `<` and
    `>` escaped, so its extent is unambiguous and it decodes (`json.loads`) to the id itself."""
    return json.dumps(node_id, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e")


def fence(text: str, label: str, *, ids: Sequence[str] = ()) -> str:
    """Wrap untrusted `text` between a `<<< LABEL` line and a `>>> end LABEL` line.

    The one way untrusted text (node text and ids, claims, sub-claims, questions, summaries and
    reasoning from earlier replies) enters a prompt:

    * every Unicode line boundary in `text` becomes `\\n` (`normalize_line_breaks`), so the lines
      a reader sees are exactly the lines checked below;
    * a line of `text` that a reader could take for a fence line (`looks_like_fence_line`) gets
      a leading backslash, so the text can never close its fence or open another;
    * the label is escaped (`escape_label`), and `ids`, the untrusted parts of a label (node ids,
      community ids, file names), are appended as quoted strings (`quote_id`): a label can
      never break its line or carry a fence marker.

    The result has exactly one opening and one closing line, and no line in between that looks
    like either.
    """
    full = escape_label(f"{label} {', '.join(quote_id(i) for i in ids)}" if ids else label)
    body = normalize_line_breaks(text)
    if _ANGLE.search(body):
        body = "\n".join(
            "\\" + line if looks_like_fence_line(line) else line for line in body.split("\n")
        )
    return f"<<< {full}\n{body}\n>>> end {full}"
