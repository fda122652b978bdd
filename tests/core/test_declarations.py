"""What the cluster's objects declare (cpg_core.flows.declarations): each dependency exactly
as the objects name it, and a note (never an exception) for what they leave unresolved."""

from __future__ import annotations

from typing import Any

import pytest

from cpg_core._base.rules import CidrPeer, EndpointPeer, EntityPeer
from cpg_core.declarations import Declarations, declarations
from declared_objects import (
    KUBE_DNS_IP,
    NODE_LOCAL_IP,
    all_objects,
    deployment,
    istio_prometheus,
    istio_webhook,
    kube_prometheus,
    node_local_dns,
    service,
    shop_apis,
)

pytestmark = pytest.mark.unit


def _ends(found: Declarations) -> set[tuple[str, str, str, int, str]]:
    """Each dependency as (source, destination, protocol, port, declaring object)."""

    def end(party: Any) -> str:
        return party.entity if isinstance(party, EntityPeer) else party.text()

    return {
        (end(d.source), end(d.destination), d.protocol, d.port, d.declared_by.ref)
        for d in found.dependencies
    }


def test_every_kind_of_declaration_is_read_exactly() -> None:
    found = declarations([{"kind": "List", "items": all_objects()}], "objects.yaml")
    assert _ends(found) == {
        # the Service's port 443 is the named target port https-validation: 9443
        (
            "kube-apiserver",
            "istio-system/istio=galley",
            "TCP",
            9443,
            "ValidatingWebhookConfiguration istio-galley",
        ),
        (
            "kube-apiserver",
            "shop/app=metrics-api",
            "TCP",
            4443,
            "APIService v1beta1.metrics.shop.example.com",
        ),
        (
            "kube-apiserver",
            "shop/app=widget-operator",
            "TCP",
            9443,
            "CustomResourceDefinition widgets.shop.example.com",
        ),
        ("monitoring/prometheus=k8s", "shop/app=api", "TCP", 9102, "ServiceMonitor shop/shop-api"),
        (
            "monitoring/prometheus=k8s",
            "shop/app=worker",
            "TCP",
            9100,
            "PodMonitor shop/shop-worker",
        ),
        ("monitoring/prometheus=k8s", "kube-apiserver", "TCP", 6443, "Prometheus monitoring/k8s"),
        (
            "istio-system/app=prometheus",
            "bookinfo/app=reviews",
            "TCP",
            15090,
            "Deployment bookinfo/reviews-v1",
        ),
        (
            "istio-system/app=prometheus",
            "kube-apiserver",
            "TCP",
            6443,
            "Deployment istio-system/prometheus",
        ),
    }
    assert found.notes == ()
    assert found.objects["ValidatingWebhookConfiguration"] == 1
    (cache,) = found.dns_caches
    # the listen address, not the kube-dns Service address it also binds
    assert cache.peers() == (
        EndpointPeer("kube-system", (("k8s-app", "node-local-dns"),)),
        CidrPeer(f"{NODE_LOCAL_IP}/32"),
    )
    assert cache.declared_by.ref == "DaemonSet kube-system/node-local-dns"


def test_a_named_target_port_resolves_through_endpoint_slices_without_pods() -> None:
    objects = [o for o in istio_webhook() if o["kind"] != "Deployment"]
    objects.append(
        {
            "kind": "EndpointSlice",
            "metadata": {
                "name": "istio-galley-abc",
                "namespace": "istio-system",
                "labels": {"kubernetes.io/service-name": "istio-galley"},
            },
            "ports": [{"name": "https-validation", "port": 9443, "protocol": "TCP"}],
        }
    )
    assert {d.port for d in declarations(objects).dependencies} == {9443}
    unresolved = declarations([o for o in istio_webhook() if o["kind"] != "Deployment"])
    assert unresolved.dependencies == ()
    assert "is a name no pod, workload or EndpointSlice given resolves" in unresolved.notes[0]


def test_what_cannot_be_resolved_is_a_note_naming_the_object() -> None:
    hook = istio_webhook()[-1]
    alone = declarations([hook])
    assert alone.dependencies == ()
    assert alone.notes == (
        "ValidatingWebhookConfiguration istio-galley (admission webhook "
        "pilot.validation.istio.io, Service istio-system/istio-galley port 443): Service "
        "istio-system/istio-galley is not among the objects given (give it, with its pods "
        "or workloads); left out",
    )
    monitor = [o for o in kube_prometheus() if o["kind"] == "ServiceMonitor"]
    assert "no Prometheus given selects it" in declarations(monitor).notes[0]
    headless = service("ext", "shop", None, [("https", 443, 443)])
    api = shop_apis()[2]
    api["spec"]["service"]["name"] = "ext"
    assert "selects no pods" in declarations([headless, api]).notes[0]


