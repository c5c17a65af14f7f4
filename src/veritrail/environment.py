"""Every `VERITRAIL_*` environment variable veritrail reads, and the one place that reads them.

`VARIABLES` is the table (name, meaning, default) that docs/running.md shows (a test keeps the
two equal: `markdown_table()`); every other module reads through `get` / `get_int` /
`setting_value` (a test checks that no other module reads a `VERITRAIL_` variable from
`os.environ`). Values are read when asked for, never cached: a variable set by a test
(`monkeypatch.setenv`) or by a notebook between two calls takes effect at once.

This module imports nothing of veritrail, so the lowest layers (`veritrail.lm`) may use it.
Third-party variables (`OPENAI_API_KEY`, `HF_HUB_OFFLINE`, ...) are not veritrail's and are not
listed here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

PREFIX = "VERITRAIL_"

CONFIG = "VERITRAIL_CONFIG"
"""The TOML settings file (read by `veritrail.run.settings.find_config_file`)."""


@dataclass(frozen=True, slots=True)
class Variable:
    """One environment variable: its name, what it does and its default (as documented)."""

    name: str
    meaning: str
    default: str


SETTING_VARIABLES = PREFIX + "<SETTING>"
"""The table's row for the settings: `VERITRAIL_` + any setting name in upper case."""

VARIABLES: tuple[Variable, ...] = (
    Variable(
        SETTING_VARIABLES,
        "any setting of the table above, e.g. `VERITRAIL_Q=1`; `none` clears an optional limit",
        "the setting's default",
    ),
    Variable(CONFIG, "the TOML settings file, when `--config` is not given", "`./veritrail.toml`"),
    Variable(
        "VERITRAIL_MODEL",
        "setting `model`; also the model of `get_model()` called without a name",
        "the embedded model",
    ),
    Variable(
        "VERITRAIL_BASE_URL",
        "setting `base_url`; also the endpoint of an `openai/` model built without one",
        "`OPENAI_BASE_URL`, else OpenAI's",
    ),
    Variable(
        "VERITRAIL_API_KEY",
        "API key of an OpenAI-compatible or Azure endpoint (not a setting: never stored)",
        "`OPENAI_API_KEY` / `AZURE_OPENAI_API_KEY`",
    ),
    Variable("VERITRAIL_TIMEOUT", "seconds per HTTP call of an `openai/` model", "120"),
    Variable("VERITRAIL_HTTP_CLIENT", "HTTP transport: `aiohttp` or `httpx`", "`aiohttp`"),
    Variable(
        "VERITRAIL_CACHE",
        "setting `cache` (a cache file, or `off`); `0` also turns off `get_model()`'s cache",
        "the user cache",
    ),
    Variable(
        "VERITRAIL_CACHE_DIR", "folder of the user cache (`cache.sqlite`)", "`~/.cache/veritrail`"
    ),
    Variable(
        "VERITRAIL_PRICES",
        "setting `prices`; also the price file of `get_model()` without `prices=`",
        "the built-in table",
    ),
    Variable(
        "VERITRAIL_PROMPT_DIR",
        "setting `prompt_dir`; also the prompt loader's overrides when none is set",
        "none",
    ),
    Variable(
        "VERITRAIL_THREADS",
        "setting `threads`; also the threads of a `local/` model built without `threads=`",
        "from the free cores",
    ),
    Variable("VERITRAIL_CTX", "context window of one call of the embedded model", "8192"),
    Variable("VERITRAIL_LOCAL_PARALLEL", "parallel slots of the embedded model's server", "1"),
    Variable("VERITRAIL_LOCAL_MAX_TOKENS", "reply limit of the embedded model", "per model"),
    Variable(
        "VERITRAIL_MODEL_DIR",
        "where the embedded model's files are kept",
        "`~/.cache/veritrail/models`",
    ),
    Variable(
        "VERITRAIL_PREFIX_STORE",
        "folder of the embedded model's stored system-prompt states, or `off`",
        "`<model dir>/prefix-states`",
    ),
    Variable("VERITRAIL_LLAMA_LOG", "any value shows llama.cpp's own log", "unset (silent)"),
    Variable("VERITRAIL_RETRY_BASE_DELAY", "seconds before the first retry of a failed call", "1"),
    Variable("VERITRAIL_RETRY_MAX_ATTEMPTS", "calls in total, the first included", "6"),
    Variable("VERITRAIL_EMBED_THREADS", "CPU threads of the ONNX sentence embedder", "1"),
    Variable(
        "VERITRAIL_RUNS_DB",
        "the index of runs (`veritrail runs`, `review`, `view`), when `--db` is not given: a "
        "`postgresql://` URL or a SQLite file ([runs.md](runs.md))",
        "`<runs dir>/index.sqlite`",
    ),
    Variable(
        "VERITRAIL_HOOK_TIMEOUT",
        "seconds each run-end hook (the index of runs among them) is given before the run goes on "
        "without it",
        "10",
    ),
)
"""Every variable veritrail reads (docs/running.md, "Environment variables")."""

_NAMES = frozenset(v.name for v in VARIABLES)


def _environ(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def get(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of the variable `name` (None when unset); `environ` replaces the process
    environment (tests). A name missing from `VARIABLES` is a programming error: every variable
    is listed, so the documentation stays complete."""
    if name not in _NAMES:
        raise KeyError(f"{name} is not in veritrail.environment.VARIABLES")
    return _environ(environ).get(name)


OFF_WORDS = ("0", "off", "false", "no", "none")
"""Values (any case) that turn a feature off where a variable or setting also takes a path."""


def is_off(value: str) -> bool:
    """Whether `value` is one of `OFF_WORDS`."""
    return value.strip().lower() in OFF_WORDS


def get_int(name: str, default: int, environ: Mapping[str, str] | None = None) -> int:
    """The variable as a whole number; `default` when unset or empty (`ValueError` when it is
    not a number)."""
    value = get(name, environ)
    return int(value) if value else default


def setting_variable(setting: str) -> str:
    """The variable of a setting: `VERITRAIL_` + its name in upper case."""
    return PREFIX + setting.upper()


def setting_value(setting: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The raw value of a setting's variable (None when unset); parsed by `veritrail.run.settings`."""
    return _environ(environ).get(setting_variable(setting))


def markdown_table() -> str:
    """`VARIABLES` as the Markdown table of docs/running.md (kept equal by a test)."""
    rows = ["| variable | meaning | default |", "| --- | --- | --- |"]
    rows += [f"| `{v.name}` | {v.meaning} | {v.default} |" for v in VARIABLES]
    return "\n".join(rows) + "\n"
