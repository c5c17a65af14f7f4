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

Every failure is an `InputError` (a `ValueError`) whose message starts with what the file is and
its path, e.g. ``claims file claims.json: not UTF-8: byte 0xe9 at offset 1234 (line 5, column
17); save the file as UTF-8``.
"""

from __future__ import annotations

import codecs
import json
import math
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


class InputProblem(StrEnum):
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
    """An input file cannot be read, decoded or parsed. The message names the file and where."""

    def __init__(self, message: str, problem: InputProblem, path: str | Path | None = None):
        super().__init__(message)
        self.problem = problem
        self.path = None if path is None else str(path)


def _label(path: str | Path, what: str) -> str:
    return f"{what} {path}" if what else str(path)


def open_error(exc: OSError, path: str | Path, what: str = "input file") -> InputError:
    """The `InputError` for an `OSError` met while opening or reading an input file."""
    label = _label(path, what)
    if isinstance(exc, FileNotFoundError):
        msg = f"{label}: not found"
    elif isinstance(exc, IsADirectoryError):
        msg = f"{label}: is a directory, not a file"
    elif isinstance(exc, PermissionError):
        msg = f"{label}: permission denied (cannot read it)"
    else:
        msg = f"{label}: cannot read the file ({exc.strerror or exc})"
    return InputError(msg, InputProblem.UNREADABLE, path)


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
            raise InputError(
                f"{_label(path, what)}: the file is {name} (it starts with a {name} byte order "
                "mark); save it as UTF-8",
                InputProblem.ENCODING,
                path,
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
        raise InputError(
            f"{_label(path, what)}: not UTF-8: byte 0x{data[pos]:02x} at "
            f"{_where(data, pos, offset0, line0, skip)}; save the file as UTF-8",
            InputProblem.ENCODING,
            path,
        ) from None
    if "\0" in text:
        pos = data.find(b"\0")
        raise InputError(
            f"{_label(path, what)}: NUL byte at {_where(data, pos, offset0, line0, skip)}: not a UTF-8 "
            "text file (UTF-16 without a byte order mark, or binary?); save it as UTF-8",
            InputProblem.ENCODING,
            path,
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
    `path` already says the line) gives only the column of a syntax error. Raises `InputError`."""
    label = _label(path, what)
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        where = f"column {exc.colno}" if one_line else f"line {exc.lineno}, column {exc.colno}"
        raise InputError(
            f"{label}: not valid JSON: {exc.msg} ({where})",
            InputProblem.SYNTAX,
            path,
        ) from None
    except RecursionError:
        raise too_deep(path, what) from None
    except ValueError as exc:  # a NaN/Infinity constant, or an integer past the digit limit
        msg = str(exc)
        if "integer string conversion" in msg:
            msg = "a number has more than 4,300 digits"
        raise InputError(f"{label}: not valid JSON: {msg}", InputProblem.SYNTAX, path) from None
    if max_depth is not None:
        check_depth(value, path, what, max_depth=max_depth)
    return value


def too_deep(path: str | Path, what: str = "input file", max_depth: int = MAX_DEPTH) -> InputError:
    """The "nested too deeply" error."""
    return InputError(
        f"{_label(path, what)}: nested too deeply (more than {max_depth} levels of arrays/objects)",
        InputProblem.TOO_DEEP,
        path,
    )


def depth_exceeds(value: Any, max_depth: int = MAX_DEPTH, *, level: int = 1) -> bool:
    """True if `value`, found at nesting `level` of its file (1 = the top-level value), reaches
    past level `max_depth` with lists/tuples/dicts (iterative, so any depth is safe to check;
    stops at the first value too deep)."""
    stack: list[tuple[Any, int]] = [(value, level)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            items: Any = v.values()
        elif isinstance(v, list | tuple):
            items = v
        else:
            continue
        if d > max_depth:
            return True
        stack.extend((x, d + 1) for x in items if isinstance(x, dict | list | tuple))
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
        raise InputError(
            f"{_label(path, what)}: not valid TOML: {exc}", InputProblem.SYNTAX, path
        ) from None
    except RecursionError:
        raise too_deep(path, what) from None
    check_depth(doc, path, what)
    return doc


__all__ = [
    "MAX_DEPTH",
    "InputError",
    "InputProblem",
    "bom_length",
    "check_depth",
    "decode_input",
    "depth_exceeds",
    "open_error",
    "parse_json",
    "read_input_bytes",
    "read_input_json",
    "read_input_text",
    "read_input_toml",
    "too_deep",
]
