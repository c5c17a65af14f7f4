"""`Usage` keeps costs per claim: `for_claim`, `total` and `per_step` agree with a plain
per-call sum (hypothesis), and `for_claim` returns a copy."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from veritrail.lm.model import Usage
from veritrail.records import StepCost

calls = st.lists(
    st.tuples(
        st.sampled_from([None, "c1", "c2", "c3"]),
        st.sampled_from(["evidence", "verdict", "decompose"]),
        st.integers(0, 1000),
        st.integers(0, 100),
    ),
    max_size=40,
)


@given(calls)
def test_usage_sums_match_a_plain_sum(items: list[tuple[str | None, str, int, int]]) -> None:
    u = Usage()
    for claim, step, tin, tout in items:
        u.add(claim, step, StepCost(lm_calls=1, input_tokens=tin, output_tokens=tout))
    for claim in (None, "c1", "c2", "c3", "nobody"):
        got = u.for_claim(claim)
        want: dict[str, tuple[int, int, int]] = {}
        for c, s, tin, tout in items:
            if c == claim:
                a, b, n = want.get(s, (0, 0, 0))
                want[s] = (a + tin, b + tout, n + 1)
        assert {s: (v.input_tokens, v.output_tokens, v.lm_calls) for s, v in got.items()} == want
    total = u.total()
    assert total.lm_calls == len(items)
    assert total.input_tokens == sum(t[2] for t in items)
    per = u.per_step()
    assert sum(v.output_tokens for v in per.values()) == sum(t[3] for t in items)
    u.for_claim("c1").clear()  # a copy: the ledger is unchanged
    assert u.total() == total
