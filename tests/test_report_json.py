"""`report.indented_json`, the one encoder of reports, run files and batch summaries: the same
text as the standard library's indented JSON for what reports hold, and the two documented
differences (exponent floats, NaN/infinity)."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from veritrail.report import indented_json, read_report, write_report


def stdlib(doc: Any) -> str:
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


plain_floats = st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: "e" not in repr(f))
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | plain_floats
    | st.text()  # any code point: controls, quotes, backslashes, non-ASCII, U+2028
)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_same_text_as_the_standard_library(doc: Any) -> None:
    assert indented_json(doc) == stdlib(doc)


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_finite_float_reads_back_as_itself(x: float) -> None:
    assert json.loads(indented_json({"x": x}))["x"] == x


def test_the_two_documented_differences() -> None:
    # A float the standard library writes with an exponent may be written otherwise: the same
    # number.
    assert indented_json(1e-07) == "1e-7\n" and stdlib(1e-07) == "1e-07\n"
    assert indented_json(1e-05) == "0.00001\n" and stdlib(1e-05) == "1e-05\n"
    assert json.loads(indented_json(1e-07)) == 1e-07
    # NaN and infinities become null (the standard library writes NaN, which is not JSON).
    assert indented_json([math.nan, math.inf, -math.inf]) == "[\n  null,\n  null,\n  null\n]\n"
    # Keys that are not strings are written as strings, as the standard library does.
    assert indented_json({1: "a", 2.5: "b"}) == stdlib({1: "a", 2.5: "b"})


def test_a_written_report_loads_back(tmp_path: Any) -> None:
    from veritrail.report import REPORT_FORMAT, REPORT_VERSION

    doc = {"format": REPORT_FORMAT, "version": REPORT_VERSION, "claims": [], "note": "é ✓ \u2028"}
    write_report(doc, tmp_path / "r.json")
    text = (tmp_path / "r.json").read_text(encoding="utf-8")
    assert text == stdlib(doc)
    assert read_report(tmp_path / "r.json")["note"] == "é ✓ \u2028"
