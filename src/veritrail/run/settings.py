"""Run settings from command-line flags, environment variables and a TOML file.

Precedence, highest first (documented in docs/running.md):

1. flags given on the command line;
2. environment variables ``VERITRAIL_<NAME>`` (e.g. ``VERITRAIL_Q=1``, ``VERITRAIL_MODEL=...``);
3. the TOML file given with ``--config`` (or ``VERITRAIL_CONFIG``), else ``./veritrail.toml`` if
   it exists;
4. the defaults: the method's are `veritrail.method.config.VerifyConfig`'s (the paper's, where it
   gives one) and are not written again here; `--help` and `--dry-run` show them from there.

The TOML file uses the same names as the fields of `Settings`, at the top level or under a
``[verify]`` table. Unknown names are an error (a typo must not silently fall back to a default).
API keys are not settings: providers read them from their own environment variables, so they
never reach run.json, reports or logs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args, get_type_hints

from pydantic import TypeAdapter, ValidationError

from .. import environment
from ..errors import InputProblem
from ..lm.budget import Budget
from ..lm.model import DEFAULT_MAX_REASKS
from ..method.config import VerifyConfig

ENV_PREFIX = environment.PREFIX
DEFAULT_CONFIG_FILE = "veritrail.toml"

_METHOD = VerifyConfig()
"""The method's defaults: every method setting below takes its default from here."""

CACHE_OFF = environment.OFF_WORDS
"""Values of `--cache` (any case) that turn the model cache off."""


def model_cache(value: str | None) -> str | bool:
    """The `cache=` argument of `get_model` for a `--cache` value: True (the user cache) when
    not given, False for one of `CACHE_OFF`, else the cache file. The one parser of "cache off",
    for every command that builds a model."""
    if value is None:
        return True
    return False if environment.is_off(value) else value


class SettingsError(InputProblem, ValueError):
    """A setting has a bad value or an unknown name; the message says where it came from."""


