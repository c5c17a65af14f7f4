"""Reading input files: one place that decides what a readable text or JSON input is.

Every file the CLI reads as input (DAG files, claims, oracle, TOML config, price file, prompt
overrides, adapter inputs) goes through this module, so every one follows the same rules
(documented in docs/dag-format.md, "Input files: encoding and nesting"):

* **UTF-8 only.** A UTF-8 byte order mark (BOM) at the start is accepted and dropped, in every
  input file alike. A UTF-16 or UTF-32 BOM is refused with a message that says so: decoding them
  here would still leave the line-by-line JSON Lines reader unable to split such a file, so one
  rule (re-save as UTF-8) is simpler than two.
* **Decoding errors name the byte and where it is**: the byte value, its 0-based offset in the
  file, and its 1-based line and column (the column counts characters, not bytes), with the hint
  to re-save the file as UTF-8. A NUL byte is refused the same way: no valid JSON or TOML file
  holds one, and in a text file it almost always means UTF-16 without a BOM, or a binary file.
* **JSON is strict**: ``NaN``, ``Infinity`` and ``-Infinity`` (which Python's parser accepts) are
  refused, as are numbers too large for a float (``1e999``) and integers longer than Python's
  4,300-digit conversion limit.
* **Nesting is bounded**: a JSON or TOML value nested more than `MAX_DEPTH` levels deep is refused
  with "nested too deeply". A value too deep for the parser itself (Python's recursive parsers
  give up near 1,000 levels with a `RecursionError`) is refused with the same message.
* **No lone surrogates**: a JSON escape ``\ud800``-``\udfff`` that is not half of a high/low pair
  decodes to a code point that is not a character: no UTF-8 file can hold it, so every file we
  would write from it (a DAG, a report) would fail half-way. It is refused, with its line and
  column, rather than replaced: replacing would silently change a text that is then quoted as
  evidence. (TOML refuses such escapes itself; the UTF-8 decoder refuses encoded surrogates.)

Every failure is an `InputError` (a `ValueError`) whose message starts with what the file is and
its path, e.g. ``claims file claims.json: not UTF-8: byte 0xe9 at offset 1234 (line 5, column
17); save the file as UTF-8``.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import math
import os
import re
import tempfile
import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Any

from . import errors

MAX_DEPTH = 100
"""Deepest nesting of arrays/objects (JSON) or arrays/tables (TOML) accepted in an input file.

A DAG file needs 3 levels, a claims file 3, an oracle file 4; 100 leaves room for free-form
`meta` objects while keeping every later recursive step (report writing, HTML rendering) far from
Python's recursion limit."""

_UTF8_BOM = codecs.BOM_UTF8
# UTF-32 first: the UTF-32-LE mark starts with the UTF-16-LE one.
_OTHER_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


class InputFault(StrEnum):
    """What kind of input failure an `InputError` is."""

    UNREADABLE = "unreadable"
    """Missing, a directory, no permission, or another OS error."""
    ENCODING = "encoding"
    """Not UTF-8 (a byte that does not decode, a UTF-16/32 BOM, a NUL byte)."""
    SYNTAX = "syntax"
    """Not valid JSON / TOML."""
    TOO_DEEP = "too_deep"
    """Nested more than `MAX_DEPTH` levels (or more than the parser can take)."""


class InputError(errors.InputProblem, ValueError):
    """An input file cannot be read, decoded or parsed. The message names the file and where;
    `reason` is the message without the file (for callers that name the file themselves)."""

    def __init__(
        self,
        message: str,
        problem: InputFault,
        path: str | Path | None = None,
        *,
        reason: str | None = None,
    ):
        super().__init__(message)
        self.problem = problem
        self.path = None if path is None else str(path)
        self.reason = message if reason is None else reason


def _label(path: str | Path, what: str) -> str:
    return f"{what} {path}" if what else str(path)


def _error(path: str | Path, what: str, reason: str, problem: InputFault) -> InputError:
    """The `InputError` "<what> <path>: <reason>"."""
    return InputError(f"{_label(path, what)}: {reason}", problem, path, reason=reason)


