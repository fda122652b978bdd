"""A cluster's own objects, written by the project for its tests: what it declares it depends
on (an Istio-like validating webhook behind a Service whose port is not its target port, a
metrics-server-like APIService, a CRD with a conversion webhook, a kube-prometheus-like
Prometheus with a ServiceMonitor and a PodMonitor, an Istio-like Prometheus that scrapes by
annotation, a node-local DNS DaemonSet) and the pods behind each, labelled as the public
hubble-otel captures label them where both hold the workload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

NODE_LOCAL_IP = "169.254.20.10"
KUBE_DNS_IP = "10.96.0.10"


def _meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return meta


def deployment(
    name: str,
    namespace: str,
    labels: dict[str, str],
    ports: list[tuple[str, int]] = (),  # type: ignore[assignment]
    *,
    kind: str = "Deployment",
    annotations: dict[str, str] | None = None,
    args: list[str] | None = None,
    host_network: bool = False,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "image": f"example/{name}:1",
        "ports": [{"name": n, "containerPort": p} for n, p in ports],
    }
    if args:
        container["args"] = args
    template_meta: dict[str, Any] = {"labels": labels}
    if annotations:
        template_meta["annotations"] = annotations
    spec: dict[str, Any] = {"containers": [container]}
    if host_network:
        spec["hostNetwork"] = True
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": _meta(name, namespace),
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": template_meta, "spec": spec},
        },
    }


def service(
    name: str,
    namespace: str,
    selector: dict[str, str] | None,
    ports: list[tuple[str, int, int | str]],
    *,
    labels: dict[str, str] | None = None,
    cluster_ip: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "ports": [{"name": n, "port": p, "targetPort": t, "protocol": "TCP"} for n, p, t in ports]
    }
    if selector is not None:
        spec["selector"] = selector
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, namespace, **(labels or {})),
        "spec": spec,
    }


def istio_webhook() -> list[dict[str, Any]]:
    """Istio's galley: a validating webhook behind Service port 443, whose target port is
    the container port named https-validation (9443)."""
    galley = {"app": "galley", "istio": "galley", "release": "istio"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": _meta("istio-system", None, **{"istio-injection": "disabled"}),
        },
        deployment(
            "istio-galley",
            "istio-system",
            galley,
            [("https-validation", 9443), ("http-monitoring", 15014), ("grpc-mcp", 9901)],
        ),
        service(
            "istio-galley",
            "istio-system",
            {"istio": "galley"},
            [("https-validation", 443, "https-validation"), ("grpc-mcp", 9901, 9901)],
        ),
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": _meta("istio-galley"),
            "webhooks": [
                {
                    "name": "pilot.validation.istio.io",
                    "clientConfig": {
                        "service": {
                            "name": "istio-galley",
                            "namespace": "istio-system",
                            "path": "/admitpilot",
                        }
                    },
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                }
            ],
        },
    ]


def shop_apis() -> list[dict[str, Any]]:
    """A metrics-server-like APIService (Service 443 → named port https, 4443) and a CRD
    whose conversion webhook is Service 8443 → 9443, both served from namespace shop."""
    return [
        deployment("metrics-api", "shop", {"app": "metrics-api"}, [("https", 4443)]),
        service("metrics-api", "shop", {"app": "metrics-api"}, [("https", 443, "https")]),
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": _meta("v1beta1.metrics.shop.example.com"),
            "spec": {
                "group": "metrics.shop.example.com",
                "version": "v1beta1",
                "service": {"name": "metrics-api", "namespace": "shop"},
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
        deployment("widget-operator", "shop", {"app": "widget-operator"}, [("webhook", 9443)]),
        service("widget-webhook", "shop", {"app": "widget-operator"}, [("webhook", 8443, 9443)]),
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": _meta("widgets.shop.example.com"),
            "spec": {
                "group": "shop.example.com",
                "names": {"kind": "Widget", "plural": "widgets"},
                "scope": "Namespaced",
                "conversion": {
                    "strategy": "Webhook",
                    "webhook": {
                        "conversionReviewVersions": ["v1"],
                        "clientConfig": {
                            "service": {
                                "name": "widget-webhook",
                                "namespace": "shop",
                                "port": 8443,
                                "path": "/convert",
                            }
                        },
                    },
                },
                "versions": [],
            },
        },
    ]


def kube_prometheus() -> list[dict[str, Any]]:
    """A Prometheus of the operator (pods labelled prometheus=k8s), a ServiceMonitor of
    shop/api's metrics port (Service 8080 named metrics → 9102) and a PodMonitor of
    shop/worker's container port named metrics (9100); the API server at 6443."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": _meta("monitoring", None, team="observability"),
        },
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": _meta("shop", None, monitored="yes"),
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "Prometheus",
            "metadata": _meta("k8s", "monitoring"),
            "spec": {
                "serviceMonitorSelector": {},
                "serviceMonitorNamespaceSelector": {"matchLabels": {"monitored": "yes"}},
                "podMonitorSelector": {"matchLabels": {"team": "shop"}},
                "podMonitorNamespaceSelector": {},
            },
        },
        deployment(
            "prometheus-k8s",
            "monitoring",
            {"app.kubernetes.io/name": "prometheus", "prometheus": "k8s"},
            [("web", 9090)],
            kind="StatefulSet",
        ),
        deployment("api", "shop", {"app": "api"}, [("http", 8080), ("metrics", 9102)]),
        service(
            "api",
            "shop",
            {"app": "api"},
            [("http", 80, "http"), ("metrics", 8080, 9102)],
            labels={"app": "api"},
        ),
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": _meta("shop-api", "shop"),
            "spec": {
                "selector": {"matchLabels": {"app": "api"}},
                "endpoints": [{"port": "metrics"}],
            },
        },
        deployment("worker", "shop", {"app": "worker"}, [("metrics", 9100)]),
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PodMonitor",
            "metadata": _meta("shop-worker", "shop", team="shop"),
            "spec": {
                "selector": {"matchLabels": {"app": "worker"}},
                "podMetricsEndpoints": [{"port": "metrics"}],
            },
        },
        service("kubernetes", "default", None, [("https", 443, 6443)], cluster_ip="10.96.0.1"),
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": _meta(
                "kubernetes", "default", **{"kubernetes.io/service-name": "kubernetes"}
            ),
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["172.18.0.2"]}],
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
        },
    ]


