"""The one function that puts untrusted text into a prompt: `fence`.

Every prompt of the package (the method's steps, the model wrapper's re-asks, the detectors, the
reference pipelines) passes node text and ids, claims, questions and earlier replies through
`fence()`, which wraps the text between delimiter lines the instructions refer to, normalises every
Unicode line break and neutralises any delimiter-looking line inside it, and escapes its label, so
source text cannot pose as instructions or forge a fence (hypothesis tests in
tests/test_fencing.py). It lives at the top of the package, below the model layer and the method,
because both use it; it imports nothing of veritrail.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence

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
