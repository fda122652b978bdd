"""The fix for would-break traffic: the label a reviewer would narrow by, and the YAML; and
the node's own traffic under Cilium's allow-localhost."""

from __future__ import annotations

import yaml

from conftest import endpoint, flow_dict
from cpg_core._base.flow import Endpoint
from cpg_core._flows.parse import parse_flow
from cpg_core._policy.agent import AgentSettings
from cpg_core._policy.matcher import LOCALHOST_ADMITS, match_flow
from cpg_core._review.verify import verify_flows
from cpg_core._synthesis.fixes import discriminator, is_marker, narrowed_yaml, rule_yaml


def pod(*labels: str) -> Endpoint:
    return Endpoint(namespace="bookinfo", labels=tuple(labels))


V2 = pod(
    "k8s:app=reviews",
    "k8s:version=v2",
    "k8s:app.kubernetes.io/instance=reviews-b",
    "k8s:sidecar.opentelemetry.io/injected=true",
    "k8s:pod-template-hash=abc",
)
V1 = {"app": "reviews", "version": "v1", "app.kubernetes.io/instance": "reviews-a"}


def test_the_narrowing_label_is_a_discriminator_never_a_marker() -> None:
    assert discriminator([V2], V1, {"app": "reviews"}) == ("version", "v2")
    without_version = {k: v for k, v in V1.items() if k != "version"} | {"version": "v2"}
    assert discriminator([V2], without_version, {"app": "reviews"}) == (
        "app.kubernetes.io/instance",
        "reviews-b",
    )
    only_marker = pod("k8s:app=reviews", "k8s:sidecar.istio.io/inject=true")
    assert discriminator([only_marker], {"app": "reviews"}, {"app": "reviews"}) is None
    assert is_marker("sidecar.opentelemetry.io/injected") and is_marker("helm.sh/chart")
    assert not is_marker("version")


def test_the_fix_yaml_is_a_selector_and_a_rule_cilium_reads() -> None:
    assert yaml.safe_load(narrowed_yaml({"app": "reviews"}, "version", "v2")) == {
        "spec": {"endpointSelector": {"matchLabels": {"app": "reviews", "version": "v2"}}}
    }
    flow = parse_flow(
        flow_dict(endpoint("monitoring", "prometheus"), endpoint("bookinfo", "reviews"), tcp=9090)
    )
    (rule,) = yaml.safe_load(rule_yaml(flow))["ingress"]
    assert rule["toPorts"] == [{"ports": [{"port": "9090", "protocol": "TCP"}]}]
    no_port = parse_flow(flow_dict(tcp=0))
    assert rule_yaml(no_port) == ""


POLICY = {
    "apiVersion": "cilium.io/v2",
    "kind": "CiliumNetworkPolicy",
    "metadata": {"name": "p", "namespace": "shop"},
    "spec": {
        "endpointSelector": {"matchLabels": {"app": "cart"}},
        "ingress": [{"fromEndpoints": [{"matchLabels": {"app": "frontend"}}]}],
    },
}
HOST = {"identity": 1, "labels": ["reserved:host"]}


def test_the_node_reaches_its_pods_under_allow_localhost_always() -> None:
    probe = parse_flow(flow_dict(HOST, endpoint("shop", "cart"), tcp=15020, verdict="FORWARDED"))
    admitted = match_flow([POLICY], probe)
    assert admitted.allowed and admitted.reason == LOCALHOST_ADMITS
    assert not match_flow([POLICY], probe, agent=AgentSettings(allow_localhost=False)).allowed
    remote = parse_flow(
        flow_dict({"identity": 6, "labels": ["reserved:remote-node"]}, endpoint("shop", "cart"))
    )
    assert not match_flow([POLICY], remote).allowed  # another node is policed


def test_verify_judges_a_capture_with_denied_node_traffic_as_allow_localhost_policy() -> None:
    denied_probe = parse_flow(flow_dict(HOST, endpoint("shop", "cart"), tcp=15020))
    (check,) = verify_flows([denied_probe], [POLICY]).checks
    assert not check.allowed  # the agents police the node: the policy must admit it


def test_narrowing_edits_the_spec_that_selects_the_pod_where_it_is_written() -> None:
    """A policy's specs are found with the model, each at its own place in the file (after
    an entry that is not a spec too): only the selecting one is narrowed, the rest of the
    file byte for byte as it was."""
    from cpg_core._synthesis.narrow import narrow_in_text

    text = (
        "apiVersion: cilium.io/v2\n"
        "kind: CiliumClusterwideNetworkPolicy\n"
        "metadata:\n"
        "  name: web\n"
        "specs:\n"
        "- just text\n"
        "- endpointSelector:\n"
        "    matchLabels:\n"
        "      app: db\n"
        "  ingress: [{}]\n"
        "- endpointSelector:\n"
        "    matchLabels:\n"
        "      app: web\n"
        "  ingress: [{}]\n"
    )
    pod = Endpoint(
        namespace="shop",
        labels=("k8s:app=web", "k8s:version=canary", "k8s:io.kubernetes.pod.namespace=shop"),
        pod_name="web-1",
    )
    edited = narrow_in_text(text, "web.yaml", "web", pod, "version", "canary")
    assert edited is not None
    assert edited.startswith(text.split("- endpointSelector:\n    matchLabels:\n      app: web")[0])
    after = edited.split("app: web\n", 1)[1]
    assert "key: version" in after and "NotIn" in after and "canary" in after
    assert "app: db\n  ingress: [{}]\n" in edited