def open_error(exc: OSError, path: str | Path, what: str = "input file") -> InputError:
    """The `InputError` for an `OSError` met while opening or reading an input file."""
    if isinstance(exc, FileNotFoundError):
        reason = "not found"
    elif isinstance(exc, IsADirectoryError):
        reason = "is a directory, not a file"
    elif isinstance(exc, PermissionError):
        reason = "permission denied (cannot read it)"
    else:
        reason = f"cannot read the file ({exc.strerror or exc})"
    return _error(path, what, reason, InputFault.UNREADABLE)


class NotRegularFile(OSError):
    """A path that names a FIFO, a socket or a device where a regular file was expected."""


def read_regular_bytes(path: str | Path) -> bytes:
    """The bytes of a regular file; `NotRegularFile` (an `OSError`) for anything else. Opened
    without blocking and checked before reading: a FIFO planted where a run directory's file
    belongs must not hang the command that lists runs (a plain open waits for a writer)."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(0, "not a regular file", os.fspath(path))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def read_input_bytes(path: str | Path, what: str = "input file") -> bytes:
    """The file's bytes, or an `InputError` saying why it cannot be read (missing, a directory,
    no permission)."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise open_error(exc, path, what) from None


def bom_length(head: bytes, path: str | Path, what: str = "input file") -> int:
    """Length of a UTF-8 BOM at the start of `head` (0 or 3); `InputError` for a UTF-16/32 BOM."""
    if head.startswith(_UTF8_BOM):
        return len(_UTF8_BOM)
    for bom, name in _OTHER_BOMS:
        if head.startswith(bom):
            raise _error(
                path,
                what,
                f"the file is {name} (it starts with a {name} byte order mark); save it as UTF-8",
                InputFault.ENCODING,
            )
    return 0


def _where(data: bytes, pos: int, offset0: int, line0: int, skip: int = 0) -> str:
    """'offset N (line L, column C)' of byte `pos` of `data`, which starts at file offset
    `offset0` on file line `line0`; `skip` bytes of BOM are not a column. Columns count
    characters (1-based)."""
    line_start = max(data.rfind(b"\n", 0, pos) + 1, skip)
    line = line0 + data.count(b"\n", 0, pos)
    column = len(data[line_start:pos].decode("utf-8", "replace")) + 1
    return f"offset {offset0 + pos} (line {line}, column {column})"


def decode_input(
    data: bytes,
    path: str | Path,
    what: str = "input file",
    *,
    offset0: int = 0,
    line0: int = 1,
) -> str:
    """Decode input bytes as UTF-8, dropping a leading UTF-8 BOM (only at the start of the file,
    i.e. when `offset0` is 0). `offset0`/`line0` place `data` in the file for messages when it is
    one line of a larger file."""
    skip = bom_length(data[:4], path, what) if offset0 == 0 else 0
    try:
        text = data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        pos = skip + exc.start
        raise _error(
            path,
            what,
            f"not UTF-8: byte 0x{data[pos]:02x} at {_where(data, pos, offset0, line0, skip)}; "
            "save the file as UTF-8",
            InputFault.ENCODING,
        ) from None
    if "\0" in text:
        pos = data.find(b"\0")
        raise _error(
            path,
            what,
            f"NUL byte at {_where(data, pos, offset0, line0, skip)}: not a UTF-8 text file "
            "(UTF-16 without a byte order mark, or binary?); save it as UTF-8",
            InputFault.ENCODING,
        )
    return text


def read_input_text(path: str | Path, what: str = "input file") -> str:
    """Read a UTF-8 input text file (BOM dropped). Raises `InputError`."""
    return decode_input(read_input_bytes(path, what), path, what)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text} is too large")
    return value


# One strict decoder for every input: NaN and ±Infinity are not JSON (RFC 8259), and a number
# like 1e999 would silently become infinity.
_DECODER = json.JSONDecoder(parse_constant=_no_constants, parse_float=_finite)
_LENIENT = json.JSONDecoder()


