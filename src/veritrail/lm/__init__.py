"""The model layer: providers behind one contract, and the `Model` wrapper.

`get_model("provider/model")` builds a ready `Model` (see docs/models.md); providers are imported
only when used, so importing this package does not load the `openai` SDK or llama.cpp.
"""

from .base import (
    EndpointError,
    FatalError,
    GenerateConfig,
    Message,
    ModelOutput,
    Provider,
    ProviderError,
    RateLimitError,
    ResponseFormat,
    TransientError,
    UnsupportedFormatError,
)
from .cache import ResponseCache
from .fake import FakeProvider
from .model import CallEvent, Generation, Model, StructuredResult, claim_scope
from .pricing import Price, PriceTable
from .registry import DEFAULT_MODEL, get_model, get_provider, register_provider
from .retry import RetryPolicy

__all__ = [
    "DEFAULT_MODEL",
    "CallEvent",
    "EndpointError",
    "FakeProvider",
    "FatalError",
    "GenerateConfig",
    "Generation",
    "Message",
    "Model",
    "ModelOutput",
    "Price",
    "PriceTable",
    "Provider",
    "ProviderError",
    "RateLimitError",
    "ResponseCache",
    "ResponseFormat",
    "RetryPolicy",
    "StructuredResult",
    "TransientError",
    "UnsupportedFormatError",
    "claim_scope",
    "get_model",
    "get_provider",
    "register_provider",
]