class Source:
    """Where a setting's value came from (kept per field, shown by `--dry-run`)."""

    DEFAULT = "default"
    FILE = "file"
    ENV = "env"
    FLAG = "flag"


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything `veritrail verify` can be told. `None` = not set / no limit."""

    model: str | None = None
    """`provider/model`; None lets the model layer pick its default (the embedded model)."""
    base_url: str | None = None
    """OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, LM Studio, Azure)."""
    concurrency: int | None = None
    """Maximum model calls in flight (model layer default when None)."""
    threads: int | None = None
    """CPU threads of an embedded `local/` model (model layer default when None)."""
    max_parallel_claims: int | None = None
    cache: str | None = None
    """Model cache file (model layer default when None)."""
    prices: str | None = None
    """JSON price file (USD per 1M tokens) over the built-in table; see docs/models.md."""
    prompt_dir: str | None = None
    """Directory of prompt overrides (see `veritrail prompts export`)."""
    question: str | None = None
    """The question the final output answered: context for claim extraction (no `--claims`)."""
    extraction: Literal["batched", "per-sentence"] = "batched"
    """Claim extraction's form (no `--claims`): each stage over many sentences per call, or one
    sentence per call, the paper's (`method.extraction.ExtractionMode`, docs/extraction.md)."""
    decomposer: str | None = None
    """A plugin step in place of the LM decomposer: ``module:attribute``, ``file.py:attribute``
    or an entry point of group ``veritrail.steps`` (`veritrail.run.plugins`, docs/plugins.md)."""
    selector: str | None = None
    """A plugin step in place of the LM evidence selector (same forms as `decomposer`)."""
    judge: str | None = None
    """A plugin step in place of the LM verdict step (same forms, or ``nli:PATH`` for the NLI
    judge over a local Hugging Face model directory)."""
    # The method's settings (`VerifyConfig`, whose docstrings say what they do); None for an
    # evidence limit means "the method's default" (kept None so run fingerprints stay the same).
    q: int = _METHOD.q
    max_decomposition_calls: int = _METHOD.max_decomposition_calls
    evidence_sentences: int | None = None
    """Sets both evidence limits below where they are not set themselves."""
    evidence_sentences_root: int | None = None
    evidence_sentences_nonroot: int | None = None
    evidence_tokens_root: int | None = _METHOD.evidence_tokens_root
    evidence_tokens_nonroot: int | None = _METHOD.evidence_tokens_nonroot
    verdict_sentences: int | None = _METHOD.verdict_sentences
    verdict_tokens: int | None = _METHOD.verdict_tokens
    max_compression_reruns: int = _METHOD.max_compression_reruns
    samples: int = _METHOD.samples
    threshold: int = _METHOD.threshold
    sample_temperature: float = _METHOD.sample_temperature
    term_check: bool | None = _METHOD.term_check
    """The key-term check (`VerifyConfig.term_check`); None: on for the embedded models only."""
    claims_per_prompt: int = _METHOD.claims_per_prompt
    """Shared prompts (`VerifyConfig.claims_per_prompt`); 1 = the paper's one claim per prompt."""
    max_reasks: int = DEFAULT_MAX_REASKS
    """Re-asks per structured call after an unreadable reply (`get_model(max_reasks=...)`).
    Not part of the run fingerprint: raising it to rescue errored claims reuses the run."""
    max_unsupported: float | None = None
    """CI gate: exit 1 when the share of claims judged Not Fully Supported is above this rate
    (0 to 1). None = no gate. Not part of the run fingerprint."""
    citations: str | None = None
    """Citation checking (`veritrail.citations`, docs/citations.md): `auto` (the built-in marker
    styles), `off`, or a regular expression whose group holds the reference. None = off. Not
    part of the run fingerprint (it reads the verdicts, it does not change them)."""
    max_miscited: float | None = None
    """CI gate: exit 1 when the share of cited claims whose citation is misattributed or cites
    a source that does not support them is above this rate (0 to 1). None = no gate."""
    max_cost: float | None = None
    """Spending cap in USD over this command's model calls (`lm.budget`): no call starts once
    it would pass it; None = no cap. Not part of the run fingerprint (it changes how far a run
    goes, not what it computes)."""
    max_tokens: int | None = None
    """Spending cap in tokens (input + output, as the provider counts them), as `max_cost`."""
    runs_dir: str = "runs"
    """Where run directories are created when `--run-dir` is not given (relative to the
    current directory)."""
    progress_interval: float = 10.0
    """Seconds between plain progress lines when stderr is not a terminal."""
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    """Field name -> `Source` value, for display."""

    def verify_config(self) -> VerifyConfig:
        """The loop settings (raises ValueError on inconsistent values, e.g. threshold > samples)."""
        return VerifyConfig(
            q=self.q,
            max_decomposition_calls=self.max_decomposition_calls,
            evidence_sentences_root=self.evidence_sentences_root
            or self.evidence_sentences
            or _METHOD.evidence_sentences_root,
            evidence_sentences_nonroot=self.evidence_sentences_nonroot
            or self.evidence_sentences
            or _METHOD.evidence_sentences_nonroot,
            evidence_tokens_root=self.evidence_tokens_root,
            evidence_tokens_nonroot=self.evidence_tokens_nonroot,
            verdict_sentences=self.verdict_sentences,
            verdict_tokens=self.verdict_tokens,
            max_compression_reruns=self.max_compression_reruns,
            samples=self.samples,
            threshold=self.threshold,
            sample_temperature=self.sample_temperature,
            term_check=self.term_check,
            claims_per_prompt=self.claims_per_prompt,
        )

    def budget(self) -> Budget | None:
        """The command's spending cap (`--max-cost`, `--max-tokens`), or None when neither is
        set."""
        if self.max_cost is None and self.max_tokens is None:
            return None
        return Budget(max_cost=self.max_cost, max_tokens=self.max_tokens)

    def to_dict(self) -> dict[str, Any]:
        """All settings as plain JSON values (no secrets exist among them)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sources"}


SETTING_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Settings) if f.name != "sources")

# Fields that change what a run computes (go into the run fingerprint); the rest only change how
# fast or where it runs. The model name is part of the fingerprint separately.
RESULT_SETTINGS: tuple[str, ...] = (
    "prompt_dir",
    "question",
    "extraction",
    *(f.name for f in dataclasses.fields(VerifyConfig)),
)

_HINTS: dict[str, Any] = {k: v for k, v in get_type_hints(Settings).items() if k in SETTING_NAMES}
_ADAPTERS: dict[str, TypeAdapter[Any]] = {name: TypeAdapter(t) for name, t in _HINTS.items()}


def _optional(name: str) -> bool:
    return type(None) in get_args(_HINTS[name])


def _coerce(name: str, value: Any, origin: str) -> Any:
    if name not in SETTING_NAMES:
        raise SettingsError(
            f"{origin}: unknown setting {name!r} (known: {', '.join(SETTING_NAMES)})"
        )
    from_env = origin.startswith("environment")
    if isinstance(value, str) and from_env:
        v = value.strip()
        if v.lower() in ("none", "null") and _optional(name):
            return None
        value = v
    try:
        # Strict for typed sources (TOML, flags): `q = true` or `q = 2.5` is an error, not 1 or 2;
        # environment values are strings, so they are parsed leniently.
        out = _ADAPTERS[name].validate_python(value, strict=not from_env)
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"]
        raise SettingsError(f"{origin}: {name} = {value!r}: {msg}") from None
    if isinstance(out, int | float) and not isinstance(out, bool) and out < 0:
        raise SettingsError(f"{origin}: {name} must not be negative (got {out})")
    hi = _UPPER_BOUNDS.get(name)
    if hi is not None and isinstance(out, int | float) and not out <= hi:  # NaN fails too
        raise SettingsError(f"{origin}: {name} must be between 0 and {hi:g} (got {out})")
    return out


def coerce_setting(name: str, value: Any, origin: str) -> Any:
    """Validate one setting's value as a flag or file value would be (`SettingsError` naming
    `origin` when it is bad); for commands that take a few settings themselves (`resume`)."""
    return _coerce(name, value, origin)


# Settings with an upper bound (rates).
_UPPER_BOUNDS: dict[str, float] = {"max_unsupported": 1.0, "max_miscited": 1.0}


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Settings from a TOML file: top-level names and a `[verify]` table (the table wins)."""
    p = Path(path)
    from ..textio import InputError, read_input_toml

    try:
        # UTF-8 (BOM dropped), bounded nesting: the rules of every input file (veritrail.textio).
        doc = read_input_toml(p, "config file")
    except InputError as exc:
        raise SettingsError(str(exc)) from None
    flat = {k: v for k, v in doc.items() if k != "verify"}
    table = doc.get("verify", {})
    if not isinstance(table, dict):
        raise SettingsError(f"config file {p}: [verify] must be a table")
    flat.update(table)
    return {k: _coerce(k, v, f"config file {p}") for k, v in flat.items()}


