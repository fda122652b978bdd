"""The aggregator's state is a snapshot: absorbing it never links two aggregators."""

from __future__ import annotations

from conftest import flow_dict
from cpg_core._flows.parse import parse_flow
from cpg_core._synthesis.aggregate import Aggregator


def _counts(agg: Aggregator) -> tuple[object, ...]:
    rules = {
        (target.namespace, str(atom)): (stats.count, dict(stats.classes), len(stats.samples))
        for target, atoms in agg.attribution().items()
        for atom, stats in atoms.items()
    }
    drops = {code: (t.count, dict(t.by_node)) for code, t in agg.drops.items()}
    findings = {key: (f.count, len(f.examples)) for key, f in agg.findings.items()}
    return rules, drops, findings, agg.total_flows


def _feed(agg: Aggregator, n: int, second: int = 0) -> None:
    for i in range(n):
        time = f"2026-11-02T10:00:{second + i:02}Z"
        agg.add(parse_flow(flow_dict(time=time, src_ip=f"10.0.1.{i}")))
        agg.add(parse_flow(flow_dict(reason="CT_MAP_INSERTION_FAILED", node_name="n1", time=time)))
        agg.add(parse_flow(flow_dict(reason="POLICY_DENY", time=time)))


def test_absorbed_state_is_not_shared_with_its_source() -> None:
    a, b = Aggregator(), Aggregator()
    _feed(b, 3)
    a.absorb(b.state())
    before = _counts(a)
    _feed(b, 4, second=10)  # more flows to b, after a absorbed its state
    assert _counts(a) == before, "feeding b changed a's counts"


def test_a_state_is_a_snapshot_and_can_be_absorbed_twice() -> None:
    b = Aggregator()
    _feed(b, 2)
    state = b.state()
    _feed(b, 2, second=20)
    first, second = Aggregator(), Aggregator()
    first.absorb(state)
    second.absorb(state)
    _feed(first, 5, second=30)
    rules = _counts(second)[0]
    assert isinstance(rules, dict)
    assert sum(count for count, _, _ in rules.values()) == 2, "the snapshot saw later flows"
    assert _counts(second)[3] == 6
    assert _counts(second) != _counts(first)
    fresh = Aggregator()
    fresh.absorb(state)
    assert _counts(fresh) == _counts(second), "absorbing into first changed the state"


def _mixed_flows(second: int) -> list[object]:
    """Endpoint peers, a drop, a world peer that is a pod's IP (a finding) and real world
    peers, at ``second``."""
    from conftest import WORLD, endpoint

    product = endpoint("bookinfo", "productpage", pod_name="productpage-1")
    time = f"2026-11-02T10:00:{second:02}Z"
    unnamed_pod = {**WORLD, "pod_name": "reviews-v3-7d9c"}
    records = [
        flow_dict(
            product, unnamed_pod, direction="EGRESS", tcp=9080, dst_ip="10.244.1.18", time=time
        ),
        flow_dict(product, WORLD, direction="EGRESS", tcp=9080, dst_ip="10.244.2.7", time=time),
        flow_dict(product, WORLD, direction="EGRESS", tcp=9080, dst_ip="1.1.1.1", time=time),
        flow_dict(
            endpoint("bookinfo", "ratings", pod_name="ratings-1"),
            endpoint("bookinfo", "details", pod_name="details-1"),
            src_ip="10.244.2.7",
            time=time,
        ),
        flow_dict(reason="CT_MAP_INSERTION_FAILED", node_name="n1", time=time),
    ]
    return [parse_flow(record) for record in records]


def _health(agg: Aggregator) -> object:
    from cpg_core import to_data

    return to_data(agg.health(started="s", ended="e"))


