"""Every bad input gets `error: ...` and exit 2, never a traceback (issue 14, point 11).

A table of malformed files is pushed through every command that reads them (`verify` for the DAG,
claims, oracle, config and price files, `dag validate`, `dag stats`, `extract`, `detect`,
`from-booookscore`, `from-graphrag --capture`). Each case must exit with status 2, print a first
line on stderr that starts with `error:` and names the file, print no traceback, and make no
model call (a loopback fake server counts the requests). Then: the UTF-8 BOM is accepted the same
way in every input file, an unusable cache is refused before any model call, and the reader in
`veritrail.textio` holds its rules for arbitrary bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from veritrail.cli.main import cli
from veritrail.testing import FakeOpenAIServer
from veritrail.textio import (
    MAX_DEPTH,
    InputError,
    InputFault,
    parse_json,
    read_input_json,
    read_input_text,
)

GRAPHRAG_INDEX = (
    Path(__file__).resolve().parents[3] / "shared" / "data" / "graphrag" / "operation_dulce"
)

DAG = {
    "nodes": [
        {"id": "r", "text": "Marley was dead: to begin with."},
        {"id": "t", "text": "Marley had died.", "sources": ["r"]},
    ]
}
CLAIMS = ["Marley had died."]
ORACLE = {
    "claims": [
        {"claim": "Marley had died.", "evidence": {"r": [0]}, "verdicts": ["Fully Supported"]}
    ]
}
REPORT_LIKE = {"format": "something-else", "version": 1}
BOOK = {"a-book": ["Summary after chunk one.", "Summary after chunk two."]}

# -- the bad contents ---------------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJ = '{"a":' * 100_000 + "1" + "}" * 100_000
JUST_TOO_DEEP = '{"a":' * MAX_DEPTH + "[]" + "}" * MAX_DEPTH  # 101 levels

# Problems with the file as a whole: every JSON input must refuse these, with this in the message.
FILE_LEVEL: dict[str, tuple[bytes | None, str]] = {
    "empty": (b"", "not valid JSON"),
    "whitespace": (b"  \n\n", "not valid JSON"),
    "latin1": (
        '{"x": "café"}'.encode("latin-1"),
        "not UTF-8: byte 0xe9 at offset 10 (line 1, column 11)",
    ),
    "utf16_bom": ('{"x": 1}'.encode("utf-16"), "is UTF-16"),
    "utf32_bom": ('{"x": 1}'.encode("utf-32"), "is UTF-32"),
    "utf16_no_bom": ('{"x": 1}'.encode("utf-16-le"), "NUL byte at offset 1"),
    "png": (b"\x89PNG\r\n\x1a\n" + bytes(64), "not UTF-8: byte 0x89 at offset 0"),
    "nan": (b'{"x": NaN}', "NaN is not a JSON value"),
    "infinity": (b'{"x": -Infinity}', "-Infinity is not a JSON value"),
    "too_large_float": (b'{"x": 1e999}', "1e999 is too large"),
    "huge_int": (b'{"x": ' + b"9" * 5000 + b"}", "more than 4,300 digits"),
    "deep_list": (DEEP.encode(), "nested too deeply"),
    # Half of a UTF-16 pair: no UTF-8 file can hold it (issue 29: a report or DAG written from
    # it failed half-way; a claims file crashed verify).
    "lone_surrogate": (
        b'["Marley had died \\ud800."]',
        "lone surrogate \\ud800 at line 1, column 19",
    ),
    "deep_object": (DEEP_OBJ.encode(), "nested too deeply"),
    "missing": (None, "not found"),
    "directory": (None, "directory"),
}

# Problems of shape, per kind of file.
DAG_SHAPES: dict[str, tuple[bytes, str]] = {
    "null": (b"null", '"nodes" list'),
    "string": (b'"text"', '"nodes" list'),
    "number": (b"3", '"nodes" list'),
    "no_nodes": (b'{"node": []}', '"nodes" list'),
    "nodes_not_list": (b'{"nodes": {}}', '"nodes" list'),
    "empty_nodes": (b'{"nodes": []}', "empty_dag"),
    "list_of_numbers": (b"[1, 2]", "malformed_node"),
    "wrong_types": (
        json.dumps({"nodes": [{"id": "a", "text": 2, "sources": "r", "stage": "x"}]}).encode(),
        "malformed_node",
    ),
    "non_string_ids": (json.dumps({"nodes": [{"id": 1, "text": "A."}]}).encode(), "malformed_node"),
    "duplicate_ids": (
        json.dumps({"nodes": [{"id": "a", "text": "A."}, {"id": "a", "text": "B."}]}).encode(),
        "duplicate_id",
    ),
    "bool_stage": (
        json.dumps({"nodes": [{"id": "a", "text": "A.", "stage": True}]}).encode(),
        "stage",
    ),
    "meta_not_object": (b'{"meta": [], "nodes": [{"id": "a", "text": "A."}]}', '"meta" must be'),
    "meta_too_deep": (
        b'{"meta": ' + JUST_TOO_DEEP.encode() + b', "nodes": [{"id": "a", "text": "A."}]}',
        "nested too deeply",
    ),
}
DAG_JSONL: dict[str, tuple[bytes, str]] = {
    "jsonl_one_bad_line": (
        b'{"id": "r", "text": "R."}\n{"id": "t", "text": "T.", "sources": ["r"]\n',
        "bad_json",
    ),
    "jsonl_latin1_line": (
        '{"id": "r", "text": "R."}\n{"id": "t", "text": "café", "sources": ["r"]}\n'.encode(
            "latin-1"
        ),
        "not UTF-8: byte 0xe9 at offset 50 (line 2, column 25)",
    ),
    "jsonl_deep_line": (
        b'{"id": "r", "text": "R."}\n' + DEEP.encode() + b"\n",
        "nested too deeply",
    ),
    "jsonl_utf16": ('{"id": "r", "text": "R."}\n'.encode("utf-16"), "is UTF-16"),
    "jsonl_lone_surrogate": (
        b'{"id": "r", "text": "R."}\n{"id": "t", "text": "T\\udc00.", "sources": ["r"]}\n',
        "lone surrogate \\udc00 at column 23",
    ),
}
CLAIMS_SHAPES: dict[str, tuple[bytes, str]] = {
    "null": (b"null", "expected a JSON array of claims"),
    "object": (b'{"x": 1}', "expected a JSON array of claims"),
    "claims_not_list": (b'{"claims": "a"}', "expected a JSON array of claims"),
    "number_items": (b"[1, 2]", "item 0: expected a string or an object"),
    "text_not_string": (b'[{"text": 5}]', "item 0: expected a string or an object"),
    "list_id": (b'[{"id": [1], "text": "a"}]', "item 0: id must be"),
    "bool_id": (b'[{"id": true, "text": "a"}]', "item 0: id must be"),
    "duplicate_ids": (
        b'[{"id": "c", "text": "a"}, {"id": "c", "text": "b"}]',
        "duplicate claim ids: c",
    ),
    "bool_index": (b'[{"text": "a", "sentence_indices": [true]}]', "sentence_indices"),
    "negative_index": (b'[{"text": "a", "sentence_indices": [-1]}]', "sentence_indices"),
    "empty_text": (b'["  "]', "empty claim text"),
    "no_claims": (b"[]", "no claims to verify"),
}
ORACLE_SHAPES: dict[str, tuple[bytes, str]] = {
    "null": (b"null", "invalid"),
    "list": (b"[]", "invalid"),
    "claims_not_list": (b'{"claims": "x"}', "claims: Input should be a valid list"),
    "wrong_types": (
        json.dumps({"claims": [{"claim": 1, "evidence": {"r": ["x"]}}]}).encode(),
        "claims.0.claim",
    ),
    "bad_label": (
        json.dumps({"claims": [{"claim": "Marley had died.", "verdicts": ["Maybe"]}]}).encode(),
        "claims.0.verdicts",
    ),
    "unknown_field": (json.dumps({"claims": [], "extra": 1}).encode(), "extra"),
    "claim_twice": (
        json.dumps(
            {"claims": [{"claim": "Marley had died."}, {"claim": "Marley had died."}]}
        ).encode(),
        "listed twice",
    ),
}
PRICE_SHAPES: dict[str, tuple[bytes, str]] = {
    "list": (b"[]", "a price file is a JSON object"),
    "not_numeric": (b'{"openai/test-model": {"input": "a", "output": 1}}', "needs numeric"),
    "missing_field": (b'{"openai/test-model": {"input": 1}}', "needs numeric"),
    "overflow": (
        b'{"openai/test-model": {"input": 1' + b"0" * 400 + b', "output": 1}}',
        "needs numeric",
    ),
}
TOML_CASES: dict[str, tuple[bytes | None, str]] = {
    "syntax": (b"q = [[[", "not valid TOML"),
    "deep": (b"q = " + DEEP.encode(), "nested too deeply"),
    "just_too_deep": (
        b"x = " + ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)).encode(),
        "nested too deeply",
    ),
    "latin1": (
        "question = 'café'".encode("latin-1"),
        "not UTF-8: byte 0xe9 at offset 15 (line 1, column 16)",
    ),
    "utf16_bom": ("q = 1".encode("utf-16"), "is UTF-16"),
    "nul": (b"q = 1\x00", "NUL byte at offset 5 (line 1, column 6)"),
    "unknown_setting": (b"nope = 1", "unknown setting 'nope'"),
    "wrong_type": (b"q = 'three'", "q = 'three'"),
    "verify_not_table": (b"verify = 3", "[verify] must be a table"),
    "missing": (None, "not found"),
    "directory": (None, "directory"),
}
TEXT_CASES: dict[str, tuple[bytes | None, str]] = {
    "latin1": (
        "Marley était mort.".encode("latin-1"),
        "not UTF-8: byte 0xe9 at offset 7 (line 1, column 8)",
    ),
    "utf16_bom": ("Marley died.".encode("utf-16"), "is UTF-16"),
    "utf16_no_bom": ("Marley died.".encode("utf-16-le"), "NUL byte at offset 1"),
    "png": (b"\x89PNG\r\n\x1a\n" + bytes(64), "byte 0x89 at offset 0"),
}
BOOK_SHAPES: dict[str, tuple[bytes, str]] = {
    "null": (b"null", "expected an object mapping book names"),
    "list": (b"[]", "expected an object mapping book names"),
    "empty_object": (b"{}", "expected an object mapping book names"),
    "neither_layout": (b'{"b": 3}', "neither the hierarchical nor the incremental"),
}
ATTACH_SHAPES: dict[str, tuple[bytes, str]] = {
    "not_a_report": (json.dumps(REPORT_LIKE).encode(), "not a VeriTrail report"),
    "list": (b"[]", "not a VeriTrail report"),
}
CAPTURE_SHAPES: dict[str, tuple[bytes, str]] = {
    "null": (b"null", "validation error"),
    "wrong_fields": (b'{"question": 1}', "validation error"),
}


# -- commands, with the bad file in one slot ----------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """A command line with one input replaced by the bad file."""

    name: str
    args: Callable[[Path, str], list[str]]
    """(directory with good inputs, bad file path) -> arguments."""
    suffix: str = ".json"
    model: bool = False
    """The command would call a model if the input were good (the fake server must see nothing)."""


def _verify(d: Path, *extra: str) -> list[str]:
    return [
        "verify",
        "--quiet",
        "--run-dir",
        str(d / "run"),
        "--out",
        str(d / "report.json"),
        *extra,
    ]


MODEL = ["--model", "openai/test-model"]

SLOTS: dict[str, Slot] = {
    s.name: s
    for s in [
        Slot(
            "verify-dag",
            lambda d, p: _verify(
                d, p, "--claims", f"{d}/claims.json", "--oracle", f"{d}/oracle.json"
            ),
        ),
        Slot(
            "verify-dag-jsonl",
            lambda d, p: _verify(
                d, p, "--claims", f"{d}/claims.json", "--oracle", f"{d}/oracle.json"
            ),
            suffix=".jsonl",
        ),
        Slot(
            "verify-claims",
            lambda d, p: _verify(d, f"{d}/dag.json", "--claims", p, "--oracle", f"{d}/oracle.json"),
        ),
        Slot(
            "verify-oracle",
            lambda d, p: _verify(d, f"{d}/dag.json", "--claims", f"{d}/claims.json", "--oracle", p),
        ),
        Slot(
            "verify-config",
            lambda d, p: _verify(
                d,
                f"{d}/dag.json",
                "--claims",
                f"{d}/claims.json",
                "--oracle",
                f"{d}/oracle.json",
                "--config",
                p,
            ),
            suffix=".toml",
        ),
        Slot(
            "verify-prices",
            lambda d, p: _verify(
                d, f"{d}/dag.json", "--claims", f"{d}/claims.json", *MODEL, "--prices", p
            ),
            model=True,
        ),
        Slot("dag-validate", lambda d, p: ["dag", "validate", p]),
        Slot("dag-stats", lambda d, p: ["dag", "stats", p]),
        Slot(
            "extract-dag", lambda d, p: ["extract", p, *MODEL, "--out", f"{d}/c.json"], model=True
        ),
        Slot(
            "extract-text",
            lambda d, p: ["extract", p, *MODEL, "--out", f"{d}/c.json"],
            suffix=".txt",
            model=True,
        ),
        Slot(
            "detect-dag",
            lambda d, p: ["detect", "--dag", p, *MODEL, "--out", f"{d}/d.json"],
            model=True,
        ),
        Slot(
            "detect-text",
            lambda d, p: [
                "detect",
                "--text",
                p,
                "--refs",
                f"{d}/ref.txt",
                *MODEL,
                "--out",
                f"{d}/d.json",
            ],
            suffix=".txt",
            model=True,
        ),
        Slot(
            "detect-refs",
            lambda d, p: [
                "detect",
                "--text",
                f"{d}/ref.txt",
                "--refs",
                p,
                *MODEL,
                "--out",
                f"{d}/d.json",
            ],
            suffix=".txt",
            model=True,
        ),
        Slot(
            "detect-attach",
            lambda d, p: [
                "detect",
                "--dag",
                f"{d}/dag.json",
                "--attach",
                p,
                *MODEL,
                "--out",
                f"{d}/d.json",
            ],
            model=True,
        ),
        Slot("from-booookscore", lambda d, p: ["from-booookscore", p, "--out-dir", f"{d}/books"]),
        Slot(
            "from-graphrag-capture",
            lambda d, p: [
                "from-graphrag",
                str(GRAPHRAG_INDEX),
                "--capture",
                p,
                "--out",
                f"{d}/g.json",
            ],
        ),
    ]
}

JSON_SLOTS = [
    "verify-dag",
    "verify-claims",
    "verify-oracle",
    "verify-prices",
    "dag-validate",
    "dag-stats",
    "extract-dag",
    "detect-dag",
    "detect-attach",
    "from-booookscore",
    "from-graphrag-capture",
]
DAG_SLOTS = ["verify-dag", "dag-validate", "dag-stats", "extract-dag", "detect-dag"]


def _cases() -> Iterator[tuple[str, str, bytes | None, str]]:
    for slot in JSON_SLOTS:
        for name, (content, expect) in FILE_LEVEL.items():
            yield slot, name, content, expect
    for slot in DAG_SLOTS:
        for name, (content, expect) in DAG_SHAPES.items():
            yield slot, name, content, expect
    for name, (content, expect) in DAG_JSONL.items():
        yield "verify-dag-jsonl", name, content, expect
        yield "dag-validate", name, content, expect  # sniffed: a .json name holding JSON Lines
    for shapes, slot in [
        (CLAIMS_SHAPES, "verify-claims"),
        (ORACLE_SHAPES, "verify-oracle"),
        (PRICE_SHAPES, "verify-prices"),
        (BOOK_SHAPES, "from-booookscore"),
        (ATTACH_SHAPES, "detect-attach"),
        (CAPTURE_SHAPES, "from-graphrag-capture"),
    ]:
        for name, (content, expect) in shapes.items():
            yield slot, name, content, expect
    for name, (tcontent, expect) in TOML_CASES.items():
        yield "verify-config", name, tcontent, expect
    for slot in ["extract-text", "detect-text", "detect-refs"]:
        for name, (tcontent, expect) in TEXT_CASES.items():
            yield slot, name, tcontent, expect


CASES = list(_cases())


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(responder=lambda req: "{}") as srv:
        yield srv


def _good_inputs(d: Path) -> None:
    (d / "dag.json").write_text(json.dumps(DAG), encoding="utf-8")
    (d / "claims.json").write_text(json.dumps(CLAIMS), encoding="utf-8")
    (d / "oracle.json").write_text(json.dumps(ORACLE), encoding="utf-8")
    (d / "ref.txt").write_text("Marley was dead: to begin with.", encoding="utf-8")


def _invoke(args: list[str], srv: FakeOpenAIServer) -> Result:
    env = {"VERITRAIL_BASE_URL": srv.base_url, "OPENAI_API_KEY": "test-key", "VERITRAIL_CACHE": "0"}
    return CliRunner(env=env).invoke(cli, args)


def _assert_input_error(res: Result, bad: Path, expect: str) -> None:
    out = res.output
    assert "Traceback" not in out
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, out
    lines = res.stderr.splitlines()
    assert lines, out
    if lines[0].startswith("Usage:"):
        # click's own check of a path option (`exists=True`, `dir_okay=False`): also exit 2, with
        # its usage error naming the file; only for a missing file or a directory.
        assert any(ln.startswith("Error: ") and bad.name in ln for ln in lines), out
        assert expect in ("not found", "directory"), out
        return
    assert lines[0].startswith("error: "), out
    assert str(bad) in lines[0], out
    assert expect in res.stderr, out


@pytest.mark.parametrize(
    ("slot", "name", "content", "expect"), CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES]
)
def test_bad_input_gives_error_and_exit_2(
    tmp_path: Path,
    server: FakeOpenAIServer,
    slot: str,
    name: str,
    content: bytes | None,
    expect: str,
) -> None:
    s = SLOTS[slot]
    if slot == "from-graphrag-capture":
        pytest.importorskip("pyarrow.parquet")
        if not GRAPHRAG_INDEX.is_dir():
            pytest.skip("shared/data/graphrag not present")
    _good_inputs(tmp_path)
    bad = tmp_path / f"bad-{name}{s.suffix}"
    if name == "directory":
        bad.mkdir()
    elif content is not None:
        bad.write_bytes(content)
    before = server.count
    res = _invoke(s.args(tmp_path, str(bad)), server)
    _assert_input_error(res, bad, expect)
    assert server.count == before, "a model call was made before the input was checked"
    if content is not None:
        assert bad.read_bytes() == content  # never overwritten


# -- the BOM is accepted the same way in every input file ----------------------------------------

BOM = b"\xef\xbb\xbf"


def test_a_utf8_bom_is_accepted_in_every_verify_input(tmp_path: Path) -> None:
    (tmp_path / "dag.json").write_bytes(BOM + json.dumps(DAG).encode())
    (tmp_path / "claims.json").write_bytes(BOM + json.dumps(CLAIMS).encode())
    (tmp_path / "oracle.json").write_bytes(BOM + json.dumps(ORACLE).encode())
    (tmp_path / "veritrail.toml").write_bytes(BOM + b"q = 2\n")
    res = CliRunner().invoke(
        cli,
        _verify(
            tmp_path,
            str(tmp_path / "dag.json"),
            "--claims",
            str(tmp_path / "claims.json"),
            "--oracle",
            str(tmp_path / "oracle.json"),
            "--config",
            str(tmp_path / "veritrail.toml"),
        ),
    )
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert [c["text"] for c in report["claims"]] == CLAIMS  # no U+FEFF in the claim
    assert [c["verdict"] for c in report["claims"]] == ["Fully Supported"]


def test_a_utf8_bom_is_accepted_in_jsonl_dags_price_files_texts_and_traces(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    jsonl = tmp_path / "dag.jsonl"
    jsonl.write_bytes(BOM + "".join(json.dumps(n) + "\n" for n in DAG["nodes"]).encode())
    assert CliRunner().invoke(cli, ["dag", "validate", str(jsonl)]).exit_code == 0
    prices = tmp_path / "prices.json"
    prices.write_bytes(BOM + b'{"openai/test-model": {"input": 1.5, "output": 2}}')
    (tmp_path / "claims.json").write_text(json.dumps(CLAIMS), encoding="utf-8")
    res = _invoke(
        [
            "verify",
            str(jsonl),
            "--claims",
            str(tmp_path / "claims.json"),
            *MODEL,
            "--prices",
            str(prices),
            "--dry-run",
        ],
        server,
    )
    assert res.exit_code == 0, res.output
    book = tmp_path / "book.json"
    book.write_bytes(BOM + json.dumps(BOOK).encode())
    res = CliRunner().invoke(
        cli, ["from-booookscore", str(book), "--out-dir", str(tmp_path / "books")]
    )
    assert res.exit_code == 0, res.output
    text = tmp_path / "t.txt"
    text.write_bytes(BOM + b"Marley died.")
    assert read_input_text(text) == "Marley died."


# -- the claims file example of the issue ---------------------------------------------------------


def test_a_latin1_claims_file_names_the_byte_and_where(tmp_path: Path) -> None:
    _good_inputs(tmp_path)
    claims = tmp_path / "claims.json"
    claims.write_bytes(
        '[\n  "Marley had died.",\n  "Scrooge was très mean."\n]\n'.encode("latin-1")
    )
    res = CliRunner().invoke(
        cli,
        _verify(
            tmp_path,
            str(tmp_path / "dag.json"),
            "--claims",
            str(claims),
            "--oracle",
            str(tmp_path / "oracle.json"),
        ),
    )
    assert res.exit_code == 2
    offset = claims.read_bytes().index(b"\xe8")
    assert res.stderr == (
        f"error: claims file {claims}: not UTF-8: byte 0xe8 at offset {offset} (line 3, column 18); "
        "save the file as UTF-8\n"
    )
    assert not (tmp_path / "run").exists()


# -- an unusable cache is refused before any model call -------------------------------------------


@pytest.mark.parametrize("where", ["under_a_file", "a_directory", "not_a_database"])
@pytest.mark.parametrize("command", ["verify", "extract", "detect"])
def test_an_unusable_cache_is_refused_before_any_model_call(
    tmp_path: Path, server: FakeOpenAIServer, where: str, command: str
) -> None:
    _good_inputs(tmp_path)
    (tmp_path / "plain-file").write_text("x", encoding="utf-8")
    cache = {
        "under_a_file": tmp_path / "plain-file" / "cache.sqlite",
        "a_directory": tmp_path,
        "not_a_database": tmp_path / "ref.txt",
    }[where]
    args = {
        "verify": _verify(
            tmp_path, str(tmp_path / "dag.json"), "--claims", str(tmp_path / "claims.json")
        ),
        "extract": ["extract", str(tmp_path / "dag.json"), "--out", str(tmp_path / "c.json")],
        "detect": [
            "detect",
            "--dag",
            str(tmp_path / "dag.json"),
            "--out",
            str(tmp_path / "d.json"),
        ],
    }[command]
    before = server.count
    res = _invoke([*args, *MODEL, "--cache", str(cache)], server)
    assert "Traceback" not in res.output
    assert res.exit_code == 2, res.output
    first = res.stderr.splitlines()[0]
    assert first.startswith(f"error: cannot use the model cache {cache}: "), res.output
    assert "--cache off" in first
    if where == "under_a_file":
        assert f"{tmp_path / 'plain-file'} is a file, not a directory" in first
    assert server.count == before
    assert (tmp_path / "ref.txt").read_text(encoding="utf-8").startswith("Marley")  # not clobbered


def test_cache_stats_on_a_file_that_is_not_a_cache(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_bytes(b"not sqlite at all " * 10)
    res = CliRunner().invoke(cli, ["cache", "stats", "--cache", str(bogus)])
    assert res.exit_code == 2
    assert res.stderr.startswith(
        f"error: cannot use the model cache {bogus}: file is not a database"
    )


# -- the reader itself -----------------------------------------------------------------------------


def test_depth_limit_is_exact() -> None:
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(ok, "x.json") is not None
    with pytest.raises(InputError) as ei:
        parse_json("[" + ok + "]", "x.json")
    assert ei.value.problem is InputFault.TOO_DEEP
    assert (
        str(ei.value)
        == f"input file x.json: nested too deeply (more than {MAX_DEPTH} levels of arrays/objects)"
    )


def test_columns_count_characters_and_the_bom_is_not_one(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    p.write_bytes(BOM + '["naïve", "日本",\n "ok", "\xff"]'.encode().replace(b"\xc3\xbf", b"\xff"))
    with pytest.raises(InputError) as ei:
        read_input_json(p, "claims file")
    offset = p.read_bytes().index(b"\xff")
    assert f"byte 0xff at offset {offset} (line 2, column 9)" in str(ei.value)
    q = tmp_path / "d.json"
    q.write_bytes(BOM + b"[\xff]")
    with pytest.raises(InputError, match=r"byte 0xff at offset 4 \(line 1, column 2\)"):
        read_input_json(q)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_give_a_value_or_an_input_error(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    p = tmp_path_factory.mktemp("bytes") / "x.json"
    p.write_bytes(data)
    try:
        read_input_json(p, "claims file")
    except InputError as exc:
        assert str(exc).startswith(f"claims file {p}: ")
        assert "\n" not in str(exc)


def _has_lone_surrogate(text: str) -> bool:
    """A surrogate code point that is not a high half followed by a low half."""
    i = 0
    while i < len(text):
        if "\ud800" <= text[i] <= "\udbff" and "\udc00" <= text[i + 1 : i + 2] <= "\udfff":
            i += 2
        elif "\ud800" <= text[i] <= "\udfff":
            return True
        else:
            i += 1
    return False


# Any characters, and surrogates (which st.characters() leaves out): halves of pairs, alone or not.
WITH_SURROGATES = st.one_of(
    st.characters(),
    st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00", "\\", "u"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=WITH_SURROGATES, max_size=6), max_size=4))
def test_a_lone_surrogate_escape_is_refused_and_a_pair_is_not(texts: list[str]) -> None:
    # Strings as json.dumps escapes them: the reader refuses exactly those with a lone
    # surrogate, and reads a high half followed by a low half as one character.
    doc = json.dumps(texts)
    try:
        got = parse_json(doc, "x.json")
    except InputError as exc:
        assert any(_has_lone_surrogate(t) for t in texts), str(exc)
        assert exc.problem is InputFault.ENCODING and "lone surrogate" in str(exc)
    else:
        assert not any(_has_lone_surrogate(t) for t in texts)
        assert got == [t.encode("utf-16-le", "surrogatepass").decode("utf-16-le") for t in texts]


def test_a_utf8_bom_and_a_lone_surrogate_in_a_trace(tmp_path: Path) -> None:
    # from-trace read its file apart from this module: a BOM was "not valid JSON", a lone
    # surrogate reached the DAG writer (which left --out truncated).
    trace = {
        "id": "t",
        "input": "Who died?",
        "output": "Marley had died.",
        "observations": [
            {
                "id": "g",
                "type": "GENERATION",
                "startTime": "2025-05-01T10:00:01Z",
                "input": "Marley was dead: to begin with. Who died?",
                "output": "Marley had died.",
            }
        ],
    }
    good = tmp_path / "trace.json"
    good.write_bytes(BOM + json.dumps(trace).encode())
    res = CliRunner().invoke(cli, ["from-trace", str(good), "--out", str(tmp_path / "d.json")])
    assert res.exit_code == 0, res.output
    bad = tmp_path / "bad.json"
    bad.write_bytes(json.dumps(trace).replace("Marley had died.", "Marley \\ud800").encode())
    before = (tmp_path / "d.json").read_bytes()
    res = CliRunner().invoke(cli, ["from-trace", str(bad), "--out", str(tmp_path / "d.json")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.startswith(f"error: {bad}: lone surrogate \\ud800 at line 1, column ")
    assert (tmp_path / "d.json").read_bytes() == before


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
    st.booleans(),
)
def test_any_utf8_text_reads_back_with_or_without_a_bom(
    tmp_path_factory: pytest.TempPathFactory, text: str, bom: bool
) -> None:
    p = tmp_path_factory.mktemp("text") / "t.txt"
    p.write_bytes((BOM if bom else b"") + text.encode("utf-8"))
    assert read_input_text(p) == (text if bom or not text.startswith("\ufeff") else text[1:])