def parse_json(
    text: str,
    path: str | Path,
    what: str = "input file",
    *,
    max_depth: int | None = MAX_DEPTH,
    one_line: bool = False,
) -> Any:
    """Parse JSON text strictly; `max_depth=None` skips the depth check (for callers that check
    only the parts they keep, e.g. a large DAG's `meta`); `one_line` (a JSON Lines record whose
    `path` already says the line) gives only the column of a syntax error. Raises `InputError`.

    `text` is what `decode_input` returns (so it holds no surrogate character itself); a JSON
    escape of a lone surrogate is refused (module docstring)."""
    try:
        value = _DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise _parse_error(exc, path, what, one_line) from None
    check_surrogates(text, path, what, one_line=one_line)
    if max_depth is not None:
        check_depth(value, path, what, max_depth=max_depth)
    return value


def parse_json_values(
    text: str,
    path: str | Path,
    what: str = "input file",
    *,
    max_depth: int = MAX_DEPTH,
    allow_constants: bool = False,
) -> list[Any]:
    """Every JSON value in `text`, in order: one document, JSON Lines, or documents one after
    another (pretty-printed objects), under the same rules as `parse_json`, each value's nesting
    checked. An empty text gives no value. Raises `InputError`.

    `allow_constants` accepts ``NaN``, ``Infinity`` and numbers past a float's range (as
    Python's parser does), for files that Python programs write with `json.dumps`, which emits
    them: an OpenTelemetry span's float attribute may be NaN."""
    decoder = _LENIENT if allow_constants else _DECODER
    out: list[Any] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _JSON_WS:
            i += 1
        if i >= n:
            check_surrogates(text, path, what)
            return out
        try:
            value, i = decoder.raw_decode(text, i)
        except (ValueError, RecursionError) as exc:
            raise _parse_error(exc, path, what, False) from None
        check_depth(value, path, what, max_depth=max_depth)
        out.append(value)


_JSON_WS = " \t\n\r"
"""JSON's whitespace (RFC 8259), the only characters allowed between values."""


def _parse_error(exc: Exception, path: str | Path, what: str, one_line: bool) -> InputError:
    """The `InputError` for what the JSON decoder raised."""
    if isinstance(exc, RecursionError):
        return too_deep(path, what)
    if isinstance(exc, json.JSONDecodeError):
        where = f"column {exc.colno}" if one_line else f"line {exc.lineno}, column {exc.colno}"
        return _error(path, what, f"not valid JSON: {exc.msg} ({where})", InputFault.SYNTAX)
    msg = str(exc)  # a NaN/Infinity constant, or an integer past the digit limit
    if "integer string conversion" in msg:
        msg = "a number has more than 4,300 digits"
    return _error(path, what, f"not valid JSON: {msg}", InputFault.SYNTAX)


# A JSON escape of a surrogate code point, and any escape (`\\` consumed as one, so that an
# escaped backslash followed by "ud800" is not taken for an escape).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_ANY_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def lone_surrogate(text: str) -> tuple[int, str] | None:
    """(offset, escape) of the first JSON escape in `text` that decodes to a lone surrogate: a
    high half (``\\ud800``-``\\udbff``) not directly followed by a low half's escape, or a low
    half (``\\udc00``-``\\udfff``) on its own, as Python's JSON decoder pairs them. None if there
    is none (a search in C; the escapes are walked only when one may be there)."""
    if _SURROGATE_ESCAPE.search(text) is None:
        return None
    high: tuple[int, str] | None = None
    high_end = -1
    for m in _ANY_ESCAPE.finditer(text):
        code = int(m.group(1), 16) if m.group(1) else -1
        if high is not None:
            if 0xDC00 <= code <= 0xDFFF and m.start() == high_end:
                high = None
                continue
            return high
        if 0xD800 <= code <= 0xDBFF:
            high, high_end = (m.start(), m.group(0)), m.end()
        elif 0xDC00 <= code <= 0xDFFF:
            return m.start(), m.group(0)
    return high


def check_surrogates(
    text: str, path: str | Path, what: str = "input file", *, one_line: bool = False
) -> None:
    """`InputError` naming the line and column of a JSON escape in `text` that decodes to a lone
    surrogate (`lone_surrogate`); `one_line`: only the column."""
    found = lone_surrogate(text)
    if found is None:
        return
    pos, escape = found
    column = pos - text.rfind("\n", 0, pos)
    line = text.count("\n", 0, pos) + 1
    where = f"column {column}" if one_line else f"line {line}, column {column}"
    raise _error(
        path,
        what,
        f"lone surrogate {escape} at {where}: half of a UTF-16 pair, not a character (the "
        "program that wrote the file cut a pair in two); write the character itself",
        InputFault.ENCODING,
    )


