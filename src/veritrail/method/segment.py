"""Sentence segmentation (docs/method.md#evidence-selection): deterministic, offline, computed once per node per run.

Text is first cut into blocks at line structure that prose splitters get wrong:

* blank lines end a block; Markdown headings (``# ...``), horizontal rules and table rows are
  blocks of their own; each bullet or numbered list item starts a block;
* a line without closing punctuation ends its block when the next line looks like a new start
  (begins with a capital, quote or bracket) and the line itself looks like a title (it
  starts like a sentence, no sentence ends inside it, it does not end with a comma or dash, and
  it is short or mostly Title Case without commas) — so ``Chapter One`` above
  ``It was ...`` is its own sentence while hard-wrapped prose (``... the United States and`` /
  ``most other parts ...``) stays joined;
* inside a list item, a line that is not indented past the item's marker and starts like a new
  sentence ends the item (``1. Numbered`` / ``Chapter One`` are two sentences).

* a fenced code block (a line opening with three or more backticks or tildes, up to its closing
  fence, or to the end of the text) is one unit, kept whole with its line breaks.

Each block is then split by nupunkt (a Punkt implementation with bundled parameters, so there is
no download at run time), which handles abbreviations, initials, decimals and quotes; its
abbreviation list is pruned of ordinary words (see `_ABBREVIATIONS`). Nothing is
dropped: the sentences of a text hold all of its non-whitespace characters, in order. Line breaks
inside a sentence become single spaces (none between two CJK characters). Sentence indices are
0-based within a node.

Beyond English prose, each decided per node text (never a global switch), and none of it can move
a boundary in English prose (so sentence ids recorded for English text stay valid):

* CJK (Chinese, Japanese): a text with CJK characters is first cut after full-width sentence
  punctuation (。！？．, and ! ? after a CJK character) and any closing quotes or brackets after it;
  each piece then goes through nupunkt as usual (for the Latin-script words inside it).
* German: in a text whose function words are German (`_is_german`), nupunkt's cuts after an
  ordinal (``am 3. Mai``, ``im 19. Jahrhundert``) and after German abbreviations (``Mio.``,
  ``bzw.``, ``Nr.``; `_DE_ABBREVIATIONS`) are undone. Other ordinal-dot languages (Danish,
  Norwegian, Finnish, Czech) write months in lower case, where nupunkt does not cut anyway.
* JSON (a node text that is one JSON object, a JSON array holding objects or arrays, or JSON
  Lines): one unit per leaf value, written ``key.path: value`` (strings unquoted; a long string is
  itself segmented and its first sentence carries the key path; a string holding JSON is
  unpacked). These units are not slices of the text, so `sentence_spans` does not apply to JSON
  (it gives the prose segmentation of the raw text).
* Markdown tables: each row (a line starting with ``|``) is its own unit, as are headings and
  rules.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..dag import Dag

Span = tuple[int, int]

_BULLET = re.compile(r"(?:[-*+•‣◦▪–]|\d{1,3}[.)]|[a-z][.)]|[A-Z]\)|\(\w{1,3}\))\s+\S")
_HEADING = re.compile(r"#{1,6}(?:\s|$)")
_RULE = re.compile(r"(?:[-*_=~]\s*){3,}$")
_CLOSERS = (".", "!", "?", ":", ";", '"', "'", "”", "’", ")", "]", "…")
_MARKUP = "*_`~"
_STARTERS = "\"'“‘([*_¿¡"
_TITLE_LEN = 40
_JOINERS = (",", "-", "–", "—", "/", "&", "+")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_INNER_END = re.compile(
    r"[.!?][\"'”’)\]]*\s"
)  # a sentence ends inside the line: prose, not a title
# CJK ideographs, kana, Hangul, CJK punctuation and full-width forms.
_CJK_CLASS = "\u2e80-\u2fdf\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_CJK = re.compile(f"[{_CJK_CLASS}]")
_CJK_STOPS = "。！？．"  # a text without any of them has no CJK sentence end to cut at
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$", re.M)
# A CJK sentence end: full-width 。！？．(or ! ? right after a CJK character), repeated, then any
# closing quotes or brackets. A full-width period before a digit is a decimal point.
_CJK_END = re.compile(
    f"(?:[。！？]|．(?![0-9０-９])|(?<=[{_CJK_CLASS}])[!?])[。！？!?]*[」』）》〉】〕〗〙”’\"')\\]]*"
)
_CJK_CLOSERS = "」』）》〉】〕〗〙”’\"')]"
_CJK_WORD = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# German: the end of a nupunkt sentence that may be a false cut (an ordinal or an abbreviation).
_DE_ABBREVIATION_LIST = """bzw vgl ca mio mrd nr nrn abb tab hrsg jh jhd geb gest ggf evtl inkl
    zzgl exkl bd aufl str tel abs kap anm sog bspw insb urspr ziff lt gem dipl ing mag jan feb mär
    apr jun jul aug sep sept okt nov dez tsd"""
_DE_ABBREVIATIONS = frozenset(_DE_ABBREVIATION_LIST.split())
_DE_CUT = re.compile(
    r"(?:(?:^|(?P<before>[^\W\d_]+)\s+)\d{1,3}|(?<![^\W\d_])(?P<abbr>"
    + "|".join(sorted(_DE_ABBREVIATION_LIST.split(), key=len, reverse=True))
    + r"))\.$",
    re.IGNORECASE,
)
_DE_ORDINAL_BEFORE_LIST = """am im vom zum zur beim bis ab seit um der die das den dem des ein eine einem einer eines
    jeden jede jedes dieser diesem dieses ihr ihre ihrem ihres sein seine seinem seines ihrer"""
_DE_ORDINAL_BEFORE = frozenset(_DE_ORDINAL_BEFORE_LIST.split())
_DE_MONTHS_LIST = """januar jänner februar märz april mai juni juli august september oktober november dezember
    jan feb mär apr jun jul aug sep sept okt nov dez jahrhundert jahrhunderts jh jahrtausend mal
    jahrestag geburtstag"""
_DE_MONTHS = frozenset(_DE_MONTHS_LIST.split())
# Function words that tell German from English (none is a common word of the other language).
_DE_WORDS_LIST = """der das und ist nicht mit ein eine dem des von zu auf für sich auch wurde wird sind bei
    nach aus über zum zur vom im einer sie wir ich es werden wurden hat haben oder aber wie"""
_DE_WORDS = frozenset(_DE_WORDS_LIST.split())
_EN_WORDS_LIST = (
    "the and of is to that was with for on are this be by from has have were which it as"
)
_EN_WORDS = frozenset(_EN_WORDS_LIST.split())
_WORDS_AZ = re.compile(r"[^\W\d_]+")
# Every character `str.splitlines` breaks on, so blocks can be flattened without moving offsets.
_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


# nupunkt's bundled model was trained on legal text: its abbreviation list holds thousands of
# ordinary words ("ago", "bus", "chase", "south", "all"), so "two years ago. Then" would stay one
# sentence. We keep the entries that cannot be ordinary words (with a period or digit inside:
# "e.g", "u.s", "p.m"; single letters, for initials) and this list of common abbreviations.
_ABBREVIATION_LIST = """mr mrs ms dr prof rev hon gen col lt sgt capt cmdr adm maj gov sen rep pres supt messrs mme
    mlle sr jr esq st ave blvd rd mt ft dept univ assn assoc bros co corp inc ltd llc plc etc vs
    viz cf al approx est ca fig figs no nos vol vols pp pg ed eds trans ibid para ref refs govt
    intl natl misc proc conf hr hrs yr yrs mo mos wk oz lb lbs sq cu tel ext attn encl jan feb
    mar apr jun jul aug sep sept oct nov dec mon tue tues thu thur thurs fri"""
_ABBREVIATIONS = frozenset(_ABBREVIATION_LIST.split())


@lru_cache(maxsize=1)
def _punkt() -> Callable[[str], list[Span]]:
    # Imported lazily: loading the bundled Punkt parameters is paid only when text is segmented.
    from nupunkt import load_default_model

    tok = load_default_model()  # a fresh instance: nupunkt's own shared tokenizer is untouched
    params = tok._params
    params.abbrev_types = {
        a for a in params.abbrev_types if not a.isalpha() or len(a) == 1 or a in _ABBREVIATIONS
    }
    params.invalidate_patterns()
    params.freeze_sets()

    def spans(text: str) -> list[Span]:
        return list(tok.span_tokenize(text))

    return spans


def _starts_sentence(line: str) -> bool:
    c = line[0]
    return c.isupper() or c.isdigit() or c in _STARTERS


def _looks_like_title(line: str) -> bool:
    """A line with no closing punctuation that reads like a title, not like a wrapped line."""
    bare = line.rstrip(_MARKUP)
    if (
        not bare
        or bare.endswith(_CLOSERS + _JOINERS)
        or not _starts_sentence(line)
        or _INNER_END.search(bare)
    ):
        return False
    if len(line) < _TITLE_LEN:
        return True
    if "," in bare or ";" in bare:
        return False
    # Long lines must be mostly Title Case (or ALL CAPS) in their longer words.
    words = [w for w in _WORD.findall(bare) if len(w) >= 4]
    return not words or sum(w[0].isupper() for w in words) >= 0.6 * len(words)


def _blocks(text: str) -> list[Span]:
    """(start, end) offsets of the blocks, each starting and ending on non-whitespace."""
    blocks: list[Span] = []
    start = end = -1  # current block; -1 = none open
    item_indent = -1  # marker indentation when the open block is a list item
    last = ""  # the open block's last line, stripped

    pos = 0
    for raw in text.splitlines(keepends=True):
        line_start = pos
        pos += len(raw)
        line = raw.strip()
        if not line:
            if start >= 0:
                blocks.append((start, end))
                start = -1
            continue
        indent = len(raw) - len(raw.lstrip())
        a = line_start + indent
        b = a + len(line)
        alone = bool(_HEADING.match(line) or _RULE.match(line) or line.startswith("|"))
        item = not alone and bool(_BULLET.match(line))
        if start >= 0 and not alone and not item:
            opens = _starts_sentence(line) and not line[0].isdigit()
            if item_indent >= 0:
                new = indent <= item_indent and opens
            else:
                new = opens and _looks_like_title(last)
        else:
            new = True
        if new and start >= 0:
            blocks.append((start, end))
            start = -1
        if start < 0:
            start = a
            item_indent = indent if item else -1
        end = b
        last = line
        if alone:
            blocks.append((start, end))
            start = -1
    if start >= 0:
        blocks.append((start, end))
    return blocks


def _fenced(text: str) -> list[Span]:
    """(start, end) of the fenced code blocks: from the opening fence's first character to the
    closing fence's last (or the text's last non-whitespace, when the fence is never closed).
    Found before block splitting, so texts without fences pay one substring test."""
    out: list[Span] = []
    pos = 0
    while (m := _FENCE_OPEN.search(text, pos)) is not None:
        fence, info = m.group(1), m.group(2)
        if fence[0] == "`" and "`" in info:  # ```inline``` on one line is not a fence
            pos = m.end()
            continue
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t\r]*$", re.M).search(
            text, m.end()
        )
        end = close.end() if close is not None else len(text)
        out.append((m.start(1), m.start(1) + len(text[m.start(1) : end].rstrip())))
        pos = end
    return out


def sentence_spans(text: str) -> list[Span]:
    """(start, end) character offsets of the sentences of `text`, in order, without overlaps.

    Each span starts and ends on a non-whitespace character; everything outside the spans is
    whitespace. This is the segmentation of the text as prose (with CJK, German and code blocks
    handled); JSON documents get leaf units from `split_sentences` instead.
    """
    tok = _punkt()
    # CJK sentence ends, found with C-speed substring tests (no regex pass over every text).
    cjk = not text.isascii() and (
        "。" in text or "！" in text or "？" in text or "．" in text  # _CJK_STOPS, unrolled
    )
    # German needs " und " before its word count is worth making; English prose says " the "
    # within its first words, which ends that test at once (a full scan for " und " cost 2 µs a
    # text: bench_segment.py). A German text quoting " the " keeps nupunkt's cuts.
    german = " the " not in text and " und " in text and _is_german(text)
    # A single-character test (memchr) first: most texts have no backtick or tilde at all.
    code = ("`" in text and "```" in text) or ("~" in text and "~~~" in text)
    if not (cjk or german or code):
        # English and most other text: nupunkt alone over each block, with no per-block test
        # (bench_segment.py: as fast as before this module knew other scripts).
        out: list[Span] = []
        for a, b in _blocks(text):
            _add_spans(tok, _LINE_BREAK.sub(" ", text[a:b]), a, out)
        return out
    return _spans_beyond_english(text, tok, cjk=cjk, german=german, code=code)


def _add_spans(tok: Callable[[str], list[Span]], flat: str, base: int, out: list[Span]) -> None:
    """Append nupunkt's sentences of `flat` (which starts at offset `base` of the text), each
    trimmed to its first and last non-whitespace character; `flat` has one space per line
    break, so offsets still match the text."""
    for s, e in tok(flat):
        piece = flat[s:e]
        lead = len(piece) - len(piece.lstrip())
        trail = len(piece) - len(piece.rstrip())
        if e - s > lead:
            out.append((base + s + lead, base + e - trail))


def _spans_beyond_english(
    text: str, tok: Callable[[str], list[Span]], *, cjk: bool, german: bool, code: bool
) -> list[Span]:
    """`sentence_spans` for a text with CJK sentence ends, German function words or fenced code."""
    out: list[Span] = []
    fenced: set[int] = set()
    if code:
        blocks: list[Span] = []
        at = 0
        for a, b in _fenced(text):
            blocks.extend((at + s, at + e) for s, e in _blocks(text[at:a]))
            blocks.append((a, b))
            fenced.add(a)
            at = b
        blocks.extend((at + s, at + e) for s, e in _blocks(text[at:]))
    else:
        blocks = _blocks(text)
    for a, b in blocks:
        if a in fenced:
            out.append((a, b))  # fenced code: one unit, kept whole
            continue
        flat = _LINE_BREAK.sub(" ", text[a:b])
        first = len(out)
        for p, q in _cjk_pieces(flat) if cjk else ((0, len(flat)),):
            _add_spans(tok, flat[p:q], a + p, out)
        if german and len(out) - first > 1:
            out[first:] = _merge_german(text, out[first:])
    return out


def _cjk_pieces(flat: str) -> list[Span]:
    """Cut a block after each CJK sentence end (with its closing quotes and brackets)."""
    pieces: list[Span] = []
    p = 0
    for m in _CJK_END.finditer(flat):
        # 「…。」と話した / “…。”他说: a quote closed right before more CJK text is reported
        # speech inside the sentence, not its end.
        if m.group()[-1] in _CJK_CLOSERS and _CJK_WORD.match(flat, m.end()):
            continue
        if m.end() < len(flat):
            pieces.append((p, m.end()))
            p = m.end()
    pieces.append((p, len(flat)))
    return pieces


def _merge_german(text: str, spans: list[Span]) -> list[Span]:
    """Undo nupunkt's cuts after German ordinals and abbreviations (German text only)."""
    out = [spans[0]]
    for a, b in spans[1:]:
        pa, pb = out[-1]
        if text[pb - 1] == ".":
            m = _DE_CUT.search(text[max(pa, pb - 40) : pb])
            if m is not None and _german_joins(m, text[a:b]):
                out[-1] = (pa, b)
                continue
        out.append((a, b))
    return out


