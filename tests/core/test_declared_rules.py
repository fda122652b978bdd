"""What the cluster declares keeps working (§D58): a policy that polices one end of a
declared dependency keeps it open, exactly (the peer and port the object names), says so
in its comment and evidence; no policy gains a direction for it; platform workloads the
catalogue recognises are left alone."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from conftest import endpoint, flow_dict
from cpg_core import CaptureRequest, generate, to_data
from cpg_core._base.flow import Endpoint, Flow
from cpg_core._policy.matcher import match_flow
from cpg_core._policy.policy_set import PolicySet
from cpg_core._synthesis.merge import merge_policy_text, render_or_merge
from cpg_core.declarations import declarations
from declared_objects import all_objects, node_local_dns

pytestmark = pytest.mark.unit

DECLARED = declarations(all_objects())


def _lines(*flows: dict[str, Any]) -> list[str]:
    return [json.dumps(f) for f in flows]


def _pod(ns: str, **labels: str) -> dict[str, Any]:
    found = [f"k8s:{k}={v}" for k, v in labels.items()]
    return {"namespace": ns, "labels": [*found, f"k8s:io.kubernetes.pod.namespace={ns}"]}


GALLEY = _pod("istio-system", app="galley", istio="galley")
TELEMETRY = _pod("istio-system", app="telemetry")
METRICS_API = _pod("shop", app="metrics-api")
WIDGETS = _pod("shop", app="widget-operator")
FRONTEND = _pod("shop", app="frontend")


def _flows() -> list[str]:
    """Drops that police galley's and the shop servers' ingress, and frontend's egress."""
    return _lines(
        flow_dict(TELEMETRY, GALLEY, tcp=9901),
        flow_dict(FRONTEND, METRICS_API, tcp=8080),
        flow_dict(FRONTEND, WIDGETS, tcp=8080),
        flow_dict(FRONTEND, endpoint("shop", "cart"), tcp=8080, direction="EGRESS"),
    )


def _documents(result: Any) -> dict[str, dict[str, Any]]:
    return {name: yaml.safe_load(text) for name, text in result.policies.items()}


def _judge(docs: dict[str, dict[str, Any]], src: Endpoint, dst: Endpoint, port: int) -> bool:
    """Whether the policies admit ``src`` → ``dst`` on TCP ``port`` at the destination."""
    flow = Flow(direction=1, source=src, destination=dst, protocol="TCP", port=port)
    return match_flow(PolicySet.of(list(docs.values())), flow).allowed


def _endpoint(raw: dict[str, Any], identity: int = 0) -> Endpoint:
    return Endpoint(
        namespace=raw.get("namespace", ""), labels=tuple(raw["labels"]), identity=identity
    )


API_SERVER = Endpoint(labels=("reserved:kube-apiserver",), identity=7)
HOST = Endpoint(labels=("reserved:host",), identity=1)


def test_declared_dependencies_stay_open_exactly() -> None:
    request = CaptureRequest.build(catalogue=["none"])
    with_objects = generate(_flows(), request, declarations=DECLARED)
    without = generate(_flows(), request)
    docs, bare = _documents(with_objects), _documents(without)
    for pod, port in ((GALLEY, 9443), (METRICS_API, 4443), (WIDGETS, 9443)):
        target = _endpoint(pod)
        assert _judge(docs, API_SERVER, target, port), (pod, port)
        assert not _judge(bare, API_SERVER, target, port)  # without: denied (the cut)
        # the neighbours stay denied: the Service port, another port, another peer
        assert not _judge(docs, API_SERVER, target, 443)
        assert not _judge(docs, API_SERVER, target, port + 1)
        assert not _judge(docs, _endpoint(FRONTEND), target, port)
    galley = with_objects.policies["istio-system/galley"]
    assert (
        "# TCP/9443 from entity kube-apiserver; declared by ValidatingWebhookConfiguration "
        "istio-galley (TCP/9443)"
    ) in galley
    evidence = to_data(with_objects.evidence["istio-system/galley"])
    (rule,) = [r for r in evidence["rules"] if r["peer"].get("entity") == "kube-apiserver"]
    assert rule["flow_count"] == 0 and rule["classes"] == {"declared": 0}
    assert rule["declared_by"] == [
        {
            "kind": "ValidatingWebhookConfiguration",
            "namespace": "",
            "name": "istio-galley",
            "what": "admission webhook pilot.validation.istio.io, Service "
            "istio-system/istio-galley port 443",
        }
    ]