def istio_prometheus() -> list[dict[str, Any]]:
    """Istio's own Prometheus (no operator: it scrapes by annotation) and bookinfo's
    reviews, annotated to be scraped on 15090."""
    return [
        deployment(
            "prometheus",
            "istio-system",
            {"app": "prometheus", "release": "istio"},
            [("http-prometheus", 9090)],
        ),
        deployment(
            "reviews-v1",
            "bookinfo",
            {"app": "reviews", "version": "v1"},
            [("http", 9080), ("http-envoy-prom", 15090)],
            annotations={"prometheus.io/scrape": "true", "prometheus.io/port": "15090"},
        ),
    ]


def node_local_dns() -> list[dict[str, Any]]:
    """NodeLocal DNSCache as Cilium runs it (pods, reached through a Local Redirect Policy),
    listening on 169.254.20.10 and the kube-dns Service address."""
    return [
        deployment(
            "node-local-dns",
            "kube-system",
            {"k8s-app": "node-local-dns"},
            [("dns", 53), ("metrics", 9253)],
            kind="DaemonSet",
            args=["-localip", f"{NODE_LOCAL_IP},{KUBE_DNS_IP}", "-conf", "/etc/Corefile"],
        ),
        service(
            "kube-dns",
            "kube-system",
            {"k8s-app": "kube-dns"},
            [("dns", 53, 53)],
            cluster_ip=KUBE_DNS_IP,
        ),
    ]


def all_objects() -> list[dict[str, Any]]:
    return [
        *istio_webhook(),
        *shop_apis(),
        *kube_prometheus(),
        *istio_prometheus(),
        *node_local_dns(),
    ]


def write_objects(folder: Path, objects: list[dict[str, Any]] | None = None) -> Path:
    """The objects as ``kubectl get … -o yaml`` prints them: one List document."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cluster-objects.yaml"
    document = {"apiVersion": "v1", "kind": "List", "items": objects or all_objects()}
    path.write_text(yaml.dump(document, Dumper=_NoAliases, sort_keys=False))
    return path


class _NoAliases(yaml.SafeDumper):
    """kubectl never writes anchors (and cpg refuses them): each object in full."""

    def ignore_aliases(self, data: Any) -> bool:
        return True
