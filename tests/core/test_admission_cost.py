"""The guard stays within the API server's CEL cost limits for every policy it checks.

cel-go stops an expression past one million units and a policy's evaluation past ten
million; under ``failurePolicy: Fail`` that would refuse a policy lint accepts. The guard
checks a policy only within its bounds (rules, entries, specs; the pairwise checks tighter),
so its cost has a ceiling: each expression's cost, metered on probe policies growing one kind
of entry at a time, is linear in them (checked), and the slopes times the bounds stay within
the limits with room to spare."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("celpy")

from cel_cost import PER_CALL_LIMIT, RUNTIME_BUDGET, MeteredProgram, to_cel
from celpy import celtypes

from cpg_core._policy.admission_cel import (
    ADMISSION_VARIABLES,
    MAX_CIDRS,
    MAX_ENTRIES,
    MAX_PAIRED_ENTRIES,
    MAX_PAIRED_RULES,
    MAX_RULES,
    MAX_SPECS,
    SIZE_CHECK,
)
from cpg_core._reports.admission import admission_checks

PAIRWISE = ("CPG008", "CPG011")
VARIABLES = [(v.name, MeteredProgram(v.expression)) for v in ADMISSION_VARIABLES]
CHECKS = [(c.code, MeteredProgram(c.expression)) for c in admission_checks((1, 16, 0))]
CHECKS.append((SIZE_CHECK.code, MeteredProgram(SIZE_CHECK.expression)))


def costs(document: dict[str, Any]) -> dict[str, int]:
    """What each variable and check costs on ``document`` (each variable once, as the API
    server evaluates them: lazily, at most once per request)."""
    values: dict[str, Any] = {}
    spent: dict[str, int] = {}
    obj = to_cel(json.loads(json.dumps(document)))

    def activation() -> dict[str, Any]:
        held = celtypes.MapType({celtypes.StringType(k): v for k, v in values.items()})
        return {"object": obj, "variables": held}

    for name, program in VARIABLES:
        values[name], spent[name] = program.cost(activation())
    for code, program in CHECKS:
        verdict, spent[code] = program.cost(activation())
        assert isinstance(verdict, celtypes.BoolType), code
    return spent


def policy(*specs: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "probe", "namespace": "shop"},
        "spec": specs[0],
        **({"specs": list(specs[1:])} if len(specs) > 1 else {}),
    }


def spec(ingress: list[Any] = (), egress: list[Any] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "endpointSelector": {"matchLabels": {"app": "api"}},
        "ingress": list(ingress),
        "egress": [
            *egress,
            {
                "toEndpoints": [{"matchLabels": {"k8s-app": "kube-dns"}}],
                "toPorts": [
                    {
                        "ports": [{"port": "53", "protocol": "UDP"}],
                        "rules": {"dns": [{"matchPattern": "*"}]},
                    }
                ],
            },
        ],
    }


LABEL_VALUE = "v" * 63


def _labels(n: int) -> dict[str, Any]:
    keys = {f"k8s:io.example.team/label-key-{i:05d}": LABEL_VALUE for i in range(n)}
    return spec(ingress=[{"fromEndpoints": [{"matchLabels": keys}]}])


def _expressions(n: int) -> dict[str, Any]:
    terms = [{"key": "k8s:io.example/tier", "operator": "In", "values": [LABEL_VALUE]}] * n
    return spec(ingress=[{"fromEndpoints": [{"matchExpressions": terms}]}])


def _cidrs(n: int) -> dict[str, Any]:
    return spec(egress=[{"toCIDR": ["198.51.100.0/24"] * n}])


def _cidr_sets(n: int) -> dict[str, Any]:
    entry = {
        "cidr": "2001:db8:aaaa:bbbb:cccc:dddd:eeee:0/112",
        "except": ["2001:db8:aaaa:bbbb:cccc:dddd:eeee:ff00/120"],
    }
    return spec(egress=[{"toCIDRSet": [entry] * n}])


def _ports(n: int) -> dict[str, Any]:
    port = {"port": "0x1F90", "endPort": 9000, "protocol": "TCP"}
    return spec(ingress=[{"fromEntities": ["cluster"], "toPorts": [{"ports": [port] * n}]}])


def _http(n: int) -> dict[str, Any]:
    rule = {"path": "/api/v[0-9]+/items/(a|b|c)/.*", "method": "GET|POST|PUT"}
    ports = {"ports": [{"port": "8080", "protocol": "TCP"}], "rules": {"http": [rule] * n}}
    return spec(ingress=[{"fromEntities": ["cluster"], "toPorts": [ports]}])


def _fqdns(n: int) -> dict[str, Any]:
    return spec(egress=[{"toFQDNs": [{"matchName": "api.payments.example.com"}] * n}])


def _icmps(n: int) -> dict[str, Any]:
    fields = [{"type": "EchoRequest", "family": "IPv4"}] * n
    return spec(ingress=[{"fromEntities": ["cluster"], "icmps": [{"fields": fields}]}])


def _services(n: int) -> dict[str, Any]:
    service = {"k8sServiceSelector": {"selector": {"matchLabels": {"app": LABEL_VALUE}}}}
    return spec(egress=[{"toServices": [service] * n}])


RICH_RULE = {
    "fromEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "shop"}}],
    "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}],
}


def _rules(n: int) -> dict[str, Any]:
    return spec(ingress=[RICH_RULE] * n)


ENTRY_PROBES: dict[str, tuple[Callable[[int], dict[str, Any]], int]] = {
    "labels": (_labels, 1),
    "expressions": (_expressions, 2),
    "cidrs": (_cidrs, 1),
    "cidr-sets": (_cidr_sets, 2),
    "ports": (_ports, 1),
    "http": (_http, 1),
    "fqdns": (_fqdns, 1),
    "icmps": (_icmps, 1),
    "services": (_services, 2),
}
"""Probes growing one kind of entry, with how many entries each step adds."""


def _slopes(make: Callable[[int], dict[str, Any]], per_step: int) -> dict[str, float]:
    """Each expression's cost per entry (or rule) of the probe, checked no worse than linear
    over 4, 8 and 12 steps."""
    low, mid, high = (costs(policy(make(n))) for n in (4, 8, 12))
    slopes = {}
    for name in low:
        if name in PAIRWISE:
            continue  # they compare rules pairwise, measured by themselves
        first, second = mid[name] - low[name], high[name] - mid[name]
        # linear, up to the rounding of strings' costs (a tenth of a unit per character)
        assert second <= first * 1.25 + 16, (name, low[name], mid[name], high[name])
        slopes[name] = max(first, second) / (4 * per_step)
    return slopes


@pytest.fixture(scope="module")
def ceilings() -> dict[str, float]:
    """Each expression's ceiling over every policy within the bounds: its cost on a plain
    policy, plus the costliest entry's slope times the entries allowed, plus a rule's slope
    times the rules allowed (the pairwise checks apart)."""
    base = costs(policy(spec()))
    entry = {name: 0.0 for name in base}
    for kind, (make, per_step) in ENTRY_PROBES.items():
        if kind in CIDR_PROBES:
            continue
        for name, slope in _slopes(make, per_step).items():
            entry[name] = max(entry[name], slope)
    cidr = {name: 0.0 for name in base}
    for kind in CIDR_PROBES:
        make, per_step = ENTRY_PROBES[kind]
        for name, slope in _slopes(make, per_step).items():
            cidr[name] = max(cidr[name], slope)
    rule = _slopes(_rules, 1)
    return {
        name: base[name] * MAX_SPECS
        + entry[name] * MAX_ENTRIES
        + cidr[name] * MAX_CIDRS
        + rule[name] * MAX_RULES
        for name in base
        if name not in PAIRWISE
    }


CIDR_PROBES = ("cidrs", "cidr-sets")
"""The probes of CIDRs: their entries count against the CIDR bound, the others against the
entry bound."""


def test_each_expression_stays_within_the_per_call_limit(ceilings: dict[str, float]) -> None:
    over = {name: int(c) for name, c in ceilings.items() if c > PER_CALL_LIMIT / 2}
    assert over == {}, f"within half of {PER_CALL_LIMIT:,}"


def test_the_whole_policy_stays_within_the_runtime_budget(ceilings: dict[str, float]) -> None:
    pairwise = _pairwise_ceiling()
    total = sum(ceilings.values()) + sum(pairwise.values())
    assert total < RUNTIME_BUDGET / 2, f"{total:,.0f} units"


def _pairwise_ceiling() -> dict[str, float]:
    """The pairwise checks at their bounds, for the two shapes that cost them most: ports
    (one L7 port rule and one plain one for the same peers, every entry a port: every pair
    of ports compared) and rules (every pair of rules compared); each metered at a quarter
    and an eighth of its bound and extrapolated as a square."""

    def rules(count: int, ports: int) -> list[dict[str, Any]]:
        entries = [{"port": str(8000 + n), "protocol": "TCP"} for n in range(ports)]
        layered = {"ports": entries, "rules": {"http": [{"path": "/"}]}}
        return [
            {"fromEntities": ["cluster"], "toPorts": [layered if n % 2 else {"ports": entries}]}
            for n in range(count)
        ]

    found: dict[str, float] = {}
    for code in PAIRWISE:
        ceiling = 0.0
        for shape in ("ports", "rules"):
            bound = MAX_PAIRED_ENTRIES // 2 if shape == "ports" else MAX_PAIRED_RULES
            measured = []
            for size in (bound // 8, bound // 4):
                made = rules(2, size) if shape == "ports" else rules(size, 1)
                measured.append(costs(policy(spec(ingress=made)))[code])
            ceiling += measured[1] * 16  # four times the size: sixteen times the pairs
        found[code] = ceiling
        assert ceiling < PER_CALL_LIMIT / 2, (code, ceiling)
    return found


def test_the_bounds_are_those_the_size_check_names() -> None:
    """Within the bounds the size check passes; one rule or entry past them, it fails (it
    warns, as shipped) and no check runs."""
    from test_admission_parity import GUARD

    assert GUARD.checked(
        policy(spec(ingress=[{"fromEntities": ["cluster"]}] * (MAX_PAIRED_RULES - 1)))
    )
    assert not GUARD.checked(policy(spec(ingress=[{}] * (MAX_RULES + 1))))
    assert not GUARD.checked(policy(_labels(MAX_ENTRIES)))
    assert GUARD.variables_of(policy(_cidrs(MAX_CIDRS)))["checkable"] is True
    assert GUARD.variables_of(policy(_cidrs(MAX_CIDRS + 1)))["checkable"] is False
    assert GUARD.variables_of(policy(_labels(MAX_ENTRIES - 16)))["checkable"] is True
