"""JUnit XML (the Ant/Jenkins `junit.xsd` dialect CI servers read): one `<testsuite>` per report
(per job of a batch), one `<testcase>` per claim.

Not Fully Supported is a `<failure>` whose text is the claim, the error stage and blamed nodes,
the reasoning and the evidence trail; a claim that ended in error is an `<error>`; Inconclusive
is `<skipped>` (the gate does not count it). A miscited claim (`--citations`) has a second test
case, `<id> citation`, a `<failure>` when the `--max-miscited` gate failed, else passed. Text from the pipeline is untrusted: it is built
with `xml.etree` (which escapes `<`, `&`, `>` and quotes) after characters XML 1.0 cannot hold
at all (control characters, lone surrogates, U+FFFE/U+FFFF) are shown as `[U+001B]`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from ..display import shorten
from .findings import Finding, GateInput, Kind

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """`text` with the characters XML 1.0 forbids written as visible code points."""
    return _NOT_XML.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)


def _el(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    e = ET.SubElement(parent, tag, {k: xml_safe(v) for k, v in attrs.items()})
    if text is not None:
        e.text = xml_safe(text)
    return e


def _body(f: Finding) -> str:
    lines = [f"claim {f.claim_id}: {f.text}", f"verdict: {f.verdict}"]
    if f.kind is Kind.MISCITED:
        lines.append(f"citation: {f.cites}")
    if f.kind is Kind.UNSUPPORTED:
        lines.append(f"error stage: {f.where}")
    if f.reasoning:
        lines.append(f"reasoning: {f.reasoning}")
    if f.error:
        lines.append(f"error: {f.error}")
    if f.trail:
        lines += ["evidence trail:", f.trail]
    return "\n".join(lines)


def _testcase(suite: ET.Element, gi: GateInput, f: Finding) -> None:
    case_id = f"{f.claim_id} citation" if f.kind is Kind.MISCITED else f.claim_id
    attrs = {"name": f"{case_id}: {shorten(f.text, 80)}", "classname": gi.name}
    if gi.dag_uri:
        attrs["file"] = gi.dag_uri
    if f.seconds is not None:
        attrs["time"] = f"{f.seconds:.3f}"
    case = _el(suite, "testcase", **attrs)
    if f.kind is Kind.UNSUPPORTED:
        msg = f"Not Fully Supported ({f.where}): {shorten(f.reasoning or f.text, 200)}"
        _el(case, "failure", _body(f), type=str(f.verdict), message=msg)
    elif f.kind is Kind.MISCITED and f.gate_failed:
        msg = f"Miscited ({f.cites}), above --max-miscited"
        _el(case, "failure", _body(f), type=str(f.citation), message=shorten(msg, 200))
    elif f.kind is Kind.ERROR:
        first = (f.error or "unknown error").strip().splitlines()[0] if f.error else "unknown error"
        _el(case, "error", _body(f), type="error", message=shorten(first, 200))
    elif f.kind is Kind.INCONCLUSIVE:
        _el(case, "skipped", message=f"Inconclusive: {shorten(f.reasoning, 200)}")


def junit_xml(inputs: Sequence[GateInput]) -> str:
    """The JUnit XML document of `inputs` (one test suite each), as text."""
    total = {k: 0 for k in Kind}
    failures = 0
    root = ET.Element("testsuites", {"name": "veritrail"})
    for gi in inputs:
        n = {k: sum(1 for f in gi.findings if f.kind is k) for k in Kind}
        for k, v in n.items():
            total[k] += v
        failures += sum(1 for f in gi.findings if f.failing)
        suite = _el(
            root,
            "testsuite",
            name=gi.name,
            tests=str(len(gi.findings)),
            failures=str(sum(1 for f in gi.findings if f.failing)),
            errors=str(n[Kind.ERROR]),
            skipped=str(n[Kind.INCONCLUSIVE]),
        )
        if gi.properties:
            props = _el(suite, "properties")
            for key, value in gi.properties:
                _el(props, "property", name=key, value=value)
        for f in gi.findings:
            _testcase(suite, gi, f)
    root.set("tests", str(sum(total.values())))
    root.set("failures", str(failures))
    root.set("errors", str(total[Kind.ERROR]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