def test_monitors_follow_the_prometheus_selectors() -> None:
    objects = kube_prometheus()
    for obj in objects:
        if obj["kind"] == "Namespace" and obj["metadata"]["name"] == "shop":
            obj["metadata"]["labels"] = {}  # no longer selected by the namespace selector
    found = _ends(declarations(objects))
    assert not any(d[4] == "ServiceMonitor shop/shop-api" for d in found)
    assert any(d[4] == "PodMonitor shop/shop-worker" for d in found)  # {}: every namespace
    for obj in objects:
        if obj["kind"] == "Prometheus":
            del obj["spec"]["podMonitorSelector"]  # the operator: none selected
    assert not any(d[4] == "PodMonitor shop/shop-worker" for d in _ends(declarations(objects)))


def test_the_api_server_port_is_assumed_only_when_no_object_says() -> None:
    objects = [o for o in kube_prometheus() if o["metadata"]["name"] != "kubernetes"]
    found = declarations(objects)
    ports = {d.port for d in found.dependencies if d.destination == EntityPeer("kube-apiserver")}
    assert ports == {443, 6443}
    assert any("Prometheus' discovery kept open on 443 and 6443" in n for n in found.notes)


def test_annotations_are_scraped_on_the_annotated_port_else_each_container_port() -> None:
    objects = istio_prometheus()
    objects[1]["spec"]["template"]["metadata"]["annotations"].pop("prometheus.io/port")
    scraped = [
        d
        for d in declarations(objects).dependencies
        if d.destination != EntityPeer("kube-apiserver")
    ]
    assert {d.port for d in scraped} == {9080, 15090}
    objects[1]["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scrape"] = "false"
    assert all(
        d.destination == EntityPeer("kube-apiserver") for d in declarations(objects).dependencies
    )


def test_a_host_network_dns_cache_is_the_node_and_its_corefile_binds_count() -> None:
    cache = deployment(
        "node-local-dns",
        "kube-system",
        {"k8s-app": "node-local-dns"},
        [("dns", 53)],
        kind="DaemonSet",
        host_network=True,
    )
    corefile = {
        "kind": "ConfigMap",
        "metadata": {"name": "node-local-dns", "namespace": "kube-system"},
        "data": {"Corefile": f"cluster.local:53 {{\n    bind {NODE_LOCAL_IP} {KUBE_DNS_IP}\n}}\n"},
    }
    dns = service(
        "kube-dns",
        "kube-system",
        {"k8s-app": "kube-dns"},
        [("dns", 53, 53)],
        cluster_ip=KUBE_DNS_IP,
    )
    (found,) = declarations([cache, corefile, dns]).dns_caches
    assert found.peers() == (EntityPeer("host"), CidrPeer(f"{NODE_LOCAL_IP}/32"))
    assert declarations(node_local_dns()).dns_caches[0].addresses == (NODE_LOCAL_IP,)


@pytest.mark.parametrize(
    "hostile",
    [
        {
            "kind": "Service",
            "metadata": {"name": "x", "namespace": "shop"},
            "spec": {"selector": "app=x"},
        },
        {
            "kind": "Service",
            "metadata": {"name": "x", "namespace": "shop"},
            "spec": {"ports": [{"port": "http"}]},
        },
        {"kind": "Service", "metadata": {"name": "x", "namespace": "Not A Namespace"}},
        {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "x"}, "webhooks": "all"},
        {
            "kind": "Deployment",
            "metadata": {"name": "x", "namespace": "shop"},
            "spec": {
                "template": {"metadata": {"labels": {"app": "a b"}}, "spec": {"containers": []}}
            },
        },
        {
            "kind": "Prometheus",
            "metadata": {"name": "k8s", "namespace": "monitoring"},
            "spec": {
                "serviceMonitorSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}
            },
        },
    ],
)
def test_an_odd_object_is_one_note_and_the_rest_is_still_read(hostile: dict[str, Any]) -> None:
    found = declarations([hostile, *istio_webhook(), 42, "text", None, [[{"no": "kind"}]]])
    assert any(d.port == 9443 for d in found.dependencies)
    assert len(found.notes) == 1
    assert found.notes[0].startswith(hostile["kind"])


def test_objects_that_declare_nothing_are_left_alone() -> None:
    found = declarations(
        [{"kind": "CiliumNetworkPolicy", "metadata": {"name": "x"}}, {"kind": "Secret"}]
    )
    assert found.empty and found.objects == {} and found.notes == ()