def test_a_declaration_never_gives_a_policy_a_direction() -> None:
    """frontend's egress is policed, its ingress is not: nothing declared reaches it, and
    the widget operator's egress (no policy) gets no section either."""
    result = generate(_flows(), CaptureRequest.build(catalogue=["none"]), declarations=DECLARED)
    docs = _documents(result)
    assert "ingress" not in docs["shop/frontend"]["spec"]
    assert "egress" not in docs["shop/widget-operator"]["spec"]
    assert "egress" not in docs["istio-system/galley"]["spec"]


def test_every_dns_rule_admits_the_node_local_cache() -> None:
    declared = declarations(node_local_dns())
    result = generate(_flows(), CaptureRequest.build(catalogue=["none"]), declarations=declared)
    egress = _documents(result)["shop/frontend"]["spec"]["egress"]
    assert {
        "toEndpoints": [
            {
                "matchLabels": {
                    "io.kubernetes.pod.namespace": "kube-system",
                    "k8s-app": "node-local-dns",
                }
            }
        ],
        "toPorts": [
            {"ports": [{"port": "53", "protocol": "TCP"}, {"port": "53", "protocol": "UDP"}]}
        ],
    } in egress
    assert {
        "toCIDR": ["169.254.20.10/32"],
        "toPorts": [
            {"ports": [{"port": "53", "protocol": "TCP"}, {"port": "53", "protocol": "UDP"}]}
        ],
    } in egress
    with_l7 = generate(
        _flows(), CaptureRequest.build(catalogue=["none"], l7=True), declarations=declared
    )
    text = with_l7.policies["shop/frontend"]
    assert "DNS UDP/53, TCP/53 for any name to 169.254.20.10/32; declared by DaemonSet" in text


def test_the_cache_the_capture_shows_joins_the_dns_rules() -> None:
    """No declarations: a node-local-dns pod seen forwarding to kube-dns is a DNS cache."""
    cache = _pod("kube-system", **{"k8s-app": "node-local-dns"})
    dns = _pod("kube-system", **{"k8s-app": "kube-dns"})
    lines = _flows() + _lines(flow_dict(cache, dns, udp=53, direction="EGRESS"))
    egress = _documents(generate(lines, CaptureRequest.build(catalogue=["none"])))["shop/frontend"]
    peers = [r.get("toEndpoints") for r in egress["spec"]["egress"]]
    assert [
        {"matchLabels": {"io.kubernetes.pod.namespace": "kube-system", "k8s-app": "node-local-dns"}}
    ] in peers


def test_a_merge_keeps_the_declared_words_and_reads_the_rule_as_cpgs() -> None:
    result = generate(_flows(), CaptureRequest.build(catalogue=["none"]), declarations=DECLARED)
    plan = next(p for p in result.plans if p.workload == "galley")
    text = result.policies["istio-system/galley"]
    again = render_or_merge(
        text,
        name=plan.name,
        namespace=plan.namespace,
        selector=plan.target.selector,
        rules=plan.rules,
    )
    assert again == text
    # a later run without declarations, with a new port from the kube-apiserver: one rule
    more = generate(
        _lines(
            flow_dict({"labels": ["reserved:kube-apiserver"], "identity": 7}, GALLEY, tcp=15014)
        ),
        CaptureRequest.build(catalogue=["none"]),
    )
    later = next(p for p in more.plans if p.workload == "galley")
    merged = merge_policy_text(
        text,
        name=plan.name,
        namespace=plan.namespace,
        selector=plan.target.selector,
        rules=later.rules,
    )
    assert (
        "# TCP/9443, TCP/15014 from entity kube-apiserver; declared by "
        "ValidatingWebhookConfiguration istio-galley (TCP/9443)"
    ) in merged
    assert merged.count("fromEntities") == 1


def test_the_catalogue_leaves_platform_workloads_alone_and_says_so() -> None:
    """Learned from traffic that works, galley's rules would police it for the first time:
    left out, and said. Its drops (it is policed already) still get their rules."""
    learned = _lines(flow_dict(TELEMETRY, GALLEY, tcp=9901, verdict="FORWARDED", reason=None))
    result = generate(learned, CaptureRequest.build(learn="forwarded"))
    assert "istio-system/galley" not in result.policies
    findings = {f.subject: f.kind for f in result.health.findings}
    assert findings["istio-system/galley (Istio): 1 rule(s)"] == "platform_workload"
    off = generate(learned, CaptureRequest.build(learn="forwarded", catalogue=["none"]))
    assert "istio-system/galley" in off.policies
    exact = generate(
        learned, CaptureRequest.build(learn="forwarded", exact_peers=["istio-system/galley"])
    )
    assert "istio-system/galley" in exact.policies
    dropped = generate(_flows(), CaptureRequest.build())
    assert "istio-system/galley" in dropped.policies
