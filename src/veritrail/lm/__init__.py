"""The model layer: providers behind one contract, and the `Model` wrapper."""

from .base import GenerateConfig, Message, ModelOutput, Provider, ProviderError, ResponseFormat
from .fake import FakeProvider
from .model import Generation, Model, StructuredResult, claim_scope

__all__ = [
    "FakeProvider",
    "GenerateConfig",
    "Generation",
    "Message",
    "Model",
    "ModelOutput",
    "Provider",
    "ProviderError",
    "ResponseFormat",
    "StructuredResult",
    "claim_scope",
]