def test_drain_moves_entries_out_and_the_totals_still_count_them() -> None:
    agg = Aggregator()
    for second in (1, 2, 3):
        for flow in _mixed_flows(second):
            agg.add(flow)  # type: ignore[arg-type]
    whole = Aggregator()
    whole.absorb(agg.state())
    totals = (agg.total_flows, agg.rule_flows, agg.window(), _health(agg))
    assert "world_is_pod" in str(totals[3]) and "CT_MAP_INSERTION_FAILED" in str(totals[3])
    planned = {  # counted now: a plan shares its entries' stats with the aggregator
        (p.target, p.rules): {atom: s.count for atom, s in p.attribution.items()}
        for p in agg.plans()
    }
    new = agg.take_new_targets()
    assert new == set(agg.attribution()) and agg.take_new_targets() == set()

    drained = agg.drain(new)
    # what moved out is what the policies were built from; the totals did not change
    plans = agg.plans(agg.resolved(drained))
    assert {(p.target, tuple(p.rules)) for p in plans} == set(planned)
    for plan in plans:
        counts = {atom: s.count for atom, s in plan.attribution.items()}
        assert counts == planned[plan.target, plan.rules]
    assert (agg.total_flows, agg.rule_flows, agg.window(), _health(agg)) == totals
    assert agg.plans() == [] and agg.busy_targets() == [] and agg.drain(new) == {}
    assert agg.state().atoms == {t: {} for t in new}
    # a snapshot after the drain still gives the same totals
    again = Aggregator()
    again.absorb(agg.state())
    assert (again.total_flows, again.rule_flows, again.window(), _health(again)) == totals

    # the same entries once more: nothing new, the fast path still finds them, and only
    # these flows are drained next time
    for flow in _mixed_flows(4):
        agg.add(flow)  # type: ignore[arg-type]
    assert agg.take_new_targets() == set()
    assert set(agg.busy_targets()) == new
    second = agg.drain(agg.busy_targets())
    assert sum(s.count for atoms in second.values() for s in atoms.values()) == 4
    for flow in _mixed_flows(4):
        whole.add(flow)  # type: ignore[arg-type]
    assert (agg.total_flows, agg.rule_flows, agg.window(), _health(agg)) == (
        whole.total_flows,
        whole.rule_flows,
        whole.window(),
        _health(whole),
    )


def test_l7_entries_to_a_pod_hubble_called_world_are_named_or_findings_not_a_crash() -> None:
    """``--l7`` on a capture where an HTTP request went to a pod Hubble gave the world
    identity (an L7 proxy record) crashed the replay (an L7 entry key has five fields). Now:
    with the pod's labels elsewhere in the capture, the HTTP rule names the pod; without
    them, the entry is a world_is_pod finding and no toCIDR rule carries the request."""
    from conftest import WORLD, endpoint
    from cpg_core._synthesis.aggregate import AggregateOptions

    http = {"l7": {"type": "REQUEST", "http": {"method": "GET", "url": "http://db/items"}}}
    to_world = flow_dict(
        src=endpoint("shop", "api"),
        dst={**WORLD, "pod_name": "db-0", "namespace": "shop"},
        dst_ip="10.0.0.9",
        direction="EGRESS",
        tcp=80,
        **http,
    )
    labelled = flow_dict(
        src=endpoint("shop", "web"),
        dst=endpoint("shop", "db", pod_name="db-0"),
        dst_ip="10.0.0.9",
        verdict="FORWARDED",
        reason=None,
        tcp=80,
    )
    for flows, named in (([to_world, labelled], True), ([to_world], False)):
        agg = Aggregator(AggregateOptions(l7=True))
        for record in flows:
            agg.add(parse_flow(record))
        rules = [(plan.target.workload, rule) for plan in agg.plans() for rule in plan.rules]
        api_rules = [str(rule) for workload, rule in rules if workload == "api"]
        assert not any("10.0.0.9" in rule for rule in api_rules)
        findings = {f.kind for f in agg.health(started="", ended="").findings}
        if named:
            assert any("db" in rule and "GET" in rule for rule in api_rules), api_rules
            assert "world_is_pod" not in findings
        else:
            assert api_rules == [] and "world_is_pod" in findings
