"""`ModelSpec`: how to build a model, in any process, and the one place a model is built.

`veritrail verify`/`resume`/`check` (`run.job.build_model`), both executors of `veritrail batch`
(the local one and each Ray shard, over a provider shared between jobs), `veritrail eval` and
`veritrail detect` all describe their model as a `ModelSpec` and build it with `build()` (or
`provider()` + `model()` around a shared provider). A spec is frozen and picklable (it travels to
Ray workers) and holds no key: a provider reads its key from the environment when it is built
(`VERITRAIL_API_KEY`, `OPENAI_API_KEY`, ...), and `repr` leaves the base URL's credentials out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .settings import Settings, Source, model_cache

if TYPE_CHECKING:
    from ..lm.base import Provider
    from ..lm.cache import ResponseCache
    from ..lm.model import Model


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """How to build a model (`provider/model` name, endpoint, cache, prices, provider options).

    Jobs with equal specs share one provider (connection pool) in the local executor.
    """

    name: str
    base_url: str | None = None
    cache: str | bool = True
    """A cache file, True for the default cache of the process's machine, False for none."""
    prices: str | None = None
    threads: int | None = None
    """CPU threads of an embedded `local/` model (ignored by every other provider)."""
    max_reasks: int | None = None

    def __repr__(self) -> str:
        from ..redaction import redact_url

        url = redact_url(self.base_url) if self.base_url else None
        return (
            f"ModelSpec(name={self.name!r}, base_url={url!r}, cache={self.cache!r}, "
            f"prices={self.prices!r}, threads={self.threads!r}, max_reasks={self.max_reasks!r})"
        )

    @classmethod
    def from_settings(cls, settings: Settings, model_name: str) -> ModelSpec:
        """The spec of a run's resolved settings (`--cache` unset: the default cache). An
        endpoint set only in the environment (`VERITRAIL_BASE_URL`) is for the models that have
        one: a model that takes none (`demo/`, `local/`) ignores it, where `--base-url` (or a
        config file) naming one for such a model stays an error."""
        from ..lm.registry import takes_option

        base_url = settings.base_url
        if (
            base_url
            and settings.sources.get("base_url") == Source.ENV
            and not takes_option(model_name, "base_url")
        ):
            base_url = None
        return cls(
            name=model_name,
            base_url=base_url,
            cache=model_cache(settings.cache),
            prices=settings.prices,
            threads=settings.threads,
            max_reasks=settings.max_reasks,
        )

    @property
    def provider_key(self) -> tuple[str, str | None, int | None]:
        """What identifies the endpoint (and provider options): jobs with equal keys share one
        provider in the local executor, and a fatal endpoint error stops them all."""
        return (self.name, self.base_url, self.threads)

    def provider_options(self) -> dict[str, Any]:
        """The provider options of the spec: `threads` only for an embedded `local/` model
        (passing it to another provider would be an error). The one place this rule lives."""
        return {"threads": self.threads} if self.name.startswith("local/") else {}

    def provider(self) -> Provider:
        """A new provider (transport only). Raises ValueError for options it does not take."""
        from ..lm.registry import get_provider

        return get_provider(self.name, base_url=self.base_url, **self.provider_options())

    def open_cache(self) -> ResponseCache | None:
        """The response cache this spec names (None: no cache)."""
        from ..lm.registry import open_cache

        return open_cache(self.cache)

    def model(
        self, provider: Provider, *, cache: ResponseCache | None, concurrency: int | None
    ) -> Model:
        """The `Model` wrapper around `provider` (`lm.registry.model_for`: the wrapper
        `build()` puts around its own provider, here around one that may be shared)."""
        from ..lm.registry import model_for

        return model_for(
            provider,
            cache=cache,
            concurrency=concurrency,
            prices=self.prices,
            max_reasks=self.max_reasks,
        )

    def build(self, *, concurrency: int | None = None) -> Model:
        """A new model of its own (provider, cache and wrapper). Raises ValueError (an unknown
        provider, an option it does not take) and whatever the provider raises."""
        from ..lm.registry import get_model

        return get_model(
            self.name,
            cache=self.cache,
            concurrency=concurrency,
            base_url=self.base_url,
            prices=self.prices,
            max_reasks=self.max_reasks,
            **self.provider_options(),
        )
