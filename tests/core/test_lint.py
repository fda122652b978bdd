"""The lint rules (``cpg_core._review.lint``, ``_acceptance``, ``_lint_versions``) on YAML text, as
plain values: where each finding points (line, field, policy) and what it says. What Cilium
refuses is pinned by Cilium's own verdicts in test_cilium_semantics.py; the command (files,
SARIF, exit codes, the cluster) in tests/cli/test_lint_cli.py."""

from __future__ import annotations

from typing import Any

import pytest

from cpg_core._policy.model import read_selector
from cpg_core.lint import RULES, invalid_in_cluster, lint_text, parse_version, selects

HEAD = """apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: web, namespace: shop}
spec:
  endpointSelector: {matchLabels: {app: web}}
"""


def found(text: str, **options: Any) -> list[tuple[str, int, str]]:
    return [(f.code, f.line, f.field) for f in lint_text(text, "p.yaml", **options)]


def test_every_rule_has_a_level_and_a_fix() -> None:
    for code, rule in RULES.items():
        assert code.startswith("CPG") and rule.level in ("error", "warning"), code
        assert rule.fix, code


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "  ingress:\n  - fromEndpoints:\n    - {}\n",
            [("CPG005", 8, "spec.ingress[0].fromEndpoints[0]")],
        ),
        (
            "  egress:\n  - toEntities: [world]\n",
            [("CPG006", 7, "spec.egress[0].toEntities[0]")],
        ),
        (
            "  egress:\n  - toFQDNs: [{matchName: example.com}]\n"
            '    toPorts: [{ports: [{port: "443", protocol: TCP}]}]\n',
            [("CPG010", 7, "spec.egress[0].toFQDNs")],
        ),
        (
            "  ingress:\n  - fromEndpoints: [{matchLabels: {app: a}}]\n"
            '    toPorts: [{ports: [{port: "80", endPort: 70, protocol: TCP}]}]\n',
            [("CPG023", 8, "spec.ingress[0].toPorts[0].ports[0]")],
        ),
        (
            "  ingress:\n  - fromEndpoints: [{matchLabels: {app: a}}]\n"
            "  - fromEndpoints: [{matchLabels: {app: a}}]\n",
            [("CPG011", 8, "spec.ingress[1]")],
        ),
        ("  ingress:\n  - fromEndpoints: [{matchLabels: {app: a}}]\n", []),
    ],
)
def test_warnings_point_at_the_field(body: str, expected: list[tuple[str, int, str]]) -> None:
    assert found(HEAD + body) == expected


def test_an_l4_rule_beside_an_l7_rule_on_the_same_peer_and_port_voids_it() -> None:
    body = (
        "  ingress:\n"
        "  - fromEndpoints: [{matchLabels: {app: a}}]\n"
        '    toPorts: [{ports: [{port: "80", protocol: TCP}], rules: {http: [{method: GET}]}}]\n'
        "  - fromEndpoints: [{matchLabels: {app: a}}]\n"
        '    toPorts: [{ports: [{port: "80", protocol: TCP}]}]\n'
    )
    (finding,) = lint_text(HEAD + body, "p.yaml")
    assert (finding.code, finding.field) == ("CPG008", "spec.ingress[0].toPorts[0]")
    assert "every request is admitted" in finding.message and finding.level == "warning"


def test_an_empty_endpoint_selector_and_a_cidr_inside_the_pod_range() -> None:
    text = HEAD.replace("{matchLabels: {app: web}}", "{}") + (
        "  egress:\n  - toCIDR: [10.244.1.0/24]\n"
    )
    assert found(text, pod_cidrs=["10.244.0.0/16"]) == [
        ("CPG004", 5, "spec.endpointSelector"),
        ("CPG007", 7, "spec.egress[0].toCIDR[0]"),
    ]
    assert found(text) == [("CPG004", 5, "spec.endpointSelector")]  # no pod CIDR given


