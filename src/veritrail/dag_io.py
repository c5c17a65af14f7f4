"""DAG files (docs/dag-format.md): telling JSON from JSON Lines, reading node records, `load_dag`,
`save_dag`, and the packaged JSON Schema.

Files are read under the input rules of `veritrail.textio` (UTF-8, an optional UTF-8 BOM, strict
JSON, bounded nesting); a file that cannot be read is reported as a `DagValidationError` (codes
``unreadable``, ``bad_encoding``, ``bad_json``, ``too_deep``, ``bad_format``) like an invalid DAG,
so that callers handle one exception. Public names are re-exported by `veritrail.dag`, the module
to import them from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .dag_model import Dag, build_dag
from .dag_validate import DagProblem, DagValidationError, ProblemCode
from .redaction import redact_obj
from .textio import (
    InputError,
    InputFault,
    atomic_write_text,
    bom_length,
    check_depth,
    decode_input,
    open_error,
    parse_json,
    read_input_bytes,
)

_TOP_KEY = re.compile(rb'^\{\s*"(nodes|meta)"\s*:')

_WHAT = "DAG file"

_CODE_OF = {
    InputFault.UNREADABLE: ProblemCode.UNREADABLE,
    InputFault.ENCODING: ProblemCode.BAD_ENCODING,
    InputFault.SYNTAX: ProblemCode.BAD_JSON,
    InputFault.TOO_DEEP: ProblemCode.TOO_DEEP,
}


def _file_error(exc: InputError, p: Path) -> DagValidationError:
    return DagValidationError([DagProblem(_CODE_OF[exc.problem], str(exc), ())], p)


def _sniff_jsonl(p: Path) -> bool:
    """JSON Lines or one JSON document? By suffix, else by whether the first line is a node."""
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        return True
    size = 1 << 16
    try:
        with p.open("rb") as fh:
            head = fh.read(size)
    except OSError:
        return False  # reading the whole file reports it
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if not head.startswith(b"{"):
        return False
    nl = head.find(b"\n")
    try:
        first = json.loads(head if nl < 0 else head[:nl])
    except RecursionError:
        return False  # reading it as one document reports "nested too deeply"
    except ValueError:
        # A pretty-printed document, or a first line longer than the sniffed head.
        return nl < 0 and len(head) >= size - 3 and not _TOP_KEY.match(head)
    return (
        isinstance(first, dict)
        and "nodes" not in first
        and ("id" in first or set(first) == {"meta"})
    )


def _open_records(
    p: Path, problems: list[DagProblem]
) -> tuple[Iterator[tuple[str, Any]], dict[str, Any]]:
    """(positioned records, meta); read and parse failures are appended to `problems`."""
    try:
        if _sniff_jsonl(p):
            return _jsonl_records(p, problems)
        # Only `meta` is kept as-is; node fields are type-checked one by one and others are
        # dropped, so the depth of the whole document need not be walked (a 36 MB file would
        # pay ~0.25 s for it). Nesting beyond the parser's reach is still refused while parsing.
        doc = parse_json(
            decode_input(read_input_bytes(p, _WHAT), p, _WHAT), p, _WHAT, max_depth=None
        )
    except InputError as exc:
        raise _file_error(exc, p) from None
    if isinstance(doc, list):
        return _drain(doc), {}
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise DagValidationError(
            [
                DagProblem(
                    ProblemCode.BAD_FORMAT,
                    f'{_WHAT} {p}: expected an object with a "nodes" list (or a list of nodes)',
                    (),
                )
            ],
            p,
        )
    meta = doc.get("meta")
    if meta is not None and not isinstance(meta, dict):
        problems.append(
            DagProblem(ProblemCode.BAD_FORMAT, f'{_WHAT} {p}: "meta" must be an object', ())
        )
    elif meta is not None:
        try:
            check_depth(meta, p, f'"meta" of {_WHAT}', level=2)
        except InputError as exc:
            raise _file_error(exc, p) from None
    return _drain(doc["nodes"]), meta if isinstance(meta, dict) else {}


def _drain(nodes: list[Any]) -> Iterator[tuple[str, Any]]:
    # Let each parsed record go as soon as it is consumed, so the raw dicts of a large file do not
    # all stay alive next to the Node objects built from them.
    for i in range(len(nodes)):
        rec = nodes[i]
        nodes[i] = None
        yield f"#{i + 1}", rec


_ID_IN_LINE = re.compile(rb'"id"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _parse_line(raw: bytes, p: Path, offset: int, lineno: int) -> Any:
    """One JSON Lines record (raises `InputError`; `offset` is where the line starts)."""
    text = decode_input(raw, p, _WHAT, offset0=offset, line0=lineno)
    return parse_json(text, f"{p}:{lineno}", "", max_depth=None, one_line=True)


def _jsonl_records(
    p: Path, problems: list[DagProblem]
) -> tuple[Iterator[tuple[str, Any]], dict[str, Any]]:
    meta: dict[str, Any] = {}
    start = start_line = 0
    # The optional meta line must come first; read it now so that callers get meta up front.
    try:
        fh = p.open("rb")
    except OSError as exc:
        raise open_error(exc, p, _WHAT) from None
    with fh:
        # A UTF-8 BOM is skipped like in every input file; a UTF-16/32 one is refused.
        bom = bom_length(fh.read(4), p, _WHAT)
        fh.seek(bom)
        offset = bom
        for line in fh:
            start_line += 1
            s = line.strip()
            if s and not s.startswith(b"//"):
                try:
                    first = _parse_line(line, p, offset, start_line)
                except InputError:
                    break  # reported with the other lines
                if (
                    isinstance(first, dict)
                    and set(first) == {"meta"}
                    and isinstance(first["meta"], dict)
                ):
                    check_depth(first["meta"], p, f'"meta" of {_WHAT}', level=2)
                    meta = first["meta"]
                    start = fh.tell()
                break
            offset += len(line)
        if start == 0:
            start_line = 0
            start = bom

    def gen() -> Iterator[tuple[str, Any]]:
        with p.open("rb") as fh:
            fh.seek(start)
            lineno = start_line
            offset = start
            for line in fh:
                lineno += 1
                at = offset
                offset += len(line)
                s = line.strip()
                if not s or s.startswith(b"//"):
                    continue
                try:
                    rec = _parse_line(line, p, at, lineno)
                except InputError as exc:
                    m = _ID_IN_LINE.search(s)
                    nid = m.group(1).decode("utf-8", "replace") if m else None
                    msg = str(exc)
                    if nid:
                        # "file:line: ..." -> "file:line (node 'x'): ..." for syntax errors;
                        # decoding errors already say the offset, line and column.
                        msg = msg.replace(f"{p}:{lineno}:", f"{p}:{lineno} (node {nid!r}):", 1)
                    problems.append(DagProblem(_CODE_OF[exc.problem], msg, (f"line {lineno}",)))
                    if nid:  # still a known id, so its children do not report it as unknown
                        yield f"line {lineno}", {"id": nid, "text": "?"}
                    continue
                yield f"line {lineno}", rec

    return gen(), meta


def iter_node_records(path: str | Path) -> tuple[Iterator[dict[str, Any]], dict[str, Any]]:
    """Open a DAG file (JSON or JSON Lines, chosen by suffix, else by content) and return
    (records, meta). Records stream from JSON Lines files; parse failures are raised as one
    `DagValidationError` when the iteration ends (or at once for a JSON document)."""
    p = Path(path)
    problems: list[DagProblem] = []
    positioned, meta = _open_records(p, problems)

    def gen() -> Iterator[dict[str, Any]]:
        for _, rec in positioned:
            yield rec
        if problems:
            raise DagValidationError(problems, p)

    return gen(), meta


def load_dag(path: str | Path) -> Dag:
    """Load and validate a DAG file; raises `DagValidationError` listing every problem."""
    p = Path(path)
    problems: list[DagProblem] = []
    records, meta = _open_records(p, problems)
    return build_dag(records, meta, problems, p)


def save_dag(dag: Dag, path: str | Path) -> None:
    """Write a DAG as JSON (one node per line) or as JSON Lines when the path ends in .jsonl.

    Stages are always written, so a reload gives the same stages even if they were computed.
    Secrets in the texts and meta (keys, auth headers, URL credentials: `redaction.redact_obj`)
    are written as `***`, as in every file veritrail writes; the file is replaced atomically
    (`textio.atomic_write_text`), so a failed write never leaves half a DAG in its place.
    """
    p = Path(path)
    # One pass over the whole document: `redact_obj` looks the secrets up once per call.
    meta, records = redact_obj([dag.meta or None, dag.to_records()])
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        lines = [json.dumps({"meta": meta}, ensure_ascii=False)] if meta else []
        lines += [json.dumps(rec, ensure_ascii=False) for rec in records]
        text = "".join(line + "\n" for line in lines)
    else:
        head = '{"meta": ' + json.dumps(meta, ensure_ascii=False) + ",\n" if meta else "{"
        body = ",\n".join(json.dumps(rec, ensure_ascii=False) for rec in records)
        text = head + '"nodes": [\n' + body + "\n]}\n"
    atomic_write_text(p, text)


def dag_schema() -> dict[str, Any]:
    """The JSON Schema of DAG files shipped with the package (`schemas/dag.schema.json`)."""
    from importlib.resources import files

    doc: dict[str, Any] = json.loads(
        files("veritrail").joinpath("schemas/dag.schema.json").read_text("utf-8")
    )
    return doc
