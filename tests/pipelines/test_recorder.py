"""The recorder API: a user-style pipeline produces a DAG that validates and verifies."""

from __future__ import annotations

import asyncio
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veritrail.dag import DagValidationError, load_dag
from veritrail.lm.base import Message
from veritrail.lm.fake import FakeProvider
from veritrail.lm.model import Model
from veritrail.method.config import VerifyConfig
from veritrail.method.loop import verify_claims
from veritrail.method.oracle import Oracle
from veritrail.pipelines.recorder import NodeRef, Recorder, RecorderError
from veritrail.records import Claim, Termination, Verdict

ROOT = Path(__file__).resolve().parents[2]


async def _user_pipeline(tmp_path: Path) -> Path:
    """What a user writes: sources, a decorated async model call, an explicit step, save."""
    model = Model(
        FakeProvider(
            responder=lambda msgs: msgs[-1].content.split(":", 1)[1].strip().split(". ")[0] + "."
        )
    )
    with Recorder(meta={"pipeline": "notes"}) as rec:
        a = rec.source("Ada Lovelace wrote the first program. She worked with Babbage.", id="doc-a")
        b = rec.source("Babbage designed the Analytical Engine. It was never finished.", id="doc-b")

        @rec.traced("extract")
        async def extract(text: str) -> str:
            gen = await model.generate([Message("user", "Extract: " + text)], step="extract")
            return gen.text

        ea, eb = await asyncio.gather(extract(a), extract(b))
        final = rec.step("write", inputs=[ea, eb], output=f"{ea.text} {eb.text}")
    path = tmp_path / "dag.json"
    rec.save(path, terminal=final)
    return path


async def test_user_script_produces_a_valid_dag_that_verifies(tmp_path: Path) -> None:
    dag = load_dag(await _user_pipeline(tmp_path))
    assert dag.terminal == "write-1"
    assert {n.id: n.stage for n in dag} == {
        "doc-a": 1,
        "doc-b": 1,
        "extract-1": 2,
        "extract-2": 2,
        "write-1": 3,
    }
    assert (
        dag.node(dag.terminal).text
        == "Ada Lovelace wrote the first program. Babbage designed the Analytical Engine."
    )
    assert dag.meta["pipeline"] == "notes"
    assert dag.meta["stage_names"] == {"1": "source", "2": "extract", "3": "write"}
    ext_of_a = next(n for n in dag if n.sources == ("doc-a",))
    claim = "Ada Lovelace wrote the first program."
    oracle = Oracle.from_dict(
        {
            "claims": [
                {
                    "claim": claim,
                    "evidence": {ext_of_a.id: [0], "doc-a": [0]},
                    "verdicts": ["Fully Supported"],
                }
            ]
        }
    )
    [res] = await verify_claims(dag, [Claim("c1", claim)], oracle.steps(), VerifyConfig(q=1))
    assert res.verdict is Verdict.FULLY_SUPPORTED and res.termination is Termination.ROOTS_ONLY
    assert res.provenance == ((ext_of_a.id, "doc-a"),)


def test_explicit_stages_ids_and_errors() -> None:
    rec = Recorder()
    s = rec.source("Source text.")
    assert s == NodeRef("source-1", "Source text.", 1, "source") and str(s) == "Source text."
    m = rec.step("map", [s], "Mapped.", stage=3)
    assert m.stage == 3
    with pytest.raises(RecorderError, match="lower than its inputs"):
        rec.step("reduce", [m], "Reduced.", stage=2)
    with pytest.raises(RecorderError, match="unknown input"):
        rec.step("reduce", ["nope"], "Reduced.")
    with pytest.raises(RecorderError, match="non-empty"):
        rec.step("reduce", [m], "   ")
    with pytest.raises(RecorderError, match="no inputs"):
        rec.step("reduce", [], "Reduced.")
    with pytest.raises(RecorderError, match="duplicate"):
        rec.source("Other.", id="source-1")
    # An auto id never collides with an id the user chose.
    rec.source("Taken.", id="source-2")
    assert rec.source("Next.").id == "source-3"
    assert rec.step("reduce", [m, m.id], "Reduced.").stage == 4  # inputs are de-duplicated
    assert rec.get("reduce-1").kind == "reduce"


def test_several_outputs_need_pruning_to_one_terminal(tmp_path: Path) -> None:
    rec = Recorder()
    a = rec.source("A.")
    b = rec.source("B.")
    used = rec.step("s", [a], "From A.")
    rec.step("s", [b], "From B, unused.")
    final = rec.step("f", [used], "Final.")
    with pytest.raises(DagValidationError, match="several_terminals"):
        rec.dag()
    dag = rec.save(tmp_path / "d.jsonl", terminal=final, prune=True)
    assert {n.id for n in dag} == {"source-1", "s-1", "f-1"}
    assert load_dag(tmp_path / "d.jsonl").terminal == "f-1"
    # Naming a terminal that is not the DAG's only sink is an error, not a silent choice.
    with pytest.raises(RecorderError, match="not 's-1'"):
        _only_two().dag(terminal="s-1")


def _only_two() -> Recorder:
    rec = Recorder()
    rec.step("s", [rec.source("x.")], "y.")
    rec.step("t", ["s-1"], "z.")
    return rec


def test_traced_sync_function_with_refs_in_a_list() -> None:
    rec = Recorder()
    parts = rec.sources(["One.", "Two."], prefix="chunk")
    assert [p.id for p in parts] == ["chunk-1", "chunk-2"]

    @rec.traced("join", text_args=True)
    def join(texts: list[str], sep: str = " ") -> str:
        return sep.join(texts)

    out = join(parts, sep=" + ")
    assert out.text == "One. + Two." and rec.dag().sources(out.id) == ("chunk-1", "chunk-2")

    @rec.traced("bad")
    def bad(text: str) -> int:
        return 1

    with pytest.raises(RecorderError, match="must return a string"):
        bad(parts[0])
    with pytest.raises(RecorderError, match="without any recorded input"):
        join(["plain"])


@given(st.lists(st.lists(st.integers(0, 50), min_size=1, max_size=4), min_size=1, max_size=40))
def test_computed_stages_are_longest_paths(spec: list[list[int]]) -> None:
    rec = Recorder()
    refs = [rec.source("root.")]
    for inputs in spec:
        chosen = [refs[i % len(refs)] for i in inputs]
        refs.append(rec.step("s", chosen, "out."))
    dag = rec.dag(terminal=refs[-1], prune=True)
    for n in dag:
        expected = 1 if not n.sources else 1 + max(dag.stage(s) for s in n.sources)
        assert n.stage == expected


def test_example_script_runs(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "recorder_example.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Fully Supported" in proc.stdout and "summarize-1 -> report-q1" in proc.stdout
    assert load_dag(tmp_path / "example_dag.json").terminal == "combine-1"
    # Importing the example (not running it) has no side effects.
    mod = runpy.run_path(str(ROOT / "examples" / "recorder_example.py"), run_name="not_main")
    assert callable(mod["build"])