def test_a_file_that_is_not_yaml_or_uses_anchors_is_one_finding() -> None:
    assert found("a: &x 1\nb: *x\n") == [("CPG001", 1, "")]
    ((code, _, _),) = found("a: [unclosed\n")
    assert code == "CPG001"


def test_documents_that_are_not_policies_are_left_alone_and_lists_are_read() -> None:
    assert found("kind: ConfigMap\nmetadata: {name: x}\n") == []
    listed = (
        "apiVersion: v1\nkind: List\nitems:\n"
        "- apiVersion: cilium.io/v2\n  kind: CiliumNetworkPolicy\n"
        "  metadata: {name: a, namespace: shop}\n"
        '  spec:\n    endpointSelector: {matchLabels: {"app": "x y"}}\n'
    )
    findings = lint_text(listed, "list.yaml")
    assert {(f.code, f.field) for f in findings} == {
        ("CPG015", "items[0].spec"),
        ("CPG003", "items[0].spec.endpointSelector.matchLabels.app"),
    }
    assert {f.policy for f in findings} == {"shop/a"}


def test_a_selector_that_selects_no_pod_today() -> None:
    body = "  ingress:\n  - fromEndpoints: [{matchLabels: {app: a}}]\n"
    assert found(HEAD + body, pods={"shop": [{"app": "db"}]}) == [
        ("CPG012", 5, "spec.endpointSelector")
    ]
    assert found(HEAD + body, pods={"shop": [{"app": "web", "version": "v1"}]}) == []
    assert selects(read_selector({"matchLabels": {"app": "web"}}), {"app": "web", "version": "v1"})
    assert not selects(
        read_selector(
            {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}
        ),
        {"app": "web"},
    )


def test_what_a_cilium_release_lacks_or_deprecates() -> None:
    mesh = "  ingress:\n  - fromEntities: [cluster-mesh]\n"
    assert found(HEAD + mesh, cilium_version=parse_version("1.19")) == [
        ("CPG031", 7, "spec.ingress[0].fromEntities[0]")
    ]
    assert found(HEAD + mesh, cilium_version=parse_version("1.20")) == []
    wildcard = (
        "  egress:\n  - toFQDNs: [{matchPattern: '**.example.com'}]\n"
        '    toPorts: [{ports: [{port: "53", protocol: UDP}], rules: {dns: [{matchPattern: "*"}]}}]\n'
    )
    codes = [code for code, _, _ in found(HEAD + wildcard, cilium_version=parse_version("1.18"))]
    assert codes == ["CPG031"]
    assert parse_version("1.14") is None  # not a release cpg lint knows


def test_a_selector_without_a_cluster_beside_one_with_a_cluster_before_1_19() -> None:
    body = (
        "  ingress:\n"
        "  - fromEndpoints:\n"
        "    - {matchLabels: {app: a, io.cilium.k8s.policy.cluster: west}}\n"
        "    - {matchLabels: {app: b}}\n"
    )
    assert found(HEAD + body, cilium_version=parse_version("1.18")) == [
        ("CPG033", 9, "spec.ingress[0].fromEndpoints[1]")
    ]
    assert found(HEAD + body, cilium_version=parse_version("1.19")) == []


