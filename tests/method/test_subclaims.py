"""Decomposition replies: the fence lines a small model echoes from its prompt are no parts."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from veritrail.fencing import fence
from veritrail.method.subclaims import _parts, decompose_claim
from veritrail.records import Claim


def test_echoed_fence_lines_are_dropped() -> None:
    # Replies of the embedded model on the WiCE slice (12 of 66 decompositions looked so).
    assert _parts({"parts": ["<<< statement", "with Bill McGlaughlin", ">>> end statement"]}) == [
        "with Bill McGlaughlin"
    ]
    assert _parts({"parts": ["<<< statement", "\n<<< statement", ">>> end statement"]}) == []
    assert _parts(
        {"parts": ["<<< statement of the program 'Exploring Music' >>> end statement"]}
    ) == ["of the program 'Exploring Music'"]
    # A whole fenced block echoed as one part keeps its content.
    assert _parts({"parts": [fence("The zoo has 3,000 animals.", "statement")]}) == [
        "The zoo has 3,000 animals."
    ]


def test_a_claim_whose_parts_were_all_echoes_stays_whole() -> None:
    class Echo:
        async def decompose(self, claim: Claim, text: str) -> list[str]:
            return _parts({"parts": ["<<< statement", ">>> end statement", ">>> end statement"]})

    subs = asyncio.run(decompose_claim(Echo(), Claim("c", "The zoo has 3,000 animals.")))
    assert subs == ("The zoo has 3,000 animals.",)


plain_text = st.text(min_size=1).filter(lambda t: "<" not in t and ">" not in t)


@given(st.lists(plain_text, max_size=5))
def test_parts_without_fence_markers_keep_their_words(parts: list[str]) -> None:
    got = _parts({"parts": parts})
    expected = [" ".join(p.split()) for p in parts if p.split()]
    assert [" ".join(g.split()) for g in got] == expected
