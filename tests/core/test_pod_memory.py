"""What cpg keeps per pod is bounded: pods that came and went are forgotten, the pods an
allow entry depends on are not (ARCHITECTURE §D56)."""

from __future__ import annotations

import gc

import pytest

from conftest import WORLD, endpoint, flow_dict
from cpg_core._base.flow import Endpoint
from cpg_core._flows.parse import parse_flow
from cpg_core._synthesis._pods import POD_MEMORY_LIMIT, PodMemory
from cpg_core._synthesis.aggregate import Aggregator

pytestmark = pytest.mark.unit


def _time(i: int) -> str:
    return f"2026-11-02T{10 + i // 3600:02}:{i // 60 % 60:02}:{i % 60:02}.000000000Z"


def _ip(i: int) -> str:
    return f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"


def test_forgetting_keeps_the_pods_seen_last_and_those_asked_for() -> None:
    pods = PodMemory(limit=3)
    for i in range(8):
        pods.note(_ip(i), _time(i), None)
    assert pods.full and len(pods) == 8
    assert pods.forget(keep={_ip(0)}) == 4
    assert sorted(ip for ip in map(_ip, range(8)) if ip in pods) == sorted(
        [_ip(0), _ip(5), _ip(6), _ip(7)]
    )
    # A pod seen again is recent again.
    pods.note(_ip(5), _time(100), None)
    for i in range(20, 23):
        pods.note(_ip(i), _time(i), None)
    pods.forget()
    assert _ip(5) in pods and _ip(20) not in pods and _ip(0) not in pods


def test_the_pod_kept_for_an_ip_is_the_first_in_order_whatever_the_order_seen() -> None:
    a = endpoint("shop", "a", pod_name="a-1")
    b = endpoint("shop", "b", pod_name="b-1")
    one, two = PodMemory(), PodMemory()
    left, right = parse_flow(flow_dict(src=a)).source, parse_flow(flow_dict(src=b)).source
    one.note("10.0.0.1", _time(1), left)
    one.note("10.0.0.1", _time(2), right)
    two.note("10.0.0.1", _time(2), right)
    two.note("10.0.0.1", _time(1), left)
    assert one == two and one.endpoint("10.0.0.1") is left


def test_absorbing_gives_the_same_memory_in_any_order() -> None:
    parts = []
    for start in (0, 5, 10):
        part = PodMemory(limit=4)
        for i in range(start, start + 7):
            part.note(_ip(i % 12), _time(i), None)
        parts.append(part)
    merged = []
    for order in (parts, parts[::-1], [parts[1], parts[0], parts[2]]):
        whole = PodMemory(limit=4)
        for part in order:
            whole.absorb(part)
        whole.forget()
        merged.append(sorted(ip for ip in map(_ip, range(12)) if ip in whole))
    assert merged[0] == merged[1] == merged[2] and len(merged[0]) == 4


def _churned(i: int) -> dict[str, object]:
    """A denied flow between two pods never seen before (every pod new, as under churn)."""
    return flow_dict(
        src=endpoint("shop", f"web-{i % 20}", pod_name=f"web-{i}"),
        dst=endpoint("shop", f"db-{i % 20}", pod_name=f"db-{i}"),
        src_ip=_ip(2 * i + 1),
        dst_ip=_ip(2 * i + 2),
        tcp=5432,
        time=_time(i),
    )


def _live_endpoints() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Endpoint)


def test_a_session_whose_pods_come_and_go_forgets_them() -> None:
    """100,000 pods, each in one flow: what the aggregator keeps stops growing (every
    cache that holds pods is bounded), and the policies are the same as with one pod per
    workload."""
    churned, still = Aggregator(), Aggregator()
    flows = 50_000
    before = _live_endpoints()
    for i in range(flows):
        churned.add(parse_flow(_churned(i)))
    assert len(churned.pods) < 2 * POD_MEMORY_LIMIT
    assert _live_endpoints() - before < flows  # of the 2 x flows pods seen
    for i in range(flows):
        record = _churned(i)
        record["flow"]["source"]["pod_name"] = f"web-{i % 20}"  # type: ignore[index]
        record["flow"]["destination"]["pod_name"] = f"db-{i % 20}"  # type: ignore[index]
        still.add(parse_flow(record))
    assert [(p.target, p.rules) for p in churned.plans()] == [
        (p.target, p.rules) for p in still.plans()
    ]


def test_a_world_peer_with_a_pod_ip_stays_that_pod_however_many_pods_come_after() -> None:
    """A world peer Hubble gave a pod's IP is a finding, never a toCIDR rule (§D22); the
    pod seen with that IP is kept while the entry needs it, through heavy churn."""
    agg = Aggregator()
    agg.add(parse_flow(flow_dict(dst=endpoint("shop", "db", pod_name="db-0"), dst_ip="10.9.9.9")))
    to_world = flow_dict(
        src=endpoint("shop", "api"),
        dst={**WORLD},
        dst_ip="10.9.9.9",
        direction="EGRESS",
        tcp=5432,
        time=_time(1),
    )
    agg.add(parse_flow(to_world))
    for i in range(3 * POD_MEMORY_LIMIT):
        agg.add(parse_flow(_churned(i + 10)))
    assert "10.9.9.9" in agg.pods
    api = [rule for plan in agg.plans() if plan.target.workload == "api" for rule in plan.rules]
    assert not any("10.9.9.9" in str(rule) for rule in api)
    assert any("db" in str(rule) for rule in api), api
