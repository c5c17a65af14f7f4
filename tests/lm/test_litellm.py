"""Providers through LiteLLM (`anthropic/`, `gemini/`, ...) against loopback servers speaking
Anthropic's Messages API and Gemini's generateContent API (tests/lm/fake_providers.py).

Every test here runs with outbound connections refused except to 127.0.0.1, LiteLLM's import
included: it must fetch nothing (its cost map and beta-header table come from the package).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fake_providers import FakeProviderServer, HttpFault

from clikit import TINY_EVAL_DATASET
from veritrail.cli.main import cli
from veritrail.lm import litellm as lmlite
from veritrail.lm.base import GenerateConfig, Message
from veritrail.lm.cache import ResponseCache
from veritrail.lm.capabilities import CapabilityStore
from veritrail.lm.model import Model
from veritrail.lm.pricing import Price, PriceTable
from veritrail.lm.registry import LITELLM_PREFIXES, get_provider
from veritrail.lm.retry import RetryPolicy
from veritrail.report import comparable
from veritrail.testing import FakeOpenAIServer
from veritrail.testing.overlap import responder

# Not `pytest.importorskip`: that would import LiteLLM here, before `load_litellm` turns its
# downloads off.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("litellm") is None, reason="needs the litellm extra"
)

EX = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
KEY = "sk-ant-test-0123456789abcdefXYZ"
FAST = RetryPolicy(base_delay=0.0, max_delay=0.0, rate_limit_min_delay=0.0)
SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string"}},
    "required": ["verdict"],
    "additionalProperties": False,
}

_real_connect = socket.socket.connect
_attempts: list[Any] = []
"""Connections to anything but loopback that were tried (and refused)."""


def _loopback_only(sock: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else address
    if sock.family in (socket.AF_INET, socket.AF_INET6) and host not in ("127.0.0.1", "::1"):
        _attempts.append(address)
        raise ConnectionRefusedError(f"test forbids network: {address!r}")
    return _real_connect(sock, address)


_real_getaddrinfo = socket.getaddrinfo
_LOCAL = ("127.0.0.1", "::1", "localhost")


def _resolve_loopback_only(host: Any, *args: Any, **kw: Any) -> Any:
    # Offline, a download fails at name resolution, before any connect: watch both.
    name = host.decode() if isinstance(host, bytes) else host
    if name is not None and name not in _LOCAL:
        _attempts.append(name)
        raise socket.gaierror(socket.EAI_NONAME, f"test forbids network: {name}")
    return _real_getaddrinfo(host, *args, **kw)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refuse every connection but loopback; keys and endpoints only from the test."""
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)
    monkeypatch.setattr(socket.socket, "connect_ex", _loopback_only)
    monkeypatch.setattr(socket, "getaddrinfo", _resolve_loopback_only)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("VERITRAIL_BASE_URL", "VERITRAIL_API_KEY", "VERITRAIL_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("VERITRAIL_CACHE", "0")
    monkeypatch.setenv("VERITRAIL_PRICES", "")
    monkeypatch.setenv("VERITRAIL_RETRY_BASE_DELAY", "0")
    _attempts.clear()
    yield
    # LiteLLM swallows a failed download and keeps its bundled copy: refusing is not enough.
    assert not _attempts, f"tried to reach the network: {_attempts}"


@pytest.fixture
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as srv:
        yield srv


def _base_url(srv: FakeProviderServer, model: str) -> str:
    return srv.gemini_url if model.startswith("gemini/") else srv.url


MODELS = ["anthropic/claude-x", "gemini/gemini-2.5-flash"]


def test_every_litellm_prefix_is_registered_and_routed() -> None:
    assert set(LITELLM_PREFIXES) == set(lmlite.PROVIDERS)
    p = get_provider("anthropic/claude-x", base_url="http://127.0.0.1:9")
    assert isinstance(p, lmlite.LiteLLMProvider)
    assert (p.name, p.model, p.target) == ("anthropic", "claude-x", "anthropic/claude-x")
    q = get_provider("litellm/groq/llama-3.1-8b-instant")
    assert (q.name, q.model) == ("litellm", "groq/llama-3.1-8b-instant")
    assert isinstance(q, lmlite.LiteLLMProvider) and q.target == "groq/llama-3.1-8b-instant"


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_quickstart_report_matches_the_openai_path(
    model: str, fake: FakeProviderServer, tmp_path: Path
) -> None:
    """Done-when: the quick start verified through LiteLLM against a loopback Anthropic or Gemini
    server gives the report the OpenAI path gives against the OpenAI fake (same responder)."""

    def verify(model_name: str, base_url: str, out: Path) -> dict[str, Any]:
        res = CliRunner().invoke(
            cli,
            [
                "verify",
                str(EX / "dag.json"),
                "--claims",
                str(EX / "claims.json"),
                "--model",
                model_name,
                "--base-url",
                base_url,
                "--out",
                str(out),
                "--run-dir",
                str(out.with_suffix(".run")),
                "--cache",
                "off",
                "--quiet",
                # One claim per prompt: which claims share a prompt can depend on when replies
                # come back (docs/method.md#shared-prompts), and this test compares the costs too.
                "--claims-per-prompt",
                "1",
            ],
        )
        assert res.exit_code == 0, res.output
        doc: dict[str, Any] = json.loads(out.read_text())
        return doc

    with FakeOpenAIServer(responder=responder) as srv:
        expected = verify("openai/claude-x", srv.base_url, tmp_path / "openai.json")
    got = verify(model, _base_url(fake, model), tmp_path / "litellm.json")
    assert fake.requests, "the LiteLLM path sent nothing"
    assert {c["id"]: c["verdict"] for c in got["claims"]} == {
        c["id"]: c["verdict"] for c in expected["claims"]
    }
    assert [c["provenance"] for c in got["claims"]] == [c["provenance"] for c in expected["claims"]]
    assert [c["error_stages"] for c in got["claims"]] == [
        c["error_stages"] for c in expected["claims"]
    ]
    # Everything but the model's name (which differs by design) is the same.
    assert got["model"] == model and expected["model"] == "openai/claude-x"
    assert {**comparable(got), "model": ""} == {**comparable(expected), "model": ""}


def _model(name: str, srv: FakeProviderServer, **kw: Any) -> Model:
    provider = get_provider(name, base_url=_base_url(srv, name))
    kw.setdefault("retry", FAST)
    kw.setdefault("capabilities", CapabilityStore())
    return Model(provider, **kw)


MSGS = [Message("system", "You check claims."), Message("user", "Say hello.")]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("status", [429, 500, 503])
def test_rate_limit_and_server_errors_are_retried(
    model: str, status: int, fake: FakeProviderServer
) -> None:
    fake.inject(HttpFault(status, retry_after=0 if status == 429 else None))
    m = _model(model, fake)
    gen = asyncio.run(m.generate(MSGS, step="s"))
    assert gen.text and gen.attempts == 2
    assert len(fake.requests) == 2 and m.stats.retries == 1
    kind = "RateLimitError" if status == 429 else "TransientError"
    assert m.stats.errors == {kind: 1}


def test_prompt_cache_reads_are_cached_input_tokens(fake: FakeProviderServer) -> None:
    fake.cache_read_tokens = 3
    m = _model("anthropic/claude-x", fake, prices=PriceTable({"claude-x": Price(3, 15, 0.3)}))
    asyncio.run(m.generate(MSGS, step="s"))
    total = m.usage.total()
    assert total.cached_input_tokens == 3 and total.input_tokens >= 3


@pytest.mark.parametrize("model", MODELS)
def test_usage_and_cost(model: str, fake: FakeProviderServer) -> None:
    priced = _model(model, fake, prices=PriceTable({model: Price(3.0, 15.0)}))
    gen = asyncio.run(priced.generate(MSGS, step="s"))
    assert gen.input_tokens > 0 and gen.output_tokens > 0
    assert gen.dollars == pytest.approx((gen.input_tokens * 3 + gen.output_tokens * 15) / 1e6)
    assert priced.usage.total().input_tokens == gen.input_tokens
    unpriced = _model(f"{model}-unreleased", fake, prices=PriceTable(defaults=False))
    assert any("no price known" in n for n in unpriced.notes)
    assert asyncio.run(unpriced.generate(MSGS, step="s")).dollars == 0.0


def test_list_price_comes_from_litellms_bundled_cost_map(fake: FakeProviderServer) -> None:
    """A model LiteLLM prices (its cost map, bundled in the package) is priced with no price file;
    a price file still wins; a model LiteLLM does not know says "no price known"."""
    import litellm

    entry = litellm.model_cost["gemini/gemini-2.5-flash"]
    listed = _model("gemini/gemini-2.5-flash", fake, prices=PriceTable(defaults=False))
    assert not any("no price known" in n for n in listed.notes)
    gen = asyncio.run(listed.generate(MSGS, step="s"))
    want = gen.input_tokens * entry["input_cost_per_token"]
    want += gen.output_tokens * entry["output_cost_per_token"]
    assert gen.dollars == pytest.approx(want) and gen.dollars > 0
    mine = PriceTable({"gemini/gemini-2.5-flash": Price(100.0, 100.0)}, defaults=False)
    own = _model("gemini/gemini-2.5-flash", fake, prices=mine)
    gen = asyncio.run(own.generate(MSGS, step="s"))
    assert gen.dollars == pytest.approx((gen.input_tokens + gen.output_tokens) * 100 / 1e6)
    # A bare name in the map counts only for its own provider; cached reads at the cache rate.
    cost_map = {
        "claude-z": {
            "input_cost_per_token": 1e-6,
            "output_cost_per_token": 2e-6,
            "cache_read_input_token_cost": 1e-7,
            "litellm_provider": "anthropic",
        }
    }
    assert lmlite.litellm_price(cost_map, "anthropic/claude-z") == Price(1.0, 2.0, 0.1)
    assert lmlite.litellm_price(cost_map, "bedrock/claude-z") is None
    assert lmlite.litellm_price({"x": {"input_cost_per_token": None}}, "x") is None


def _json_reply(request: dict[str, Any]) -> str:
    return json.dumps({"verdict": "Fully Supported"})


@pytest.mark.parametrize("model", MODELS)
def test_structured_output_falls_back_when_the_format_is_rejected(model: str) -> None:
    with FakeProviderServer(_json_reply, reject_format=True) as srv:
        m = _model(model, srv)
        res = asyncio.run(
            m.generate_json(
                [Message("user", "Reply with a verdict.")],
                schema=SCHEMA,
                step="verdict",
                validate=lambda v: v,
            )
        )
    assert res.error is None and res.value is not None
    # Anthropic takes LiteLLM's json_object request (no schema sent); Gemini's JSON mime type is
    # refused too here, so it ends at text with the schema in the prompt.
    assert res.response_format is not None and res.response_format.value != "json_schema"
    assert m.stats.format_fallbacks >= 1
    assert srv.requests[0]["response_format"] == {"type": "json_schema"}
    assert any("rejected response_format" in n for n in m.notes)


@pytest.mark.parametrize("model", MODELS)
def test_structured_output_is_requested_natively(model: str, fake: FakeProviderServer) -> None:
    fake.responder = _json_reply
    m = _model(model, fake)
    res = asyncio.run(
        m.generate_json([Message("user", "Verdict?")], schema=SCHEMA, step="v", validate=dict)
    )
    assert res.value == {"verdict": "Fully Supported"}
    assert res.response_format is not None and res.response_format.value == "json_schema"
    assert fake.requests[-1]["response_format"] == {"type": "json_schema"}


def test_cache_key_separates_providers(fake: FakeProviderServer, tmp_path: Path) -> None:
    """The response cache applies unchanged; its key names the provider, so the same model name
    under two providers is two entries."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    first = _model("anthropic/same-model", fake, cache=cache)
    assert not asyncio.run(first.generate(MSGS, step="s")).cached
    assert asyncio.run(first.generate(MSGS, step="s")).cached
    assert len(fake.requests) == 1
    other = _model("litellm/anthropic/same-model", fake, cache=cache)
    assert not asyncio.run(other.generate(MSGS, step="s")).cached
    assert len(fake.requests) == 2
    cache.close()


@pytest.mark.parametrize("model", MODELS)
def test_unauthorized_stops_the_run_without_printing_the_key(
    model: str, fake: FakeProviderServer, tmp_path: Path
) -> None:
    fake.inject(*[HttpFault(401)] * 50)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(
        cli,
        [
            "verify",
            str(EX / "dag.json"),
            "--claims",
            str(EX / "claims.json"),
            "--model",
            model,
            "--base-url",
            _base_url(fake, model),
            "--out",
            str(out),
            "--run-dir",
            str(tmp_path / "run"),
            "--cache",
            "off",
        ],
    )
    assert res.exit_code == 3, res.output
    assert fake.headers and KEY in (
        fake.headers[0].get("x-api-key", "") + fake.headers[0].get("x-goog-api-key", "")
    )
    assert "401" in res.output and "127.0.0.1" in res.output
    # Never retried: at most the calls already in flight when the first 401 came back (one
    # per claim of the quick start); every later call is refused without a request.
    claims = json.loads((EX / "claims.json").read_text())
    assert len(fake.requests) <= len(claims)
    for path in [*tmp_path.rglob("*"), None]:
        text = res.output if path is None else (path.read_text() if path.is_file() else "")
        assert KEY not in text, path


def test_missing_extra_is_exit_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(lmlite, "_LITELLM", None)
    monkeypatch.setitem(__import__("sys").modules, "litellm", None)  # `import litellm` fails
    res = CliRunner().invoke(
        cli,
        [
            "verify",
            str(EX / "dag.json"),
            "--claims",
            str(EX / "claims.json"),
            "--model",
            "anthropic/claude-x",
            "--out",
            str(tmp_path / "r.json"),
            "--run-dir",
            str(tmp_path / "run"),
        ],
    )
    assert res.exit_code == 2, res.output
    assert "pip install 'veritrail[litellm]'" in res.output
    assert "Traceback" not in res.output


def test_connection_refused_is_transient_and_named(fake: FakeProviderServer) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    p = get_provider("anthropic/claude-x", base_url=f"http://127.0.0.1:{port}")
    m = Model(p, retry=RetryPolicy(base_delay=0.0, max_delay=0.0, max_attempts=2))
    with pytest.raises(Exception) as info:
        asyncio.run(m.generate(MSGS, step="s"))
    err = info.value
    assert type(err).__name__ == "TransientError", err
    assert f"127.0.0.1:{port}" in str(err) and KEY not in str(err)


def test_generate_config_options_reach_litellm(fake: FakeProviderServer) -> None:
    """Seed is dropped for Anthropic (it has none) instead of failing the call."""
    m = _model("anthropic/claude-x", fake)
    gen = asyncio.run(m.generate(MSGS, GenerateConfig(seed=7, max_tokens=50), step="s"))
    assert gen.text


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_importing_litellm_fetches_nothing() -> None:
    """In a fresh interpreter (LiteLLM not yet imported, as on a user's first call), loading it
    and making an Anthropic call to a loopback server opens no connection elsewhere."""
    code = f"""
import socket, sys, asyncio
sys.path.insert(0, {str(Path(__file__).parent)!r})
tried = []
real = socket.socket.connect
def guard(sock, address):
    if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in ("127.0.0.1", "::1"):
        tried.append(address)
        raise ConnectionRefusedError(address)
    return real(sock, address)
socket.socket.connect = guard
real_resolve = socket.getaddrinfo
def resolve(host, *a, **k):
    if host not in ("127.0.0.1", "::1", "localhost", b"127.0.0.1"):
        tried.append(host)
        raise socket.gaierror(socket.EAI_NONAME, host)
    return real_resolve(host, *a, **k)
socket.getaddrinfo = resolve
from fake_providers import FakeProviderServer
from veritrail.lm.base import Message, GenerateConfig
from veritrail.lm.registry import get_provider
with FakeProviderServer() as srv:
    p = get_provider("anthropic/claude-x", base_url=srv.url, api_key="k-123456")
    out = asyncio.run(p.generate([Message("user", "Say hi.")], GenerateConfig()))
print("TRIED", tried, "TEXT", bool(out.text))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "TRIED [] TEXT True" in res.stdout, res.stdout + res.stderr[-2000:]


def test_classify_maps_litellm_exceptions() -> None:
    ll = lmlite.load_litellm()
    url = "http://127.0.0.1:9"
    args = {"message": f"boom x-api-key: {KEY}", "model": "claude-x", "llm_provider": "anthropic"}
    cases = [
        (ll.ContextWindowExceededError(**args), "FatalError"),
        (ll.Timeout(**args), "TransientError"),
        (ll.ServiceUnavailableError(**args), "TransientError"),
        (ll.AuthenticationError(**args), "EndpointError"),
        (ll.NotFoundError(**args), "EndpointError"),
        (ll.RateLimitError(**args), "RateLimitError"),
        (ll.BadRequestError(**args), "FatalError"),
        (ValueError(f"odd {KEY}"), "FatalError"),
    ]
    for exc, kind in cases:
        err = lmlite.classify(exc, url, 5.0, structured=False)
        assert type(err).__name__ == kind, (exc, err)
        assert KEY not in str(err) and KEY not in err.cause
    rejected = ll.BadRequestError(**{**args, "message": "output_format is not supported"})
    fmt = lmlite.classify(rejected, url, 5.0, structured=True)
    assert type(fmt).__name__ == "UnsupportedFormatError"


def test_a_batch_predicts_the_price_the_model_charges() -> None:
    """The batch's driver reads prices from model names (`unpriced_specs`): it agrees with what
    `Model` charges, LiteLLM's list prices included."""
    from veritrail.batch.progress import unpriced_specs
    from veritrail.lm.registry import model_price
    from veritrail.run.model_spec import ModelSpec

    names = ["gemini/gemini-2.5-flash", "anthropic/claude-x"]
    assert unpriced_specs(ModelSpec(n) for n in names) == ("anthropic/claude-x",)
    for name in names:
        provider = get_provider(name, base_url="http://127.0.0.1:9")
        charged = Model(provider, prices=PriceTable())._price
        assert model_price(name, PriceTable()) == charged


@pytest.mark.parametrize("model", MODELS)
def test_batch_and_eval_take_litellm_models(
    model: str, fake: FakeProviderServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model spec every command builds from (`batch`, `eval`) resolves LiteLLM names too,
    and the batch's verdicts are `verify`'s."""
    monkeypatch.chdir(tmp_path)
    job = {"id": "qs", "dag": str(EX / "dag.json"), "claims": str(EX / "claims.json")}
    (tmp_path / "m.jsonl").write_text(json.dumps({**job, "out": "qs.json"}) + "\n")
    url = _base_url(fake, model)
    res = CliRunner().invoke(
        cli, ["batch", "m.jsonl", "--model", model, "--base-url", url, "--cache", "off", "--quiet"]
    )
    assert res.exit_code == 0, res.output
    got = json.loads((tmp_path / "qs.json").read_text())
    assert got["model"] == model
    with FakeOpenAIServer(responder=responder) as srv:
        res = CliRunner().invoke(
            cli,
            ["verify", str(EX / "dag.json"), "--claims", str(EX / "claims.json"), "--model",
             "openai/x", "--base-url", srv.base_url, "--cache", "off", "--quiet",
             "--out", "v.json", "--run-dir", "v"],
        )  # fmt: skip
    want = json.loads((tmp_path / "v.json").read_text())
    assert [c["verdict"] for c in got["claims"]] == [c["verdict"] for c in want["claims"]]
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_EVAL_DATASET))
    res = CliRunner().invoke(
        cli,
        ["eval", str(data), "--model", model, "--base-url", url, "--cache", "off",
         "--method", "veritrail:q=1", "--format", "json", "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert fake.requests