def read_env(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Settings from `VERITRAIL_<NAME>` variables; other VERITRAIL_ variables are left alone
    (the model layer and prompt loader read some of their own)."""
    out: dict[str, Any] = {}
    for name in SETTING_NAMES:
        value = environment.setting_value(name, env)
        # An empty variable counts as unset (`VERITRAIL_MODEL= cmd`); "none" clears a value.
        if value is not None and value.strip():
            key = environment.setting_variable(name)
            out[name] = _coerce(name, value, f"environment {key}")
    return out


def find_config_file(
    explicit: str | Path | None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> Path | None:
    """`--config`, else `VERITRAIL_CONFIG`, else `./veritrail.toml` when it exists (`env`:
    the process environment when None; `cwd`: the current directory when None)."""
    if explicit is not None:
        return Path(explicit)
    named = environment.get(environment.CONFIG, env)
    if named:
        return Path(named)
    default = Path(cwd or Path.cwd()) / DEFAULT_CONFIG_FILE
    return default if default.is_file() else None


def resolve_settings(
    flags: Mapping[str, Any],
    *,
    config_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> Settings:
    """Merge the four layers. `flags` holds only options the user actually gave (no defaults)."""
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {name: Source.DEFAULT for name in SETTING_NAMES}
    cfg = find_config_file(config_path, env, cwd)
    layers: list[tuple[str, dict[str, Any]]] = []
    if cfg is not None:
        layers.append((Source.FILE, read_config_file(cfg)))
    layers.append((Source.ENV, read_env(env)))
    layers.append(
        (
            Source.FLAG,
            {k: _coerce(k, v, f"option --{k.replace('_', '-')}") for k, v in flags.items()},
        )
    )
    for source, values in layers:
        for k, v in values.items():
            merged[k] = v
            sources[k] = source
    try:
        settings = Settings(**merged, sources=sources)
        settings.verify_config()
        _check_citations(settings)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    return settings


def _check_citations(settings: Settings) -> None:
    """`citations` is off, auto or a usable expression, and `max_miscited` has citations to
    count (ValueError naming the option otherwise): decided here, so every command and the API
    refuse them before any model call."""
    from ..citations import parse_rule

    if parse_rule(settings.citations) is None and settings.max_miscited is not None:
        raise ValueError("--max-miscited needs --citations auto (or a PATTERN)")


def default_text(name: str) -> str:
    """A setting's default as `--help` shows it, taken from `Settings` (whose method defaults
    are `VerifyConfig`'s): `none` for no limit; an evidence limit left to the method shows the
    method's number."""
    if name == "evidence_sentences":
        return str(_METHOD.evidence_sentences_root)
    if name in ("evidence_sentences_root", "evidence_sentences_nonroot"):
        return f"--evidence-sentences, else {getattr(_METHOD, name)}"
    value = next(f.default for f in fields(Settings) if f.name == name)
    return "none" if value is None else str(value)


def settings_table(settings: Settings) -> list[tuple[str, str, str]]:
    """(name, value, source) rows for display; values pass through `redaction.redact` (a base
    URL's user and password never reach the terminal)."""
    from ..redaction import redact

    return [
        (n, redact(repr(getattr(settings, n))), settings.sources.get(n, Source.DEFAULT))
        for n in SETTING_NAMES
    ]


def step_specs(settings: Settings) -> dict[str, str]:
    """The plugged steps of `settings`: kind -> spec, for the kinds given (`decomposer`,
    `selector`, `judge`; from flags, `VERITRAIL_*`, the config file or a manifest line)."""
    given = {
        "decomposer": settings.decomposer,
        "selector": settings.selector,
        "judge": settings.judge,
    }
    return {k: v for k, v in given.items() if v}
