"""`veritrail extract` end to end: a real OpenAI-compatible server on loopback answers the stages;
then the claims file is edited by hand and verified with `veritrail verify --claims`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.method.extraction import text_sentences
from veritrail.testing.fake_openai_server import FakeOpenAIServer

SOURCE = (
    "The Harbour Museum opened in 1921. It was founded by Marta Reyes. "
    "The building has three floors."
)
FINAL = (
    "The Harbour Museum opened in 1921 and has three floors. "
    "It is a delightful place to visit! "
    "It was founded by Marta Reyes. "
    "The Harbour Museum opened in 1921."
)
_TARGET = re.compile(r"<<< target sentence\n(.*?)\n>>> end target sentence", re.DOTALL)
_STATEMENT = re.compile(r"<<< statement\n(.*?)\n>>> end statement", re.DOTALL)

SPLITS = {
    "The Harbour Museum opened in 1921 and has three floors.": [
        "The Harbour Museum opened in 1921.",
        "The Harbour Museum has three floors.",
    ]
}
RESOLVED = {"It was founded by Marta Reyes.": "The Harbour Museum was founded by Marta Reyes."}


def _numbered(prompt: str, label: str) -> list[tuple[int, str]]:
    m = re.search(rf"<<< {label}\n(.*?)\n>>> end {label}", prompt, re.DOTALL)
    return [(int(i), t) for i, t in re.findall(r"^\[(\d+)\] (.*)$", m.group(1), re.M)] if m else []


def _batched_stage(request: dict[str, Any]) -> str | None:
    """The batched form of the stages below (`method.extraction_batch`), by schema name."""
    name = ((request.get("response_format") or {}).get("json_schema") or {}).get("name")
    prompt = "\n".join(m["content"] for m in request["messages"])
    if name == "claim_selection_batch":
        asked = re.search(r"^Sentences to answer: ([0-9, ]+)", prompt, re.M)
        wanted = {int(i) for i in re.findall(r"\d+", asked.group(1))} if asked else set()
        entries = [
            {"id": i, "text": "" if "delightful" in t else t}
            for i, t in _numbered(prompt, "text")
            if i in wanted
        ]
        return json.dumps({"sentences": entries})
    if name == "claim_disambiguation_batch":
        entries = []
        for i, t in _numbered(prompt, "checkable parts"):
            resolved = RESOLVED.get(t)
            status = "resolved" if resolved else "clear"
            entries.append({"id": i, "status": status, "text": resolved or t})
        return json.dumps({"sentences": entries})
    if name == "claim_decomposition_batch":
        statements = _numbered(prompt, "statements")
        return json.dumps(
            {"sentences": [{"id": i, "parts": SPLITS.get(t, [t])} for i, t in statements]}
        )
    return None


def stage_responder(request: dict[str, Any]) -> str:
    """Answer selection, disambiguation and decomposition for the sentences of FINAL (either form)."""
    batched = _batched_stage(request)
    if batched is not None:
        return batched
    prompt = "\n".join(m["content"] for m in request["messages"])
    stmt = _STATEMENT.search(prompt)
    if stmt:
        return json.dumps({"parts": SPLITS.get(stmt.group(1), [stmt.group(1)])})
    target = _TARGET.search(prompt)
    assert target, prompt[:300]
    sentence = target.group(1)
    if "<<< checkable part" in prompt:
        resolved = RESOLVED.get(sentence)
        status = "resolved" if resolved else "clear"
        return json.dumps({"status": status, "text": resolved or sentence, "reason": "-"})
    checkable = "delightful" not in sentence
    return json.dumps(
        {
            "has_verifiable_content": checkable,
            "verifiable_text": sentence if checkable else "",
            "reason": "-",
        }
    )


@pytest.fixture
def dag_file(tmp_path: Path) -> Path:
    p = tmp_path / "run.dag.json"
    p.write_text(
        json.dumps(
            {
                "nodes": [
                    {"id": "src", "text": SOURCE, "sources": []},
                    {"id": "final", "text": FINAL, "sources": ["src"]},
                ]
            }
        )
    )
    return p


def _env(srv: FakeOpenAIServer) -> dict[str, str]:
    return {
        "VERITRAIL_BASE_URL": srv.base_url,
        "OPENAI_API_KEY": "test-key",
        "VERITRAIL_CACHE": "0",
    }


def test_extract_then_edit_then_verify_with_claims(dag_file: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    claims_path = tmp_path / "claims.json"
    trace_path = tmp_path / "trace.json"
    with FakeOpenAIServer(responder=stage_responder) as srv:
        res = runner.invoke(
            cli,
            [
                "extract",
                str(dag_file),
                "--out",
                str(claims_path),
                "--model",
                "openai/test-model",
                "--trace",
                str(trace_path),
            ],
            env=_env(srv),
        )
    assert res.exit_code == 0, res.output
    assert "3 claims from 4 sentences" in res.output and "no checkable content: 1" in res.output
    doc = json.loads(claims_path.read_text())
    assert doc["sentences"] == text_sentences(FINAL)
    assert doc["model"] == "openai/test-model"
    assert doc["claims"] == [
        {"id": "c1", "text": "The Harbour Museum opened in 1921.", "sentence_indices": [0, 3]},
        {"id": "c2", "text": "The Harbour Museum has three floors.", "sentence_indices": [0]},
        {
            "id": "c3",
            "text": "The Harbour Museum was founded by Marta Reyes.",
            "sentence_indices": [2],
        },
    ]
    # The batched form (the default): one call per stage for the whole answer.
    assert {step: c["lm_calls"] for step, c in doc["cost"].items()} == {
        "claim_selection": 1,
        "claim_disambiguation": 1,
        "decomposition": 1,
    }
    trace = json.loads(trace_path.read_text())
    assert [t["outcome"] for t in trace] == ["claims", "no_verifiable_content", "claims", "claims"]

    # The user reviews the file: drops c2 and rewords c3.
    doc["claims"] = [doc["claims"][0], {**doc["claims"][2], "text": "Marta Reyes founded it."}]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    oracle = tmp_path / "oracle.json"
    oracle.write_text(
        json.dumps(
            {
                "claims": [
                    {
                        "claim": "The Harbour Museum opened in 1921.",
                        "evidence": {"src": [0]},
                        "verdicts": ["Fully Supported"],
                    },
                    {
                        "claim": "Marta Reyes founded it.",
                        "evidence": {"src": [1]},
                        "verdicts": ["Fully Supported"],
                    },
                ]
            }
        )
    )
    report_path = tmp_path / "report.json"
    res = runner.invoke(
        cli,
        [
            "verify",
            str(dag_file),
            "--claims",
            str(edited),
            "--oracle",
            str(oracle),
            "--out",
            str(report_path),
        ],
    )
    assert res.exit_code == 0, res.output
    report = json.loads(report_path.read_text())
    got = [(c["id"], c["text"], c["sentence_indices"], c["verdict"]) for c in report["claims"]]
    assert got == [
        ("c1", "The Harbour Museum opened in 1921.", [0, 3], "Fully Supported"),
        ("c3", "Marta Reyes founded it.", [2], "Fully Supported"),
    ]


def test_extract_reads_plain_text_and_rejects_an_invalid_dag(tmp_path: Path) -> None:
    runner = CliRunner()
    text_file = tmp_path / "answer.txt"
    text_file.write_text("It was founded by Marta Reyes.")
    out = tmp_path / "claims.json"
    with FakeOpenAIServer(responder=stage_responder) as srv:
        res = runner.invoke(
            cli,
            ["extract", str(text_file), "--out", str(out), "--model", "openai/m"],
            env=_env(srv),
        )
        assert res.exit_code == 0, res.output
        assert json.loads(out.read_text())["claims"][0]["text"] == RESOLVED[text_file.read_text()]
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"nodes": [{"id": "a", "text": "", "sources": []}]}))
        res = runner.invoke(cli, ["extract", str(bad), "--model", "openai/m"], env=_env(srv))
        assert res.exit_code == 2 and "empty_text" in res.output
        assert srv.count == 3  # the invalid DAG made no call


def one_shot_responder(request: dict[str, Any]) -> str:
    """Extraction stages as above, plus evidence selection (everything) and verdicts."""
    prompt = "\n".join(m["content"] for m in request["messages"])
    batched = _batched_stage(request)
    if batched is not None:
        return batched
    if "<<< statement" in prompt or "<<< target sentence" in prompt:
        return stage_responder(request)
    if "Excerpts (each sentence is prefixed" in prompt:
        ids = [int(i) for i in re.findall(r"^\[(\d+)\] ", prompt, re.MULTILINE)]
        return json.dumps(
            {"selected_ids": ids, "context_ids": [], "summary": "All of it.", "missing": ""}
        )
    assert "Sub-claims (all must hold" in prompt, prompt[:300]
    verdict = "Not Fully Supported" if "founded" in prompt.split("Claim:")[1] else "Fully Supported"
    return json.dumps({"reasoning": "scripted", "verdict": verdict})


@pytest.mark.slow
def test_one_shot_verify_extracts_claims_first(dag_file: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    with FakeOpenAIServer(responder=one_shot_responder) as srv:
        res = CliRunner().invoke(
            cli,
            [
                "verify",
                str(dag_file),
                "--model",
                "openai/m",
                "--out",
                str(report_path),
                "--run-dir",
                str(tmp_path / "run"),
                # The responder answers one claim per prompt (shared prompts: test_shared_prompts).
                "--claims-per-prompt",
                "1",
            ],
            env=_env(srv),
        )
    assert res.exit_code == 0, res.output
    report = json.loads(report_path.read_text())
    got = [(c["text"], c["sentence_indices"], c["verdict"]) for c in report["claims"]]
    assert got == [
        ("The Harbour Museum opened in 1921.", [0, 3], "Fully Supported"),
        ("The Harbour Museum has three floors.", [0], "Fully Supported"),
        ("The Harbour Museum was founded by Marta Reyes.", [2], "Not Fully Supported"),
    ]


@pytest.mark.slow
def test_one_shot_verify_passes_the_question_to_extraction(dag_file: Path, tmp_path: Path) -> None:
    with FakeOpenAIServer(responder=one_shot_responder) as srv:
        res = CliRunner().invoke(
            cli,
            [
                "verify",
                str(dag_file),
                "--model",
                "openai/m",
                "--question",
                "When did the Harbour Museum open?",
                "--out",
                str(tmp_path / "report.json"),
                "--run-dir",
                str(tmp_path / "run"),
                # The responder answers one claim per prompt (shared prompts: test_shared_prompts).
                "--claims-per-prompt",
                "1",
                "--quiet",
            ],
            env=_env(srv),
        )
        prompts = ["\n".join(m["content"] for m in r["messages"]) for r in srv.requests]
    assert res.exit_code == 0, res.output
    extraction = [p for p in prompts if "Sentences to answer:" in p or "<<< checkable parts" in p]
    assert extraction and all("When did the Harbour Museum open?" in p for p in extraction)