def test_the_clusters_own_verdict_on_a_policy_is_an_error() -> None:
    marked = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "x", "namespace": "shop"},
        "status": {"conditions": [{"type": "Valid", "status": "False", "message": "bad regex"}]},
    }
    (finding,) = invalid_in_cluster([marked])
    assert finding.code == "CPG034" and finding.policy == "shop/x"
    assert "bad regex" in finding.message
    valid = {**marked, "status": {"conditions": [{"type": "Valid", "status": "True"}]}}
    assert invalid_in_cluster([valid]) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # a leading zero: Cilium enforces octal 64
            HEAD + "  ingress:\n  - fromEndpoints: [{matchLabels: {app: a}}]\n"
            '    toPorts: [{ports: [{port: "0100", protocol: TCP}]}]\n',
            [("CPG027", 8, "spec.ingress[0].toPorts[0].ports[0]")],
        ),
        (  # hex reads as a number first, not as a named port
            HEAD + "  ingress:\n  - fromEndpoints: [{matchLabels: {app: a}}]\n"
            '    toPorts: [{ports: [{port: "0x50", protocol: TCP}]}]\n',
            [("CPG027", 8, "spec.ingress[0].toPorts[0].ports[0]")],
        ),
        (  # plain decimal and a named port: nothing to say
            HEAD + "  ingress:\n  - fromEndpoints: [{matchLabels: {app: a}}]\n"
            '    toPorts: [{ports: [{port: "100", protocol: TCP}, {port: "http"}]}]\n',
            [],
        ),
        (  # a namespaced policy whose subject is in another namespace selects nothing
            HEAD.replace("{app: web}", "{app: web, k8s:io.kubernetes.pod.namespace: other}")
            + "  ingress:\n  - fromEndpoints: [{matchLabels: {app: a}}]\n",
            [("CPG028", 5, "spec.endpointSelector")],
        ),
        (  # its own namespace named again: fine
            HEAD.replace("{app: web}", "{app: web, io.kubernetes.pod.namespace: shop}")
            + "  ingress:\n  - fromEndpoints: [{matchLabels: {app: a}}]\n",
            [],
        ),
        (  # an In term without the policy's namespace
            HEAD.replace(
                "{matchLabels: {app: web}}",
                "{matchExpressions: [{key: io.kubernetes.pod.namespace, operator: In, "
                "values: [a, b]}]}",
            )
            + "  ingress:\n  - fromEndpoints: [{matchLabels: {app: a}}]\n",
            [("CPG028", 5, "spec.endpointSelector")],
        ),
        (  # nodeSelector in a namespaced policy: Cilium's Parse refuses it
            HEAD.replace("endpointSelector", "nodeSelector")
            + "  ingress:\n  - fromEntities: [cluster]\n",
            [("CPG029", 5, "spec.nodeSelector")],
        ),
        (  # the same host policy, clusterwide: accepted
            HEAD.replace("endpointSelector", "nodeSelector")
            .replace("CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy")
            .replace(", namespace: shop", "")
            + "  ingress:\n  - fromEntities: [cluster]\n",
            [],
        ),
    ],
)
def test_documents_cilium_accepts_or_refuses_against_their_look(
    text: str, expected: list[tuple[str, int, str]]
) -> None:
    """What the second set of Cilium's verdicts showed: a port Cilium reads in another base
    (accepted, warned), a subject selector naming another namespace (accepted, selects
    nothing: warned), nodeSelector in a namespaced policy (refused: an error)."""
    assert found(text) == expected


def test_a_refusal_names_the_entry_where_it_is_written() -> None:
    """Cilium's refusals are read off the policy model, which keeps every entry's place: a
    port entry after one that is not a mapping is named at its own index, an ICMP type and
    an HTTP pattern at theirs, in either spec."""
    from cpg_core._policy.acceptance import refusals

    rule = {
        "toPorts": [
            {
                "ports": ["odd", {"port": "5", "protocol": "VRRP"}],
                "rules": {"http": ["odd", {"path": "(?=x)"}]},
            }
        ]
    }
    icmp_rule = {"icmps": [{"fields": ["odd", {"type": 300}]}]}
    policy = {
        "kind": "CiliumNetworkPolicy",
        "spec": {"endpointSelector": {}, "egress": [rule]},
        "specs": ["odd", {"endpointSelector": {}, "ingress": [icmp_rule]}],
    }
    found = {(code, path) for code, _, path in refusals(policy)}
    assert ("CPG020", ("spec", "egress", 0, "toPorts", 0, "ports", 1)) in found
    assert ("CPG022", ("spec", "egress", 0, "toPorts", 0, "rules", "http", 1, "path")) in found
    assert ("CPG025", ("specs", 1, "ingress", 0, "icmps", 0, "fields", 1, "type")) in found
