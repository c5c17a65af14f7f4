"""The word-overlap demonstration "model" behind the loopback `FakeOpenAIServer`.

Its rules live in `veritrail.lm.overlap` (which `--model demo/overlap` also uses, in-process);
this module points veritrail at a loopback server that answers with them. **Not a model**: its
verdicts only say whether the claim's content words occur in the evidence.
"""

from __future__ import annotations

from ..lm.overlap import content_words, responder
from .fake_openai_server import FakeOpenAIServer


def loopback_env(srv: FakeOpenAIServer) -> dict[str, str]:
    """Environment that points every model of veritrail at `srv`, uncached."""
    return {
        "VERITRAIL_MODEL": "openai/loopback",
        "VERITRAIL_BASE_URL": srv.base_url,
        "OPENAI_API_KEY": "sk-test-loopback",
        "VERITRAIL_CACHE": "0",
        "VERITRAIL_PRICES": "",
        "NO_PROXY": "127.0.0.1",
    }


__all__ = ["content_words", "loopback_env", "responder"]
