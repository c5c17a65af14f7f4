"""`veritrail inject`: hallucinations planted at known stages of a DAG (docs/inject.md).

* `perturb`: the kinds (`Kind`) and the model-free perturbation of one sentence;
* `build`: the variants (`make_variants`: a node of a chosen stage perturbed and the result
  carried down to the final output) and their files (`write_injection`: DAGs, claims, gold and
  the manifest ``injected.json``, read back by ``veritrail eval injected:DIR``).
"""

from __future__ import annotations

from .build import (
    FORMAT_NAME,
    FORMAT_VERSION,
    INJECTED_CLAIM_ID,
    MANIFEST,
    InjectError,
    Injection,
    Variant,
    clean_claims,
    injectable_stages,
    make_variants,
    parse_kinds,
    write_injection,
)
from .perturb import Kind, Vocabulary, perturb

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "INJECTED_CLAIM_ID",
    "MANIFEST",
    "InjectError",
    "Injection",
    "Kind",
    "Variant",
    "Vocabulary",
    "clean_claims",
    "injectable_stages",
    "make_variants",
    "parse_kinds",
    "perturb",
    "write_injection",
]
