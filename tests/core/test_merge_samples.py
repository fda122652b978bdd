"""Samples merge by time, then by content: the same newest samples, in the same order,
whatever list each came from and however many duplicates and equal times there are."""

from __future__ import annotations

import orjson
from hypothesis import given, settings, strategies as st

from cpg_core import to_data
from cpg_core._base.documents import SampleFlow, SampleSide
from cpg_core._review.evidence import merge_samples

_SIDES = st.builds(
    SampleSide,
    namespace=st.sampled_from(["", "shop", "pay"]),
    workload=st.sampled_from(["", "cart", "db"]),
    pod=st.sampled_from(["", "cart-1", "db-0"]),
    ip=st.sampled_from(["", "10.0.0.1", "10.0.0.2"]),
)
_SAMPLES = st.builds(
    SampleFlow,
    time=st.sampled_from(
        [
            "2026-11-02T10:00:00.000000000Z",
            "2026-11-02T10:00:01.000000000Z",
            "2026-11-02T10:00:02.5Z",
        ]
    ),
    src=_SIDES,
    dst=_SIDES,
    port=st.sampled_from([80, 443]),
    protocol=st.just("TCP"),
    verdict=st.just("DROPPED"),
    drop_reason=st.sampled_from(["POLICY_DENIED", "POLICY_DENY"]),
    node=st.sampled_from(["", "node-1"]),
    l7=st.sampled_from(["", "GET /x"]),
)


def _by_content(old: list[SampleFlow], new: list[SampleFlow], limit: int) -> tuple[SampleFlow, ...]:
    """The rule written out: distinct by canonical JSON, ordered by (time, that JSON)."""
    canonical = {orjson.dumps(to_data(s), option=orjson.OPT_SORT_KEYS): s for s in [*old, *new]}
    ordered = sorted(canonical.items(), key=lambda item: (item[1].time, item[0]))
    return tuple(sample for _, sample in ordered[-limit:]) if limit else ()


@settings(max_examples=300, deadline=None)
@given(
    old=st.lists(_SAMPLES, max_size=12),
    new=st.lists(_SAMPLES, max_size=12),
    limit=st.integers(min_value=0, max_value=10),
)
def test_merged_samples_follow_time_then_content(
    old: list[SampleFlow], new: list[SampleFlow], limit: int
) -> None:
    merged = merge_samples(old, new, limit)
    assert merged == _by_content(old, new, limit)
    assert merged == merge_samples(new, old, limit)  # the order of the lists does not matter
