"""Platform workloads recognised by their labels (ARCHITECTURE §D58).

Without the cluster's objects, a capture still says which pods are the cluster's own
machinery: a service mesh's control plane (the API server calls its webhooks, every sidecar
its discovery), Prometheus and the collectors (they reach whatever is deployed next), the
ingress controllers (whatever backend is added next), certificate and policy webhooks. Such
a workload policed peer by peer, as an application is, breaks on the first new workload or
on a call the capture did not hold. The catalogue names them by their labels (or their
namespace) and says what to do with each:

- ``system`` — as a system namespace's workload: no per-peer rules (at most the ports the
  whole cluster uses), reported;
- ``cluster-client`` — each port it reaches is reached on the whole cluster;
- ``cluster-service`` — each port it is reached on admits the whole cluster.

:data:`BUILTIN` is shipped and documented; a user adds entries (or starts from none) with a
file of their own, read by :func:`catalogue_from`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from cpg_core._base.errors import CpgError
from cpg_core._base.labels import LabelItems, label_problem, namespace_problem

Treatment = Literal["system", "cluster-client", "cluster-service"]
TREATMENTS: tuple[Treatment, ...] = ("system", "cluster-client", "cluster-service")
ANY_VALUE = "*"
"""A label value that matches every value (the key must be there)."""


class CatalogueError(CpgError):
    """A catalogue file cpg cannot read; the message names the entry and the field."""


@attrs.frozen(slots=True)
class PlatformWorkload:
    """One entry: the pods it recognises (every label, ``*`` for any value; and, when
    given, one of the namespaces) and what is done with them."""

    name: str
    why: str
    labels: LabelItems = ()
    namespaces: tuple[str, ...] = ()
    treatment: Treatment = "system"

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.namespaces and namespace not in self.namespaces:
            return False
        for key, value in self.labels:
            found = labels.get(key)
            if found is None or (value != ANY_VALUE and found != value):
                return False
        return True

    def text(self) -> str:
        """How it was recognised: ``app=istiod`` or ``namespace istio-system``."""
        parts = [f"{k}={v}" for k, v in self.labels]
        if self.namespaces:
            parts.append("namespace " + " or ".join(self.namespaces))
        return ", ".join(parts)


@attrs.frozen(slots=True)
class Catalogue:
    entries: tuple[PlatformWorkload, ...] = ()

    def recognise(
        self, namespace: str, label_sets: Iterable[Mapping[str, str]]
    ) -> PlatformWorkload | None:
        """The first entry that recognises pods of ``namespace`` with one of the label sets."""
        sets = list(label_sets)
        for entry in self.entries:
            if any(entry.matches(namespace, labels) for labels in sets):
                return entry
        return None

    @property
    def widens(self) -> bool:
        """Whether an entry writes ports for the whole cluster (not only leaves rules out)."""
        return any(entry.treatment != "system" for entry in self.entries)

    def joined(self, other: Catalogue) -> Catalogue:
        return Catalogue((*self.entries, *other.entries))


def _entry(
    name: str,
    why: str,
    *labels: str,
    namespaces: Sequence[str] = (),
    treatment: Treatment = "system",
) -> PlatformWorkload:
    pairs = tuple(tuple(label.split("=", 1)) for label in labels)
    return PlatformWorkload(name, why, pairs, tuple(namespaces), treatment)  # type: ignore[arg-type]


_MESH = (
    "a service mesh's control plane: the API server calls its webhooks, every sidecar its discovery"
)
_SCRAPER = "a metrics scraper: it reaches the API server and every workload deployed next"
_COLLECTOR = "a telemetry collector: every workload sends to it, and it reaches what it is told to"
_INGRESS = "an ingress controller: it reaches whatever backend is added next"
_WEBHOOK = "an admission or conversion webhook: the API server calls it"
_AGGREGATED = "an aggregated API: the API server calls it"

BUILTIN = Catalogue(
    (
        _entry("Istio", _MESH, namespaces=("istio-system",)),
        _entry("Istio", _MESH, "app=istiod"),
        _entry("Istio", _MESH, "istio=pilot"),
        _entry("Istio", _MESH, "istio=galley"),
        _entry("Istio", _MESH, "istio=sidecar-injector"),
        _entry("Istio", _MESH, "istio=citadel"),
        _entry("Istio", _MESH, "istio=mixer"),
        _entry("Istio gateway", _INGRESS, "istio=ingressgateway"),
        _entry("Istio gateway", _INGRESS, "istio=egressgateway"),
        _entry("Linkerd", _MESH, "linkerd.io/control-plane-component=*"),
        _entry("Linkerd", _MESH, namespaces=("linkerd", "linkerd-viz")),
        _entry("Prometheus", _SCRAPER, "app.kubernetes.io/name=prometheus"),
        _entry("Prometheus", _SCRAPER, "app=prometheus"),
        _entry("Prometheus", _SCRAPER, "operator.prometheus.io/name=*"),
        _entry("Prometheus operator", _WEBHOOK, "app.kubernetes.io/name=prometheus-operator"),
        _entry("VictoriaMetrics agent", _SCRAPER, "app.kubernetes.io/name=vmagent"),
        _entry("Grafana Agent", _SCRAPER, "app.kubernetes.io/name=grafana-agent"),
        _entry("Grafana Alloy", _SCRAPER, "app.kubernetes.io/name=alloy"),
        _entry(
            "OpenTelemetry Collector",
            _COLLECTOR,
            "app.kubernetes.io/component=opentelemetry-collector",
        ),
        _entry(
            "OpenTelemetry Collector", _COLLECTOR, "app.kubernetes.io/name=opentelemetry-collector"
        ),
        _entry("Fluent Bit", _COLLECTOR, "app.kubernetes.io/name=fluent-bit"),
        _entry("Vector", _COLLECTOR, "app.kubernetes.io/name=vector"),
        _entry("Promtail", _COLLECTOR, "app.kubernetes.io/name=promtail"),
        _entry("ingress-nginx", _INGRESS, "app.kubernetes.io/name=ingress-nginx"),
        _entry("ingress-nginx", _INGRESS, namespaces=("ingress-nginx",)),
        _entry("Traefik", _INGRESS, "app.kubernetes.io/name=traefik"),
        _entry("Contour", _INGRESS, "app.kubernetes.io/name=contour"),
        _entry("HAProxy ingress", _INGRESS, "app.kubernetes.io/name=haproxy-ingress"),
        _entry("Kong", _INGRESS, "app.kubernetes.io/name=kong"),
        _entry("cert-manager", _WEBHOOK, "app.kubernetes.io/instance=cert-manager"),
        _entry("cert-manager", _WEBHOOK, namespaces=("cert-manager",)),
        _entry("Kyverno", _WEBHOOK, "app.kubernetes.io/part-of=kyverno"),
        _entry("Kyverno", _WEBHOOK, namespaces=("kyverno",)),
        _entry("Gatekeeper", _WEBHOOK, "gatekeeper.sh/system=yes"),
        _entry("Gatekeeper", _WEBHOOK, namespaces=("gatekeeper-system",)),
        _entry("metrics-server", _AGGREGATED, "k8s-app=metrics-server"),
        _entry("metrics-server", _AGGREGATED, "app.kubernetes.io/name=metrics-server"),
        _entry("Cilium's SPIRE", _WEBHOOK, namespaces=("cilium-spire",)),
    )
)
"""The platform workloads cpg recognises unless told otherwise (docs: the catalogue)."""


def catalogue_from(documents: Iterable[Any], where: str) -> Catalogue:
    """A catalogue file's entries: ``{"workloads": [{"name", "why", "labels",
    "namespaces", "treatment"}]}``. CatalogueError names the entry and the field."""
    entries: list[PlatformWorkload] = []
    for document in documents:
        if document is None:
            continue
        items = document.get("workloads") if isinstance(document, Mapping) else None
        if not isinstance(items, list):
            raise CatalogueError(f"{where}: expected a mapping with a 'workloads' list")
        for index, item in enumerate(items):
            entries.append(_read_entry(item, f"{where}: workloads[{index}]"))
    return Catalogue(tuple(entries))


def _read_entry(item: Any, at: str) -> PlatformWorkload:
    if not isinstance(item, Mapping):
        raise CatalogueError(f"{at} is not a mapping")
    unknown = sorted(set(item) - {"name", "why", "labels", "namespaces", "treatment"})
    if unknown:
        raise CatalogueError(
            f"{at}: unknown field(s) {unknown}; use name, why, labels, namespaces, treatment"
        )
    name, why = item.get("name"), item.get("why", "")
    if not isinstance(name, str) or not name.strip() or not isinstance(why, str):
        raise CatalogueError(f"{at}: name (and why, when given) must be text")
    labels = item.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise CatalogueError(f"{at}.labels must map label keys to values ('*': any value)")
    pairs = []
    for key, value in labels.items():
        text = str(value)
        if not isinstance(key, str) or (text != ANY_VALUE and label_problem(key, text)):
            raise CatalogueError(f"{at}.labels: {key!r}: {label_problem(str(key), text)}")
        pairs.append((key, text))
    spaces = item.get("namespaces") or []
    if not isinstance(spaces, list) or any(
        not isinstance(n, str) or namespace_problem(n) for n in spaces
    ):
        raise CatalogueError(f"{at}.namespaces must be a list of namespace names")
    if not pairs and not spaces:
        raise CatalogueError(f"{at}: give labels, namespaces or both (it would match every pod)")
    treatment = item.get("treatment", "system")
    if treatment not in TREATMENTS:
        raise CatalogueError(f"{at}.treatment {treatment!r} is not one of {', '.join(TREATMENTS)}")
    return PlatformWorkload(
        name.strip()[:120], why.strip()[:300], tuple(sorted(pairs)), tuple(spaces), treatment
    )