def too_deep(path: str | Path, what: str = "input file", max_depth: int = MAX_DEPTH) -> InputError:
    """The "nested too deeply" error."""
    return _error(
        path,
        what,
        f"nested too deeply (more than {max_depth} levels of arrays/objects)",
        InputFault.TOO_DEEP,
    )


def depth_exceeds(value: Any, max_depth: int = MAX_DEPTH, *, level: int = 1) -> bool:
    """True if `value`, found at nesting `level` of its file (1 = the top-level value), reaches
    past level `max_depth` with lists/tuples/dicts (iterative, so any depth is safe to check;
    stops at the first value too deep)."""
    # Exact type tests first, and scalars never pushed: every value of a large trace or DAG
    # meta passes through here (twice as fast as isinstance on each).
    stack: list[tuple[Any, int]] = [(value, level)]
    pop, push = stack.pop, stack.append
    while stack:
        v, d = pop()
        t = type(v)
        if t is dict:
            items: Any = v.values()
        elif t is list or t is tuple:
            items = v
        elif isinstance(v, dict):
            items = v.values()
        elif isinstance(v, list | tuple):
            items = v
        else:
            continue
        if d > max_depth:
            return True
        d += 1
        for x in items:
            tx = type(x)
            if (
                tx is not str
                and tx is not int
                and tx is not float
                and tx is not bool
                and x is not None
            ):
                push((x, d))
    return False


def check_depth(
    value: Any,
    path: str | Path,
    what: str = "input file",
    *,
    max_depth: int = MAX_DEPTH,
    level: int = 1,
) -> None:
    """`InputError` ("nested too deeply") if `value`, at nesting `level` of its file, reaches
    past level `max_depth`."""
    if depth_exceeds(value, max_depth, level=level):
        raise too_deep(path, what, max_depth)


def read_input_json(
    path: str | Path, what: str = "input file", *, max_depth: int | None = MAX_DEPTH
) -> Any:
    """Read and parse a JSON input file under the rules above. Raises `InputError`."""
    return parse_json(read_input_text(path, what), path, what, max_depth=max_depth)


def read_input_toml(path: str | Path, what: str = "config file") -> dict[str, Any]:
    """Read and parse a TOML input file under the rules above. Raises `InputError`."""
    text = read_input_text(path, what)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _error(path, what, f"not valid TOML: {exc}", InputFault.SYNTAX) from None
    except RecursionError:
        raise too_deep(path, what) from None
    check_depth(doc, path, what)
    return doc


__all__ = [
    "MAX_DEPTH",
    "InputError",
    "InputFault",
    "bom_length",
    "check_depth",
    "check_surrogates",
    "decode_input",
    "depth_exceeds",
    "fsync_dir",
    "lone_surrogate",
    "open_error",
    "parse_json",
    "parse_json_values",
    "read_input_bytes",
    "read_input_json",
    "read_input_text",
    "read_input_toml",
    "read_regular_bytes",
    "too_deep",
]


# -- writing ------------------------------------------------------------------------------------


def fsync_dir(folder: str | Path) -> None:
    """Make a rename or a file creation in `folder` itself durable (an fsync of the directory).
    Best effort: some platforms and file systems cannot open or fsync a directory."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically: a uniquely named temporary file in the same
    directory, flushed and fsync'ed, then `os.replace`d over `path`. A reader never sees half a
    file, a crash never leaves one behind, and two writers never share a temporary file.

    The text is encoded before any file is opened: a text that is not valid Unicode (a lone
    surrogate) raises `UnicodeEncodeError` with nothing created or replaced."""
    data = text.encode("utf-8")
    p = Path(path)
    try:
        mode = p.stat().st_mode & 0o777  # keep the permissions of the file being replaced
    except OSError:
        mode = 0o644  # mkstemp creates 0600; a report is meant to be read by others
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return p
