"""`veritrail from-trace` and `veritrail batch` on the inputs of issue 29, item 3.

Each bad trace must give exit status 2 with one first line `error: ...` that names the file, no
traceback, the trace unchanged and an existing `--out` file unchanged (no temporary file left
either): parent ids that go round in a circle, items of the wrong type at every level of OTLP
JSON, nesting too deep for the parser (in the file, or in a JSON text inside an attribute), a lone
surrogate (in the file, or in a JSON text inside an attribute), and a few more of the same kind.
A UTF-8 BOM is accepted, as in every other input file. A batch manifest line goes through the
same reader: too deep, a lone surrogate, a BOM.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from veritrail.cli.main import cli
from veritrail.testing import FakeOpenAIServer

QUESTION = "When does the summit hut on Mount Oro open?"
CONTEXT = "Mount Oro is 2,310 metres high. Its summit hut opens in June every year."
ANSWER = "The summit hut on Mount Oro opens in June."
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_995 = "[" * 995 + "]" * 995
"""Below the parser's own limit: the walks after it gave the RecursionError."""
OLD_OUT = b'{"nodes": [{"id": "kept", "text": "An earlier DAG."}]}\n'

# -- the three formats, built from (id, parent, kind, start, end, input, output) rows -------------

Row = tuple[str, "str | None", str, int, int, Any, Any]


def _rows(root_parent: str | None = None, llm_parent: str = "root") -> list[Row]:
    return [
        ("root", root_parent, "CHAIN", 0, 9, QUESTION, ANSWER),
        ("llm", llm_parent, "LLM", 1, 2, f"{CONTEXT}\n\n{QUESTION}", ANSWER),
    ]


def _sv(value: Any) -> dict[str, Any]:
    return {"stringValue": value if isinstance(value, str) else json.dumps(value)}


def _hex_id(name: str) -> str:
    return name.encode().hex().rjust(16, "0")[-16:]


def otlp(rows: list[Row], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """OTLP JSON (the collector's file exporter) with OpenInference attributes; `extra` adds
    raw OTLP attribute values to the LLM span."""
    spans = []
    for sid, parent, kind, t0, t1, inp, out in rows:
        attrs = [
            {"key": "openinference.span.kind", "value": _sv(kind)},
            {"key": "input.value", "value": _sv(inp)},
            {"key": "output.value", "value": _sv(out)},
        ]
        if kind == "LLM":
            attrs += [{"key": k, "value": v} for k, v in (extra or {}).items()]
        spans.append(
            {
                "traceId": "5b8efff798038103d269b633813fc60c",
                "spanId": _hex_id(sid),
                "parentSpanId": "" if parent is None else _hex_id(parent),
                "name": sid,
                "startTimeUnixNano": str(1_700_000_000_000_000_000 + t0 * 1_000_000),
                "endTimeUnixNano": str(1_700_000_000_000_000_000 + t1 * 1_000_000),
                "attributes": attrs,
            }
        )
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}


def sdk(rows: list[Row]) -> str:
    """opentelemetry-sdk `ReadableSpan.to_json()` objects, one per line."""
    out = []
    for sid, parent, kind, t0, t1, inp, outp in rows:
        out.append(
            {
                "name": sid,
                "context": {"trace_id": "0x" + "ab" * 16, "span_id": "0x" + sid},
                "parent_id": None if parent is None else "0x" + parent,
                "start_time": f"2025-05-01T10:00:{t0:02d}.000000Z",
                "end_time": f"2025-05-01T10:00:{t1:02d}.000000Z",
                "attributes": {
                    "openinference.span.kind": kind,
                    "input.value": inp if isinstance(inp, str) else json.dumps(inp),
                    "output.value": outp,
                },
            }
        )
    return "".join(json.dumps(o) + "\n" for o in out)


def langfuse(rows: list[Row]) -> list[dict[str, Any]]:
    """A bare list of Langfuse observations (no trace object around them)."""
    types = {"CHAIN": "SPAN", "LLM": "GENERATION"}
    return [
        {
            "id": sid,
            "traceId": "t-1",
            "type": types[kind],
            "name": sid,
            "startTime": f"2025-05-01T10:00:{t0:02d}.000Z",
            "endTime": f"2025-05-01T10:00:{t1:02d}.000Z",
            "parentObservationId": parent,
            "input": inp,
            "output": out,
        }
        for sid, parent, kind, t0, t1, inp, out in rows
    ]


