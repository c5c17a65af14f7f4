"""Resolve `provider/model` names to a ready `Model`, importing each provider only when used.

Built in: `openai/<model>` (OpenAI, Azure OpenAI and compatible servers), `local/<name>` (the
embedded llama.cpp model), `fake/<name>` (the scripted provider). Others can be added with
`register_provider("name", "package.module:factory")` or a callable.

With no name given, `VERITRAIL_MODEL` is used, else `DEFAULT_MODEL` (the embedded model, so a
fresh install runs with no key; it is for trying the tool, not for real verdicts).
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .base import Provider
from .cache import ResponseCache
from .model import Model
from .pricing import PriceTable
from .retry import RetryPolicy

DEFAULT_MODEL = "local/qwen2.5-coder-1.5b"
"""The model used when nothing is configured."""

ProviderFactory = Callable[..., Provider]

_PROVIDERS: dict[str, str | ProviderFactory] = {
    "openai": "veritrail.lm.openai:OpenAIProvider",
    "local": "veritrail.lm.local:LocalProvider",
    "fake": "veritrail.lm.registry:_fake",
}


def _fake(model: str, **options: Any) -> Provider:
    from .fake import FakeProvider

    return FakeProvider(model=model, **options)


class ModelNameError(ValueError):
    """A model name that is not `provider/model` or names an unknown provider."""


def register_provider(prefix: str, factory: str | ProviderFactory) -> None:
    """Make `prefix/<model>` resolve to `factory(model, **options)` ("module:attr" is lazy)."""
    _PROVIDERS[prefix] = factory


def providers() -> list[str]:
    """Known provider prefixes."""
    return sorted(_PROVIDERS)


def resolve_name(name: str | None) -> str:
    """The model name to use: `name`, else `VERITRAIL_MODEL`, else `DEFAULT_MODEL`."""
    return name or os.environ.get("VERITRAIL_MODEL") or DEFAULT_MODEL


def split_name(name: str) -> tuple[str, str]:
    """`"openai/gpt-4o"` → `("openai", "gpt-4o")`; the model part may contain slashes."""
    prefix, sep, model = name.partition("/")
    if not sep or not prefix or not model:
        raise ModelNameError(
            f"model name {name!r} must look like provider/model, e.g. openai/gpt-4o-mini or "
            f"local/qwen2.5-coder-1.5b (providers: {', '.join(providers())})"
        )
    if prefix not in _PROVIDERS:
        raise ModelNameError(
            f"unknown provider {prefix!r} in {name!r} (known: {', '.join(providers())})"
        )
    return prefix, model


def _factory(prefix: str) -> ProviderFactory:
    target = _PROVIDERS[prefix]
    if not isinstance(target, str):
        return target
    mod_name, attr = target.split(":")
    factory: ProviderFactory = getattr(importlib.import_module(mod_name), attr)
    return factory


def get_provider(name: str | None = None, **options: Any) -> Provider:
    """Build the provider for `name` (see `resolve_name`); `options` go to its constructor.

    `fake/...` takes `replies=` and `responder=` like `FakeProvider`; `openai/...` takes
    `base_url`, `api_key`, `timeout` and the Azure options; `local/...` takes `threads`,
    `n_ctx` and `model_dir`. Options that are None are dropped, so CLI flags can be passed as-is.
    """
    prefix, model = split_name(resolve_name(name))
    opts = {k: v for k, v in options.items() if v is not None}
    factory = _factory(prefix)
    try:
        inspect.signature(factory).bind(model, **opts)
    except TypeError:
        params = inspect.signature(factory).parameters
        unknown = sorted(k for k in opts if k not in params)
        raise ModelNameError(
            f"{prefix}/ models do not take the option(s) {', '.join(unknown) or '?'}"
        ) from None
    return factory(model, **opts)


def get_model(
    name: str | None = None,
    *,
    cache: ResponseCache | str | Path | bool | None = None,
    concurrency: int | None = None,
    retry: RetryPolicy | None = None,
    prices: PriceTable | str | Path | None = None,
    max_reasks: int | None = None,
    **options: Any,
) -> Model:
    """A `Model` for `provider/model` with the wrapper's settings.

    Args:
        name: `provider/model`; None = `VERITRAIL_MODEL` or the embedded default.
        cache: a `ResponseCache`, a path to one, True for the default path
            (`$VERITRAIL_CACHE_DIR` or `~/.cache/veritrail/cache.sqlite`), False/None for none.
            `VERITRAIL_CACHE=0` turns the default off.
        concurrency: calls in flight at once (default 8; the embedded model defaults to 1, as
            llama.cpp on CPU answers one request at a time and queued ones would time out).
        retry: the retry policy.
        prices: a `PriceTable` or a JSON price file (default: built-in + `VERITRAIL_PRICES`).
        max_reasks: re-asks after an unreadable structured reply (default 1).
        options: provider options (see `get_provider`).
    """
    provider = get_provider(name, **options)
    if cache is True:
        the_cache: ResponseCache | None = (
            None if os.environ.get("VERITRAIL_CACHE") == "0" else ResponseCache()
        )
    elif cache is None or cache is False:
        the_cache = None
    elif isinstance(cache, ResponseCache):
        the_cache = cache
    else:
        the_cache = ResponseCache(cache)
    table = PriceTable.from_file(prices) if isinstance(prices, (str, Path)) else prices
    default_conc = int(getattr(provider, "default_concurrency", 8))
    return Model(
        provider,
        cache=the_cache,
        concurrency=concurrency or default_conc,
        retry=retry,
        prices=table,
        max_reasks=1 if max_reasks is None else max_reasks,
    )


__all__ = [
    "DEFAULT_MODEL",
    "ModelNameError",
    "get_model",
    "get_provider",
    "providers",
    "register_provider",
    "resolve_name",
    "split_name",
]