def _german_joins(m: re.Match[str], nxt: str) -> bool:
    if m.group("abbr"):
        return True
    # An ordinal: after an article or preposition ("am 3.", "im 19.") or before a month.
    before = (m.group("before") or "").lower()
    first = nxt.split(None, 1)[0].rstrip(".,;:") if nxt.strip() else ""
    return before in _DE_ORDINAL_BEFORE or first.lower() in _DE_MONTHS


def _is_german(text: str) -> bool:
    """Whether the text's common function words are German rather than English."""
    de = en = 0
    for w in _WORDS_AZ.findall(text[:4000]):
        lw = w.lower()
        de += lw in _DE_WORDS
        en += lw in _EN_WORDS
    return de >= 2 and de > en


def split_sentences(text: str) -> list[str]:
    """Split `text` into sentences (line breaks inside a sentence become single spaces).

    A JSON document gives one unit per leaf value (see the module docstring); a fenced code block
    is one unit with its line breaks kept.
    """
    if _JSON_START.match(text):
        units = _json_units(text)
        if units is not None:
            return units
    out: list[str] = []
    for a, b in sentence_spans(text):
        s = text[a:b]
        if _LINE_BREAK.search(s):
            if s[:3] in ("```", "~~~"):
                out.append(s)  # fenced code keeps its lines
                continue
            s = _join_lines(s)
        out.append(s)
    return out