def _b(doc: Any) -> bytes:
    return (doc if isinstance(doc, str) else json.dumps(doc)).encode()


def _otlp_with(edit: Callable[[dict[str, Any]], None]) -> bytes:
    doc = otlp(_rows())
    edit(doc)
    return _b(doc)


def _first_span(doc: dict[str, Any]) -> dict[str, Any]:
    span: dict[str, Any] = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    return span


# -- the table: name -> (file content, what the error line must say) --------------------------------

CASES: dict[str, tuple[bytes, str]] = {
    # Parent ids in a circle (no top-level span was left: `max() arg is an empty sequence`).
    "otlp_self_parent": (_b(otlp(_rows(root_parent="root"))), "is its own parent"),
    "otlp_cycle": (_b(otlp(_rows(root_parent="llm"))), "form a cycle of 2 spans"),
    "sdk_self_parent": (_b(sdk(_rows(root_parent="root"))), "is its own parent"),
    "sdk_cycle": (_b(sdk(_rows(root_parent="llm"))), "form a cycle of 2 spans"),
    "langfuse_self_parent": (_b(langfuse(_rows(root_parent="root"))), "is its own parent"),
    "langfuse_cycle": (_b(langfuse(_rows(root_parent="llm"))), "form a cycle of 2 spans"),
    # Wrong types in OTLP JSON (AttributeError / TypeError / ValueError tracebacks).
    "resource_spans_item_string": (
        _b({"resourceSpans": ["x"]}),
        "resourceSpans[0] must be an object",
    ),
    "scope_spans_item_string": (
        _b({"resourceSpans": [{"scopeSpans": ["x"]}]}),
        "scopeSpans[0] must be an object",
    ),
    "spans_a_number": (
        _b({"resourceSpans": [{"scopeSpans": [{"spans": 5}]}]}),
        "spans must be a list",
    ),
    "attributes_a_number": (
        _otlp_with(lambda d: _first_span(d).update(attributes=5)),
        "attributes must be a list",
    ),
    "array_value_a_list": (
        _b(otlp(_rows(), {"tags": {"arrayValue": [{"stringValue": "a"}]}})),
        'arrayValue must be an object with a "values" list',
    ),
    "kvlist_item_a_string": (
        _b(otlp(_rows(), {"meta": {"kvlistValue": {"values": ["x"]}}})),
        "a kvlistValue item must be an object",
    ),
    "kvlist_key_a_list": (
        _b(otlp(_rows(), {"meta": {"kvlistValue": {"values": [{"key": ["k"], "value": {}}]}}})),
        'with a string "key"',
    ),
    "int_value_abc": (
        _b(otlp(_rows(), {"llm.token_count.total": {"intValue": "abc"}})),
        "intValue 'abc' is not an integer",
    ),
    # Too deep: for the parser (RecursionError while parsing) or for what walks it after.
    "deep_file": (_b(DEEP), "nested too deeply"),
    "deep_995_in_langfuse_input": (
        # Spliced in as text: json.dumps and json.loads themselves recurse too deep under pytest.
        _b(langfuse([*_rows()[:1], ("llm", "root", "LLM", 1, 2, "<deep>", ANSWER)])).replace(
            b'"<deep>"', DEEP_995.encode()
        ),
        "nested too deeply",
    ),
    "deep_json_text_in_attribute": (
        _b(otlp([_rows()[0], ("llm", "root", "LLM", 1, 2, DEEP, ANSWER)])),
        "inside a span attribute is nested too deeply",
    ),
    "deep_995_json_text_in_attribute": (
        _b(otlp([_rows()[0], ("llm", "root", "LLM", 1, 2, DEEP_995, ANSWER)])),
        "inside a span attribute is nested too deeply",
    ),
    # A lone surrogate: in the file's JSON, or in a JSON text inside an attribute.
    "lone_surrogate": (
        _b(otlp(_rows())).replace(b"opens in June.", b"opens in June \\ud800."),
        "lone surrogate \\ud800 at line 1, column",
    ),
    "lone_surrogate_in_attribute_json": (
        _b(otlp([_rows()[0], ("llm", "root", "LLM", 1, 2, {"q": "\ud800"}, ANSWER)])),
        "holds the lone surrogate \\ud800",
    ),
    # Times that the date parser takes but cannot turn into a timestamp.
    "langfuse_year_one": (
        _b(langfuse(_rows())).replace(b'"2025-05-01T10:00:00.000Z"', b'"0001-01-01T00:00:00"'),
        "bad Langfuse time '0001-01-01T00:00:00'",
    ),
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(responder=lambda req: "{}") as srv:
        yield srv


def _run(args: list[str], srv: FakeOpenAIServer | None = None) -> Result:
    env = {"VERITRAIL_CACHE": "0"}
    if srv is not None:
        env |= {"VERITRAIL_BASE_URL": srv.base_url, "OPENAI_API_KEY": "test-key"}
    return CliRunner(env=env).invoke(cli, args)


def _assert_refused(res: Result, bad: Path, expect: str) -> None:
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output
    first = res.stderr.splitlines()[0]
    assert first.startswith("error: ") and str(bad) in first, res.stderr
    assert expect in res.stderr, res.stderr


@pytest.mark.parametrize(
    ("name", "content", "expect"), [(k, *v) for k, v in CASES.items()], ids=list(CASES)
)
def test_a_bad_trace_is_refused_with_exit_2(
    tmp_path: Path, name: str, content: bytes, expect: str
) -> None:
    bad = tmp_path / f"{name}.json"
    bad.write_bytes(content)
    out = tmp_path / "dag.json"
    out.write_bytes(OLD_OUT)
    res = _run(["from-trace", str(bad), "--out", str(out)])
    _assert_refused(res, bad, expect)
    assert bad.read_bytes() == content  # never rewritten
    assert out.read_bytes() == OLD_OUT  # nothing written over the old DAG
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([bad.name, out.name])


GOOD: dict[str, Callable[[], Any]] = {
    "otlp": lambda: otlp(_rows()),
    # Well-formed values of the types the table breaks.
    "otlp_attribute_values": lambda: otlp(
        _rows(),
        {
            "tags": {"arrayValue": {"values": [{"stringValue": "a"}]}},
            "meta": {"kvlistValue": {"values": [{"key": "k", "value": {"intValue": 5}}]}},
            "llm.token_count.total": {"intValue": "120"},
        },
    ),
    # opentelemetry-sdk's to_json() writes a NaN float attribute as NaN (json.dumps does).
    "sdk": lambda: sdk(_rows()).replace('"input.value"', '"llm.score": NaN, "input.value"'),
    "langfuse": lambda: langfuse(_rows()),
}


@pytest.mark.parametrize("fmt", list(GOOD))
def test_a_utf8_bom_is_accepted(tmp_path: Path, fmt: str) -> None:
    # The good traces the table's cases were made from, each behind a UTF-8 BOM.
    f = tmp_path / "trace.json"
    f.write_bytes(b"\xef\xbb\xbf" + _b(GOOD[fmt]()))
    res = _run(["from-trace", str(f), "--out", str(tmp_path / "dag.json")])
    assert res.exit_code == 0, res.output
    dag = json.loads((tmp_path / "dag.json").read_text(encoding="utf-8"))
    assert dag["nodes"][-1]["text"] == ANSWER


# -- a batch manifest line goes through the same reader ------------------------------------------

JOB = {"id": "a", "dag": "dag.json", "claims": None, "out": "report.json"}


@pytest.mark.parametrize(
    ("name", "line", "expect"),
    [
        (
            "deep_settings",
            json.dumps({**JOB, "settings": {"q": 1}}).replace("1}", DEEP + "}"),
            "nested too deeply",
        ),
        ("lone_surrogate", json.dumps({**JOB, "id": "a\ud800"}), "lone surrogate \\ud800"),
    ],
    ids=["deep_settings", "lone_surrogate"],
)
def test_a_bad_manifest_line_is_refused_before_any_model_call(
    tmp_path: Path, server: FakeOpenAIServer, name: str, line: str, expect: str
) -> None:
    manifest = tmp_path / "jobs.jsonl"
    content = (line + "\n").encode()
    manifest.write_bytes(content)
    before = server.count
    res = _run(["batch", str(manifest), "--model", "openai/test-model"], server)
    _assert_refused(res, manifest, expect)
    assert server.count == before
    assert manifest.read_bytes() == content


def test_a_manifest_with_a_bom_is_read(tmp_path: Path, server: FakeOpenAIServer) -> None:
    # The BOM is dropped: the first line's job is read (and found to need its DAG file).
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_bytes(b"\xef\xbb\xbf" + json.dumps(JOB).encode() + b"\n")
    res = _run(["batch", str(manifest), "--model", "openai/test-model"], server)
    assert res.exit_code == 2, res.output
    assert "not JSON" not in res.output and "dag.json" in res.output, res.output
