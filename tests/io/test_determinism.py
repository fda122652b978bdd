"""ARCHITECTURE §D13: the same flows in any order, split over any number of runs, give the same bytes."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import WORLD, assert_crd_valid, endpoint, flow_dict
from cpg_core._flows.decide import DecideOptions
from cpg_core._flows.parse import parse_flow
from cpg_core._review.verify import verify_flows
from cpg_core._synthesis.aggregate import AggregateOptions, Aggregator
from cpg_io.policy_files import load_policies
from cpg_io.runs._output import write_plan
from cpg_io.store import PolicyStore

ENDPOINTS = [
    endpoint("shop", "frontend"),
    endpoint("shop", "cart"),
    endpoint("pay", "api"),
    endpoint("pay", "worker"),
    endpoint("shop", "worker"),
    WORLD,
    {"identity": 1, "labels": ["reserved:host"]},
    {"identity": 7, "labels": ["reserved:kube-apiserver"]},
]

flows_strategy = st.lists(
    st.builds(
        lambda s, d, direction, l4, ip, reason: flow_dict(
            src=ENDPOINTS[s],
            dst=ENDPOINTS[d],
            direction=direction,
            src_ip=ip,
            dst_ip=ip,
            reason=reason,
            **l4,
        ),
        st.integers(0, len(ENDPOINTS) - 1),
        st.integers(0, len(ENDPOINTS) - 1),
        st.sampled_from(["INGRESS", "EGRESS"]),
        st.sampled_from(
            [{"tcp": 80}, {"tcp": 443}, {"udp": 53}, {"icmp4": 8}, {"sctp": 3868}, {"icmp6": 128}]
        ),
        st.sampled_from(["8.8.8.8", "2001:db8::1", "10.0.0.9"]),
        st.sampled_from(["POLICY_DENIED", None, "POLICY_DENY"]),
    ),
    min_size=1,
    max_size=40,
)


def run(records: list[dict[str, Any]], out: Path) -> None:
    agg = Aggregator(AggregateOptions())
    for record in records:
        agg.add(parse_flow(record))
    store = PolicyStore(out)
    for plan in agg.plans():
        result = write_plan(store, plan, dry_run=False, diff=False)
        assert result.outcome != "failed", result.error


def snapshot(out: Path) -> dict[str, bytes]:
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.yaml"))}
    for data in files.values():
        assert_crd_valid(data.decode())
    return files


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(records=flows_strategy, seed=st.integers(0, 2**32 - 1), splits=st.integers(1, 4))
def test_order_and_run_splits_never_change_the_bytes(
    tmp_path_factory: Any, records: list[dict[str, Any]], seed: int, splits: int
) -> None:
    single = tmp_path_factory.mktemp("single")
    run(records, single)
    shuffled = list(records)
    random.Random(seed).shuffle(shuffled)
    split_dir = tmp_path_factory.mktemp("split")
    cuts = sorted(
        random.Random(seed + 1).sample(range(len(shuffled) + 1), k=min(splits, len(shuffled) + 1))
    )
    bounds = [0, *cuts, len(shuffled)]
    for start, stop in itertools.pairwise(bounds):
        run(shuffled[start:stop], split_dir)
    assert snapshot(split_dir) == snapshot(single)
    # What was written admits every candidate cpg can express, and no explicitly denied flow.
    checks = (
        verify_flows(
            [parse_flow(r) for r in records], load_policies(split_dir), DecideOptions()
        ).checks
        if split_dir.exists()
        else ()
    )
    assert all(c.allowed for c in checks if c.kind == "candidate"), checks
    denied_elsewhere = {c.traffic for c in checks if c.kind == "candidate"}
    assert not [
        c
        for c in checks
        if c.kind == "explicit_deny" and c.allowed and c.traffic not in denied_elsewhere
    ]
    # and a further run with the same flows changes nothing
    before = {p: p.stat().st_mtime_ns for p in split_dir.rglob("*.yaml")}
    run(records, split_dir)
    assert {p: p.stat().st_mtime_ns for p in split_dir.rglob("*.yaml")} == before
