"""Kubernetes NetworkPolicies in lint and in the review commands: the API server's own
validation, one finding per field; and what the YAML of a policy means to two readers."""

from __future__ import annotations

from typing import Any

import pytest

from cpg_core._policy.netpol_validation import (
    ipblock_only_ingress,
    ipblock_release_note,
    network_policy_refusals,
)
from cpg_core._policy.policy_docs import PolicyShapeProblem, policies_in
from cpg_core._policy.yaml_ambiguity import yaml_ambiguities
from cpg_core.lint import lint_text


def netpol(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {"podSelector": {"matchLabels": {"app": "api"}}, **spec},
    }


def fields(spec: dict[str, Any]) -> list[tuple[str, tuple[str | int, ...]]]:
    return [(code, path) for code, _message, path in network_policy_refusals(netpol(spec))]


def ingress(peer: dict[str, Any] | None = None, **rule: Any) -> dict[str, Any]:
    return {"ingress": [{**({"from": [peer]} if peer is not None else {}), **rule}]}


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        # ipBlock beside a selector in one peer; a peer that names nothing
        (ingress({"ipBlock": {"cidr": "10.0.0.0/8"}, "namespaceSelector": {}}), ("from", 0)),
        (ingress({}), ("from", 0)),
        # except outside cidr, of the other family, equal to it; a cidr that is none
        (ingress({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["192.168.0.0/16"]}}), ("except", 0)),
        (ingress({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["fd00::/8"]}}), ("except", 0)),
        (ingress({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.0.0.0/8"]}}), ("except", 0)),
        (ingress({"ipBlock": {"cidr": "10.0.0.300/8"}}), ("ipBlock", "cidr")),
        # ports: protocol, range, names, endPort
        (ingress(ports=[{"protocol": "ICMP", "port": 8}]), ("ports", 0, "protocol")),
        (ingress(ports=[{"port": 0}]), ("ports", 0, "port")),
        (ingress(ports=[{"port": 70000}]), ("ports", 0, "port")),
        (ingress(ports=[{"port": "80"}]), ("ports", 0, "port")),
        (ingress(ports=[{"port": "Http"}]), ("ports", 0, "port")),
        (ingress(ports=[{"endPort": 90}]), ("ports", 0, "endPort")),
        (ingress(ports=[{"port": "http", "endPort": 90}]), ("ports", 0, "endPort")),
        (ingress(ports=[{"port": 90, "endPort": 80}]), ("ports", 0, "endPort")),
        (ingress(ports=[{"port": 90, "endPort": 65536}]), ("ports", 0, "endPort")),
        # label selectors, in the subject and in peers
        ({"podSelector": {"matchLabels": {"app": "front end"}}}, ("matchLabels", "app")),
        ({"podSelector": {"matchLabels": {"app": 5}}}, ("matchLabels", "app")),
        (
            ingress({"podSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}),
            ("matchExpressions", 0, "values"),
        ),
        (
            ingress({"podSelector": {"matchExpressions": [{"key": "app", "operator": "Gt"}]}}),
            ("matchExpressions", 0, "operator"),
        ),
        (
            ingress(
                {
                    "namespaceSelector": {
                        "matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]
                    }
                }
            ),
            ("matchExpressions", 0, "values"),
        ),
        # policy types, wrong types, unknown fields
        ({"policyTypes": ["Ingress", "Sideways"]}, ("policyTypes", 1)),
        ({"policyTypes": ["Ingress", "Egress", "Ingress"]}, ("policyTypes",)),
        ({"ingress": "abc"}, ("spec", "ingress")),
        ({"ingress": [{"from": {"podSelector": {}}}]}, ("ingress", 0, "from")),
        ({"ingres": []}, ("spec", "ingres")),
    ],
)
def test_each_refusal_names_its_field(spec: dict[str, Any], where: tuple[str | int, ...]) -> None:
    found = fields(spec)
    assert len(found) == 1, found
    assert found[0][1][-len(where) :] == where


def test_valid_network_policies_have_no_finding() -> None:
    valid = [
        ingress({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16", "10.2.0.0/16"]}}),
        ingress({"ipBlock": {"cidr": "2001:db8::/32", "except": ["2001:db8:1::/48"]}}),
        ingress({"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "web"}}}),
        ingress(ports=[{"port": "http", "protocol": "SCTP"}, {"port": 80, "endPort": 90}]),
        {"ingress": [{}], "egress": [{}], "policyTypes": ["Ingress", "Egress"]},
        {"podSelector": {}},
    ]
    for spec in valid:
        assert fields(spec) == [], spec


def test_one_finding_per_field_in_one_policy() -> None:
    """Every bad field of one policy is its own finding (not the first one only)."""
    spec = {
        "ingress": [
            {
                "from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["11.0.0.0/8"]}}, {}],
                "ports": [{"protocol": "tcp"}, {"port": 99999}],
            }
        ],
        "policyTypes": ["ingress"],
    }
    assert len(fields(spec)) == 5


def test_lint_reads_network_policies_that_it_passed_before() -> None:
    """The issue's two documents: an allow-all NetworkPolicy (a warning: the world is
    admitted) and one whose ingress is a string (an error naming the field)."""
    allow_all = (
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: all, "
        "namespace: shop}\nspec:\n  podSelector: {}\n  ingress:\n  - {}\n"
    )
    (warned,) = lint_text(allow_all, "a.yaml")
    assert (warned.code, warned.level, warned.field) == ("CPG006", "warning", "spec.ingress[0]")
    broken = allow_all.replace("  ingress:\n  - {}\n", '  ingress: "abc"\n')
    (refused,) = lint_text(broken, "b.yaml")
    assert (refused.code, refused.level, refused.line) == ("CPG047", "error", 6)
    assert refused.field == "spec.ingress" and "the API server refuses it" in refused.message


def test_the_review_commands_name_the_refused_field() -> None:
    """plan, verify and why read policies through policies_in: a NetworkPolicy the API
    server refuses is named by its field, not judged."""
    with pytest.raises(PolicyShapeProblem, match=r"shop/api spec\.ingress\[0\]\.from\[0\]"):
        policies_in(netpol(ingress({})))
    assert policies_in(netpol(ingress({"podSelector": {}})))


def test_ipblock_only_ingress_peers_and_the_release_note() -> None:
    only = netpol(ingress({"ipBlock": {"cidr": "192.0.2.0/24"}}))
    both = netpol(
        {"ingress": [{"from": [{"ipBlock": {"cidr": "192.0.2.0/24"}}, {"podSelector": {}}]}]}
    )
    egress = netpol({"egress": [{"to": [{"ipBlock": {"cidr": "192.0.2.0/24"}}]}]})
    assert ipblock_only_ingress(only) == [("spec", "ingress", 0, "from", 0, "ipBlock")]
    assert ipblock_only_ingress(both) == [("spec", "ingress", 0, "from", 0, "ipBlock")]
    assert ipblock_only_ingress(egress) == []
    assert "shop/api" in ipblock_release_note([only], (1, 19, 3))
    assert ipblock_release_note([only], (1, 20, 0)) == ""
    assert ipblock_release_note([egress], (1, 18, 0)) == ""


def test_yaml_that_two_readers_read_differently() -> None:
    text = (
        "a: y\nb: 'y'\nc: [on, \"off\", N]\nd:\n  e: 1\n  e: 2\nf: 9223372036854775807\n"
        "g: 9223372036854775808\nh: -9223372036854775808\nyes: 1\n---\ni: 1\ni: 2\n"
    )
    found = [(a.document, a.path, a.line, a.kind) for a in yaml_ambiguities(text)]
    assert found == [
        (0, ("a",), 1, "yaml11-boolean-text"),
        (0, ("c", 0), 3, "yaml11-boolean"),
        (0, ("c", 2), 3, "yaml11-boolean-text"),
        (0, ("d", "e"), 6, "duplicate-key"),
        (0, ("g",), 8, "integer-range"),
        (0, ("yes",), 10, "yaml11-boolean"),
        (1, ("i",), 13, "duplicate-key"),
    ]


def test_lint_flags_ambiguities_in_policies_only() -> None:
    """A ConfigMap's ``enabled: on`` is not lint's to judge; a policy's label ``app: y``
    is (kubectl applies another label than the one reviewed)."""
    config = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  a: on\n  a: off\n"
    assert lint_text(config, "c.yaml") == []
    policy = (
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: p, namespace: "
        "shop}\nspec:\n  endpointSelector:\n    matchLabels: {app: y}\n  ingress:\n  - "
        "fromEntities: [cluster]\n    icmps:\n    - fields:\n      - type: 300\n"
    )
    found = {(f.code, f.field) for f in lint_text(config + "---\n" + policy, "p.yaml")}
    assert found == {
        ("CPG049", "spec.endpointSelector.matchLabels.app"),
        ("CPG025", "spec.ingress[0].icmps[0].fields[0].type"),
    }
