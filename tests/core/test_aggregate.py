"""The aggregator's state is a snapshot: absorbing it never links two aggregators."""

from __future__ import annotations

from conftest import flow_dict
from cpg_core._aggregate import Aggregator
from cpg_core._parse import parse_flow


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