def sentence_offsets(text: str) -> list[Span] | None:
    """(start, end) code-point offsets in `text` of the sentences `split_sentences(text)` gives,
    index for index; None for a JSON document, whose units are not slices of the text.

    A sentence's slice ``text[start:end]`` is the sentence itself when it holds no line break;
    otherwise the sentence is that slice with its line breaks joined (fenced code keeps them).
    """
    if _JSON_START.match(text) and _json_units(text) is not None:
        return None
    return sentence_spans(text)


def _join_lines(s: str) -> str:
    parts = [part.strip() for part in s.splitlines() if part.strip()]
    if s.isascii() or not _CJK.search(s):
        return " ".join(parts)
    joined = parts[0]
    for part in parts[1:]:  # CJK writes no spaces between words: join CJK to CJK directly
        sep = "" if _CJK.match(joined[-1]) and _CJK.match(part[0]) else " "
        joined += sep + part
    return joined


# -- JSON tool outputs ----------------------------------------------------------------------------

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_JSON_START = re.compile(r"\s*[\[{]")


def _json_units(text: str) -> list[str] | None:
    """Leaf units of a JSON document or JSON Lines text; None when `text` is neither."""
    try:
        doc: object = json.loads(text)
    except ValueError:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) < 2:
            return None
        try:
            docs = [json.loads(ln) for ln in lines]
        except ValueError:
            return None
        if not all(isinstance(d, dict | list) for d in docs):
            return None
        doc = docs
    else:
        if not (
            isinstance(doc, dict)
            or (isinstance(doc, list) and any(isinstance(v, dict | list) for v in doc))
        ):
            return None  # "[1]" or "[citation needed]"-like text stays prose
    out: list[str] = []
    _leaves(doc, "", out, 0)
    return out or None


def _leaves(value: object, path: str, out: list[str], depth: int) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            key = str(k)
            sub = (
                (f"{path}.{key}" if path else key)
                if _KEY.fullmatch(key)
                else (f"{path}[{json.dumps(key, ensure_ascii=False)}]")
            )
            _leaves(v, sub, out, depth)
        return
    if isinstance(value, list) and value:
        for i, v in enumerate(value):
            _leaves(v, f"{path}[{i}]", out, depth)
        return
    label = f"{path}: " if path else ""
    if isinstance(value, str) and value.strip():
        inner = value.strip()
        if depth < 3 and inner[0] in "{[":
            nested = _json_units(inner)  # a tool output that carries JSON as a string
            if nested is not None:
                out.extend(
                    f"{path}.{u}" if path and not u.startswith("[") else f"{path}{u}"
                    for u in nested
                )
                return
        parts = split_sentences(inner) if len(inner) > _TITLE_LEN else [_join_lines(inner)]
        out.append(label + parts[0])
        out.extend(parts[1:])
        return
    out.append(label + json.dumps(value, ensure_ascii=False))


class SentenceIndex:
    """Per-run cache of node sentences: each node is segmented at most once, only when read.

    Shared by every claim of a run (claims never copy node text); safe to use from threads.
    """

    def __init__(self, dag: Dag, splitter: Callable[[str], list[str]] = split_sentences) -> None:
        self._dag = dag
        self._split = splitter
        self._cache: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def sentences(self, node_id: str) -> tuple[str, ...]:
        """The node's sentences (0-based indices)."""
        got = self._cache.get(node_id)
        if got is not None:
            return got
        with self._lock:  # one segmentation per node even when threads ask at the same time
            got = self._cache.get(node_id)
            if got is None:
                text = self._dag.node(node_id).text
                got = tuple(self._split(text)) or (text.strip(),)
                self._cache[node_id] = got
        return got

    @property
    def segmented(self) -> int:
        """How many nodes have been segmented so far."""
        return len(self._cache)
