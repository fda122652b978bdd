"""What the cluster declares it depends on, read from its own objects (ARCHITECTURE §D58).

A capture is a sample; the cluster's objects are not. The API server calls every admission
webhook, aggregated API and CRD conversion webhook its configuration names, each Prometheus
scrapes what its monitors and the pods' scrape annotations select (and asks the API server
where they are), and pods resolve names through the node-local DNS cache when one runs.
None of it need show in a capture, all of it breaks when a policy leaves it out.
:func:`declarations` turns the objects (``kubectl get … -o yaml`` documents, lists
included, or the same objects listed from the cluster) into :class:`Dependency` values:
who opens the connection, who takes it, the protocol and port, and the object that says
so. Nothing is guessed wider than an object says: a Service's *target* port (a named one
resolved through the pods' or workloads' container ports, else the Service's
EndpointSlices), the pods its selector selects, the Prometheus its monitors are selected
by. What cannot be resolved is a note, never a rule.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from cpg_core._base.documents import DeclaredBy
from cpg_core._base.flow import Endpoint
from cpg_core._base.labels import (
    LabelItems,
    label_problem,
    namespace_problem,
    select_labels,
    stable_labels,
)
from cpg_core._base.rules import EndpointPeer, EntityPeer, Peer
from cpg_core._policy.label_selector import LabelSelector, LabelSelectorError, label_selector

KUBE_APISERVER = EntityPeer("kube-apiserver")
HOST = EntityPeer("host")
API_SERVER_PORTS = (443, 6443)
"""The ports an API server listens on when no object says (managed clusters 443, kubeadm
6443): Prometheus' discovery is kept open on both, and the run says it assumed them."""
NAME_LABEL = "kubernetes.io/metadata.name"
"""The label Kubernetes gives every namespace: its name."""
_DNS_CACHE_APPS = frozenset({"node-local-dns", "nodelocaldns", "node-cache"})
_DNS_CACHE_KEYS = ("k8s-app", "app.kubernetes.io/name", "app")
_PROMETHEUS_APPS = frozenset({"prometheus"})
_PROMETHEUS_KEYS = ("app.kubernetes.io/name", "app", "k8s-app")
_WORKLOADS = frozenset(
    {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod"}
)
_SCRAPE = "prometheus.io/scrape"
_SCRAPE_PORT = "prometheus.io/port"
_DEFAULT_WEBHOOK_PORT = 443
MAX_OBJECTS = 200_000
"""Objects read from one set of sources at most (a large cluster's pods and Services)."""


class DeclarationInputError(LabelSelectorError):
    """An object cpg cannot read as a declaration: a note naming it, never a stopped run."""


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- what the objects say ----------------------------------------------------------------


@attrs.frozen(slots=True)
class ContainerPort:
    name: str
    port: int
    protocol: str = "TCP"


@attrs.frozen(slots=True)
class PodShape:
    """Pods as a pod or a workload's template declares them."""

    namespace: str
    labels: LabelItems
    ports: tuple[ContainerPort, ...] = ()
    annotations: LabelItems = ()
    host_network: bool = False
    owner: DeclaredBy = attrs.field(factory=lambda: DeclaredBy("Pod", "", ""))
    args: tuple[str, ...] = ()
    """The containers' commands and arguments (a DNS cache's listen address is one)."""

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    def port_named(self, name: str) -> ContainerPort | None:
        return next((p for p in self.ports if p.name == name), None)


@attrs.frozen(slots=True)
class Pods:
    """The pods one side of a dependency is: a namespace and a selector, with the label
    sets of the declared pods and templates it selects (empty when none was given)."""

    namespace: str
    selector: LabelSelector
    known: tuple[LabelItems, ...] = ()
    host_network: bool = False

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return namespace == self.namespace and self.selector.matches(labels)

    def peers(self) -> tuple[Peer, ...]:
        """The peers a policy names these pods by: the selector's own labels (exactly what
        the object names), else each declared pod's labels as cpg selects a pod; host
        network pods are the node (``host``)."""
        if self.host_network:
            return (HOST,)
        if self.selector.labels and not self.selector.expressions:
            return (EndpointPeer(self.namespace, self.selector.labels),)
        found = {select_labels(f"k8s:{k}={v}" for k, v in labels) for labels in self.known}
        return tuple(EndpointPeer(self.namespace, s) for s in sorted(found) if s)

    def text(self) -> str:
        return f"{self.namespace}/{self.selector.text()}"


Party = Pods | EntityPeer
"""One end of a dependency: pods, or a Cilium entity (the API server)."""


@attrs.frozen(slots=True)
class Dependency:
    """A connection the cluster declares: ``source`` opens it to ``destination`` on
    ``protocol``/``port``, because ``declared_by`` says so."""

    source: Party
    destination: Party
    protocol: str
    port: int
    declared_by: DeclaredBy

    def text(self) -> str:
        def end(party: Party) -> str:
            return party.entity if isinstance(party, EntityPeer) else party.text()

        return (
            f"{end(self.source)} → {end(self.destination)} {self.protocol}/{self.port} "
            f"({self.declared_by.text()})"
        )


@attrs.frozen(slots=True)
class DnsCache:
    """A node-local DNS cache: every DNS rule also admits it (its pods, or the node when
    it runs in the host's network, and its listen addresses)."""

    pods: Pods
    addresses: tuple[str, ...]
    declared_by: DeclaredBy

    def peers(self) -> tuple[Peer, ...]:
        from cpg_core._base.rules import CidrPeer, host_cidr

        cidrs = tuple(CidrPeer(c) for a in self.addresses if (c := host_cidr(a)))
        return (*self.pods.peers(), *cidrs)


@attrs.frozen(slots=True)
class Declarations:
    """What the cluster's objects declare, as values (they cross to worker processes with
    the aggregate options)."""

    dependencies: tuple[Dependency, ...] = ()
    dns_caches: tuple[DnsCache, ...] = ()
    pods: tuple[PodShape, ...] = ()
    """Every pod and template read: the label sets a policy target is matched against."""
    notes: tuple[str, ...] = ()
    """What could not be used, one line each (an unresolved port, a monitor no Prometheus
    selects, a Helm template)."""
    objects: Mapping[str, int] = attrs.field(factory=dict)
    """Objects read, by kind."""
    sources: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.dependencies or self.dns_caches)

    def pods_in(self, namespace: str) -> list[PodShape]:
        return [p for p in self.pods if p.namespace == namespace]

    def dns_peers(self) -> list[tuple[Peer, DeclaredBy]]:
        """Each DNS cache's peers with the object declaring it."""
        return [(peer, cache.declared_by) for cache in self.dns_caches for peer in cache.peers()]

    def with_notes(self, notes: Iterable[str]) -> Declarations:
        return attrs.evolve(self, notes=(*self.notes, *notes))

    def summary(self) -> str:
        """``3 webhooks, 1 APIService …`` read, in words."""
        return ", ".join(f"{n} {kind}" for kind, n in sorted(self.objects.items())) or "nothing"


def declaring(
    declarations: Declarations,
    source: Endpoint,
    destination: Endpoint,
    protocol: str,
    port: int,
) -> tuple[DeclaredBy, ...]:
    """The objects that declare a connection from ``source`` to ``destination`` (a flow
    seen or described by hand): what ``why`` and ``trace`` say of it."""
    found = {
        dependency.declared_by
        for dependency in declarations.dependencies
        if dependency.protocol == protocol
        and dependency.port == port
        and _is(dependency.source, source)
        and _is(dependency.destination, destination)
    }
    return tuple(sorted(found))


def _is(party: Party, endpoint: Endpoint) -> bool:
    if isinstance(party, EntityPeer):
        return f"reserved:{party.entity}" in endpoint.labels
    if party.host_network:
        return "reserved:host" in endpoint.labels
    return party.selects(endpoint.namespace, stable_labels(endpoint.labels))


def joined_declarations(parts: Sequence[Declarations]) -> Declarations:
    """Several sources' declarations as one (each source's objects are read alone: a
    Service in one file and its pods in another are still resolved together by reading
    every source in one call of :func:`declarations`; this joins results)."""
    objects: dict[str, int] = {}
    for part in parts:
        for kind, n in part.objects.items():
            objects[kind] = objects.get(kind, 0) + n
    return Declarations(
        dependencies=_unique(d for p in parts for d in p.dependencies),
        dns_caches=_unique(c for p in parts for c in p.dns_caches),
        pods=_unique(s for p in parts for s in p.pods),
        notes=_unique(n for p in parts for n in p.notes),
        objects=dict(sorted(objects.items())),
        sources=_unique(s for p in parts for s in p.sources),
    )


def _unique(items: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(items))


# --- reading the objects -----------------------------------------------------------------


def flattened(documents: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    """Every object of ``documents``, the items of ``List`` documents (and of lists of
    documents) included."""
    stack = list(documents)[::-1]
    while stack:
        doc = stack.pop()
        if isinstance(doc, list):
            stack.extend(doc[::-1])
        elif isinstance(doc, Mapping):
            items = doc.get("items")
            if isinstance(items, list) and str(doc.get("kind", "")).endswith("List"):
                stack.extend(items[::-1])
            elif isinstance(doc.get("kind"), str):
                yield doc


@attrs.define
class _Service:
    namespace: str
    name: str
    selector: LabelSelector | None
    ports: list[tuple[str, int, int | str, str]]
    """(name, port, targetPort, protocol)."""
    labels: dict[str, str]
    annotations: dict[str, str]
    cluster_ips: tuple[str, ...]


@attrs.define
class _Read:
    """The objects of one reading, by kind, before they are resolved."""

    services: dict[tuple[str, str], _Service] = attrs.Factory(dict)
    slices: dict[tuple[str, str], list[tuple[str, int, str]]] = attrs.Factory(dict)
    pods: list[PodShape] = attrs.Factory(list)
    namespaces: dict[str, dict[str, str]] = attrs.Factory(dict)
    webhooks: list[tuple[DeclaredBy, Mapping[str, Any]]] = attrs.Factory(list)
    """(the webhook, its clientConfig.service)."""
    monitors: list[tuple[str, Mapping[str, Any]]] = attrs.Factory(list)
    prometheuses: list[Mapping[str, Any]] = attrs.Factory(list)
    config_maps: list[Mapping[str, Any]] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)
    objects: dict[str, int] = attrs.Factory(dict)


def _meta(obj: Mapping[str, Any]) -> tuple[str, str, dict[str, str], dict[str, str]]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    labels = meta.get("labels")
    annotations = meta.get("annotations")
    return (
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        _string_map(labels),
        _string_map(annotations),
    )


def _string_map(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): _scalar(v) for k, v in value.items() if isinstance(v, str | int | float | bool)}


def _port_number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and 0 < value < 65536:
        return value
    if isinstance(value, str) and value.isdigit() and len(value) <= 5 and 0 < int(value) < 65536:
        return int(value)
    return None


def _protocol(value: Any) -> str:
    text = str(value or "TCP").upper()
    return text if text in ("TCP", "UDP", "SCTP") else "TCP"


def declarations(documents: Iterable[Any], source: str = "") -> Declarations:
    """What ``documents`` (Kubernetes objects, ``List`` documents included) declare. An
    object of another kind is counted and left alone; an object cpg cannot read is a note
    naming it and the field, and the rest is still read."""
    read = _Read()
    for count, obj in enumerate(flattened(documents), 1):
        if count > MAX_OBJECTS:
            read.notes.append(f"{source}: more than {MAX_OBJECTS} objects; the rest left out")
            break
        kind = str(obj.get("kind"))
        try:
            if _take(read, kind, obj):
                read.objects[kind] = read.objects.get(kind, 0) + 1
        except LabelSelectorError as exc:
            namespace, name, _, _ = _meta(obj)
            where = f"{namespace}/{name}" if namespace else name
            read.notes.append(f"{kind} {where}: {exc}; left out")
    return _resolve(read, source)


def declares_anything(documents: Iterable[Any]) -> bool:
    """Whether ``documents`` hold an object of a kind :func:`declarations` reads (a cheap
    look before the whole reading: is this file what it should be?)."""
    return any(
        obj.get("kind") in _READERS and obj.get("kind") != "ConfigMap"
        for obj in flattened(documents)
    )


@attrs.frozen(slots=True)
class _Object:
    """One object as the readers below take it."""

    kind: str
    namespace: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: Mapping[str, Any]
    raw: Mapping[str, Any]


def _take(read: _Read, kind: str, raw: Mapping[str, Any]) -> bool:
    """Keep what one object says; False for a kind that declares nothing cpg uses."""
    reader = _READERS.get(kind)
    if reader is None:
        return False
    namespace, name, labels, annotations = _meta(raw)
    if namespace and namespace_problem(namespace) is not None:
        raise DeclarationInputError(f"namespace {namespace[:80]!r} is not a namespace name")
    spec = raw.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    return reader(read, _Object(kind, namespace, name, labels, annotations, spec, raw)) is not False


def _read_webhooks(read: _Read, obj: _Object) -> None:
    hooks = obj.raw.get("webhooks") or []
    if not isinstance(hooks, list):
        raise DeclarationInputError("webhooks is not a list")
    for index, hook in enumerate(hooks):
        service = _dig(hook, "clientConfig", "service")
        if service is not None:
            what = f"admission webhook {str(hook.get('name') or index)[:120]}"
            read.webhooks.append((DeclaredBy(obj.kind, "", obj.name, what), service))


def _read_api_service(read: _Read, obj: _Object) -> None:
    service = _dig(obj.spec, "service")
    if service is not None:
        what = f"aggregated API {obj.name}"
        read.webhooks.append((DeclaredBy(obj.kind, "", obj.name, what), service))


def _read_crd(read: _Read, obj: _Object) -> None:
    conversion = _dig(obj.spec, "conversion")
    if conversion is not None and conversion.get("strategy") == "Webhook":
        service = _dig(conversion, "webhook", "clientConfig", "service")
        if service is not None:
            what = f"conversion webhook of {obj.name}"
            read.webhooks.append((DeclaredBy(obj.kind, "", obj.name, what), service))


def _dig(value: Any, *keys: str) -> Mapping[str, Any] | None:
    """``value[k1][k2]…`` when each step is an object, else None."""
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value if isinstance(value, Mapping) else None


def _read_service(read: _Read, obj: _Object) -> None:
    _take_service(read, obj.namespace, obj.name, obj.labels, obj.annotations, obj.spec)


def _slice_ports(ports: Any) -> list[tuple[str, int, str]]:
    found = []
    for port in ports if isinstance(ports, list) else []:
        number = _port_number(port.get("port")) if isinstance(port, Mapping) else None
        if number is not None:
            found.append((str(port.get("name") or ""), number, _protocol(port.get("protocol"))))
    return found


def _read_endpoint_slice(read: _Read, obj: _Object) -> None:
    owner = obj.labels.get("kubernetes.io/service-name")
    if owner:
        namespace = obj.namespace or "default"
        read.slices.setdefault((namespace, owner), []).extend(_slice_ports(obj.raw.get("ports")))


def _read_workload(read: _Read, obj: _Object) -> None:
    shape = _pod_shape(obj.kind, obj.namespace, obj.name, obj.labels, obj.annotations, obj.raw)
    if shape is not None:
        read.pods.append(shape)


def _read_namespace(read: _Read, obj: _Object) -> None:
    read.namespaces[obj.name] = {**obj.labels, NAME_LABEL: obj.name}


def _read_monitor(read: _Read, obj: _Object) -> None:
    read.monitors.append((obj.kind, obj.raw))


def _read_prometheus(read: _Read, obj: _Object) -> None:
    read.prometheuses.append(obj.raw)


def _read_config_map(read: _Read, obj: _Object) -> bool:
    if "node-local-dns" in obj.name or "nodelocaldns" in obj.name:
        read.config_maps.append(obj.raw)
        return True
    return False


_READERS: dict[str, Any] = {
    "ValidatingWebhookConfiguration": _read_webhooks,
    "MutatingWebhookConfiguration": _read_webhooks,
    "APIService": _read_api_service,
    "CustomResourceDefinition": _read_crd,
    "Service": _read_service,
    "EndpointSlice": _read_endpoint_slice,
    **dict.fromkeys(_WORKLOADS, _read_workload),
    "Namespace": _read_namespace,
    "ServiceMonitor": _read_monitor,
    "PodMonitor": _read_monitor,
    "Prometheus": _read_prometheus,
    "ConfigMap": _read_config_map,
}
"""What each kind of object is read for (a kind not here declares nothing cpg uses)."""


def label_selector_of(labels: Mapping[Any, Any], where: str) -> LabelSelector:
    """A Service's selector (plain labels) as a label selector."""
    if not all(isinstance(v, str | int | float | bool) for v in labels.values()):
        raise DeclarationInputError(f"{where} is not a map of labels")
    return LabelSelector(tuple(sorted((str(k), _scalar(v)) for k, v in labels.items())))


def _take_service(
    read: _Read,
    namespace: str,
    name: str,
    labels: dict[str, str],
    annotations: dict[str, str],
    spec: Mapping[str, Any],
) -> None:
    raw = spec.get("selector")
    selector = None
    if raw is not None:
        if not isinstance(raw, Mapping):
            raise DeclarationInputError("spec.selector is not a map of labels")
        selector = label_selector_of(raw, "spec.selector")
    ports = []
    for index, port in enumerate(spec.get("ports") or []):
        if not isinstance(port, Mapping):
            raise DeclarationInputError(f"spec.ports[{index}] is not an object")
        number = _port_number(port.get("port"))
        if number is None:
            raise DeclarationInputError(f"spec.ports[{index}].port is not a port number")
        target = port.get("targetPort", number)
        target = _port_number(target) or (str(target) if isinstance(target, str) else number)
        ports.append((str(port.get("name") or ""), number, target, _protocol(port.get("protocol"))))
    ips = [spec.get("clusterIP"), *(spec.get("clusterIPs") or [])]
    read.services[(namespace or "default", name)] = _Service(
        namespace or "default",
        name,
        selector,
        ports,
        labels,
        annotations,
        tuple(sorted({str(ip) for ip in ips if isinstance(ip, str) and _is_ip(ip)})),
    )


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _pod_shape(
    kind: str,
    namespace: str,
    name: str,
    labels: dict[str, str],
    annotations: dict[str, str],
    obj: Mapping[str, Any],
) -> PodShape | None:
    """The pods a pod or workload declares (a template's labels, annotations and ports)."""
    spec: Any = obj.get("spec")
    if kind != "Pod":
        if kind == "CronJob":
            job = spec.get("jobTemplate") if isinstance(spec, Mapping) else None
            spec = job.get("spec") if isinstance(job, Mapping) else None
        template = spec.get("template") if isinstance(spec, Mapping) else None
        if not isinstance(template, Mapping):
            return None
        _, _, labels, annotations = _meta(template)
        spec = template.get("spec")
    if not isinstance(spec, Mapping):
        return None
    ports: list[ContainerPort] = []
    args: list[str] = []
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    for container in containers:
        if not isinstance(container, Mapping):
            continue
        for port in container.get("ports") or []:
            if isinstance(port, Mapping) and (number := _port_number(port.get("containerPort"))):
                ports.append(
                    ContainerPort(
                        str(port.get("name") or ""), number, _protocol(port.get("protocol"))
                    )
                )
        for key in ("command", "args"):
            words = container.get(key)
            if isinstance(words, list):
                args += [str(w)[:512] for w in words[:64] if isinstance(w, str | int)]
    for key, value in labels.items():
        if label_problem(key, value) is not None:
            raise DeclarationInputError(f"label {key}={value[:80]!r} is not a label")
    return PodShape(
        namespace=namespace or "default",
        labels=tuple(sorted(labels.items())),
        ports=tuple(ports),
        annotations=tuple(sorted(annotations.items())),
        host_network=spec.get("hostNetwork") is True,
        owner=DeclaredBy(kind, namespace or "default", name),
        args=tuple(args),
    )


# --- resolving ---------------------------------------------------------------------------


def _resolve(read: _Read, source: str) -> Declarations:
    deps: list[Dependency] = []
    notes = list(read.notes)
    for owner, ref in read.webhooks:
        deps += _webhook(read, owner, ref, notes)
    deps += _scrapes(read, notes)
    caches = _dns_caches(read)
    return Declarations(
        dependencies=_unique(deps),
        dns_caches=_unique(caches),
        pods=tuple(read.pods),
        notes=_unique(notes),
        objects=dict(sorted(read.objects.items())),
        sources=(source,) if source else (),
    )


def _pods_of(read: _Read, namespace: str, selector: LabelSelector) -> Pods:
    known = [p for p in read.pods if p.namespace == namespace and selector.matches(p.label_map)]
    return Pods(
        namespace,
        selector,
        tuple(sorted({p.labels for p in known})),
        host_network=bool(known) and all(p.host_network for p in known),
    )


def _webhook(
    read: _Read, owner: DeclaredBy, ref: Mapping[str, Any], notes: list[str]
) -> list[Dependency]:
    """kube-apiserver → the pods behind the Service the webhook (APIService, conversion)
    names, on the Service port's target port."""
    namespace = str(ref.get("namespace") or "")
    name = str(ref.get("name") or "")
    port = _port_number(ref.get("port", _DEFAULT_WEBHOOK_PORT))
    if not namespace or not name or port is None:
        notes.append(f"{owner.text()}: its service reference is incomplete; left out")
        return []
    owner = attrs.evolve(owner, what=f"{owner.what}, Service {namespace}/{name} port {port}")
    service = read.services.get((namespace, name))
    if service is None:
        notes.append(
            f"{owner.text()}: Service {namespace}/{name} is not among the objects given "
            "(give it, with its pods or workloads); left out"
        )
        return []
    found = _target_ports(read, service, port=port)
    if service.selector is None or not found:
        if service.selector is None:
            notes.append(f"{owner.text()}: Service {namespace}/{name} selects no pods; left out")
        else:
            notes.append(_unresolved(owner, service, str(port)))
        return []
    pods = _pods_of(read, namespace, service.selector)
    return [Dependency(KUBE_APISERVER, pods, proto, number, owner) for number, proto in found]


def _unresolved(owner: DeclaredBy, service: _Service, port: str) -> str:
    return (
        f"{owner.text()}: the target port of Service {service.namespace}/{service.name} port "
        f"{port} is a name no pod, workload or EndpointSlice given resolves; left out"
    )


def _target_ports(
    read: _Read, service: _Service, *, port: int | None = None, name: str | None = None
) -> list[tuple[int, str]]:
    """The pod ports behind one port of a Service (by number or by name): its targetPort,
    a named one resolved through the pods' container ports, else its EndpointSlices."""
    out: list[tuple[int, str]] = []
    for port_name, number, target, proto in service.ports:
        if (port is not None and number != port) or (name is not None and port_name != name):
            continue
        if isinstance(target, int):
            out.append((target, proto))
            continue
        resolved = set()
        if service.selector is not None:
            for pod in read.pods:
                if pod.namespace == service.namespace and service.selector.matches(pod.label_map):
                    named = pod.port_named(target)
                    if named is not None:
                        resolved.add((named.port, named.protocol))
        if not resolved:
            resolved = {
                (n, p)
                for slice_name, n, p in read.slices.get((service.namespace, service.name), [])
                if slice_name == port_name
            }
        out += sorted(resolved)
    return sorted(set(out))


def _namespace_labels(read: _Read, namespace: str) -> dict[str, str]:
    return read.namespaces.get(namespace) or {NAME_LABEL: namespace}


def _namespaces(read: _Read) -> list[str]:
    found = {*read.namespaces, *(s[0] for s in read.services), *(p.namespace for p in read.pods)}
    return sorted(found)


def _monitor_namespaces(read: _Read, own: str, selector: Any) -> list[str]:
    """The namespaces a ServiceMonitor's or PodMonitor's ``namespaceSelector`` names."""
    if isinstance(selector, Mapping):
        if selector.get("any") is True:
            return _namespaces(read)
        names = selector.get("matchNames")
        if isinstance(names, list) and names:
            return sorted({str(n) for n in names})
    return [own]


@attrs.frozen(slots=True)
class _Prometheus:
    namespace: str
    name: str
    pods: Pods
    owner: DeclaredBy
    """The Prometheus resource, or the pod or workload of a Prometheus run without one."""
    monitors: LabelSelector | None = None
    monitor_namespaces: LabelSelector | None = None
    pod_monitors: LabelSelector | None = None
    pod_monitor_namespaces: LabelSelector | None = None

    def selects(self, read: _Read, kind: str, namespace: str, labels: Mapping[str, str]) -> bool:
        monitors, spaces = (
            (self.monitors, self.monitor_namespaces)
            if kind == "ServiceMonitor"
            else (self.pod_monitors, self.pod_monitor_namespaces)
        )
        if monitors is None or not monitors.matches(labels):
            return False  # the operator: no selector selects no monitor
        if spaces is None:
            return namespace == self.namespace  # no namespace selector: its own namespace
        return spaces.matches(_namespace_labels(read, namespace))


def _prometheuses(read: _Read, notes: list[str]) -> list[_Prometheus]:
    """Each Prometheus the objects declare with its pods: the operator's resources (its
    pods carry ``prometheus: NAME``), and Prometheus pods given without one."""
    out = []
    for obj in read.prometheuses:
        namespace, name, _, _ = _meta(obj)
        spec = obj.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        where = f"Prometheus {namespace}/{name}"
        try:
            selectors = [
                None if spec.get(key) is None else label_selector(spec.get(key), f"spec.{key}")
                for key in (
                    "serviceMonitorSelector",
                    "serviceMonitorNamespaceSelector",
                    "podMonitorSelector",
                    "podMonitorNamespaceSelector",
                )
            ]
        except LabelSelectorError as exc:
            notes.append(f"{where}: {exc}; left out")
            continue
        if not name or label_problem("prometheus", name) is not None:
            notes.append(f"{where}: its name cannot be a label value; left out")
            continue
        namespace = namespace or "default"
        pods = _pods_of(read, namespace, LabelSelector((("prometheus", name),)))
        owner = DeclaredBy("Prometheus", namespace, name)
        out.append(_Prometheus(namespace, name, pods, owner, *selectors))
    operated = {(p.namespace, p.name) for p in out}
    for pod in read.pods:
        labels = pod.label_map
        if not any(labels.get(k) in _PROMETHEUS_APPS for k in _PROMETHEUS_KEYS):
            continue
        if (pod.namespace, labels.get("prometheus", "")) in operated:
            continue
        selected = select_labels(f"k8s:{k}={v}" for k, v in pod.labels)
        if not selected:
            continue
        pods = Pods(pod.namespace, LabelSelector(selected), (pod.labels,), pod.host_network)
        out.append(_Prometheus(pod.namespace, pod.owner.name, pods, pod.owner))
    return out


def _scrapes(read: _Read, notes: list[str]) -> list[Dependency]:
    """Prometheus → each target its monitors (or the pods' scrape annotations) select, on
    the declared port; and Prometheus → the API server (service discovery)."""
    proms = _prometheuses(read, notes)
    deps: list[Dependency] = []
    for kind, monitor in read.monitors:
        deps += _monitor(read, kind, monitor, proms, notes)
    deps += _annotated(read, proms)
    api_ports = _api_server_ports(read)
    for prom in proms:
        for number, proto in api_ports:
            what = f"service discovery: the API server {proto}/{number}"
            declared = attrs.evolve(prom.owner, what=what)
            deps.append(Dependency(prom.pods, KUBE_APISERVER, proto, number, declared))
    if proms and not read.slices.get(("default", "kubernetes")):
        notes.append(
            "the API server's port: no EndpointSlice of default/kubernetes given; "
            f"Prometheus' discovery kept open on {' and '.join(map(str, API_SERVER_PORTS))}"
        )
    return deps


def _api_server_ports(read: _Read) -> list[tuple[int, str]]:
    ports = {(n, p) for _name, n, p in read.slices.get(("default", "kubernetes"), [])}
    if not ports:
        service = read.services.get(("default", "kubernetes"))
        ports = {
            (t, proto)
            for _n, _port, t, proto in (service.ports if service else [])
            if isinstance(t, int)
        }
    return sorted(ports) or [(p, "TCP") for p in API_SERVER_PORTS]


def _monitor(
    read: _Read,
    kind: str,
    monitor: Mapping[str, Any],
    proms: Sequence[_Prometheus],
    notes: list[str],
) -> list[Dependency]:
    namespace, name, labels, _ = _meta(monitor)
    namespace = namespace or "default"
    spec = monitor.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    where = DeclaredBy(kind, namespace, name)
    scrapers = [p for p in proms if p.selects(read, kind, namespace, labels)]
    if not scrapers:
        notes.append(
            f"{where.ref}: no Prometheus given selects it (give the Prometheus resources); left out"
        )
        return []
    try:
        selector = label_selector(spec.get("selector"), "spec.selector")
    except LabelSelectorError as exc:
        notes.append(f"{where.ref}: {exc}; left out")
        return []
    spaces = _monitor_namespaces(read, namespace, spec.get("namespaceSelector"))
    endpoints_key = "endpoints" if kind == "ServiceMonitor" else "podMetricsEndpoints"
    endpoints = [e for e in spec.get(endpoints_key) or [] if isinstance(e, Mapping)]
    targets: list[tuple[Pods, int, str, str]] = []
    if kind == "ServiceMonitor":
        for (space, svc_name), service in sorted(read.services.items()):
            if space not in spaces or service.selector is None:
                continue
            if not selector.matches(service.labels):
                continue
            pods = _pods_of(read, space, service.selector)
            for endpoint in endpoints:
                found = _service_monitor_ports(read, service, endpoint)
                if not found:
                    notes.append(
                        _unresolved(
                            where, service, str(endpoint.get("port") or endpoint.get("targetPort"))
                        )
                    )
                targets += [(pods, n, p, f"Service {space}/{svc_name}") for n, p in found]
    else:
        for space in spaces:
            shapes = [
                p for p in read.pods if p.namespace == space and selector.matches(p.label_map)
            ]
            for endpoint in endpoints:
                for shape in shapes:
                    found = _pod_monitor_ports(shape, endpoint)
                    pods = _pods_of(
                        read, space, LabelSelector(selector.labels, selector.expressions)
                    )
                    targets += [(pods, n, p, f"{shape.owner.ref}") for n, p in found]
            if not shapes:
                notes.append(
                    f"{where.ref}: no pod or workload given in {space} matches its selector "
                    f"({selector.text()}); its ports cannot be resolved"
                )
    deps = []
    for prom in scrapers:
        for pods, number, proto, via in targets:
            what = f"scraped by Prometheus {prom.namespace}/{prom.name} on {via}"
            deps.append(Dependency(prom.pods, pods, proto, number, attrs.evolve(where, what=what)))
    return deps


def _service_monitor_ports(
    read: _Read, service: _Service, endpoint: Mapping[str, Any]
) -> list[tuple[int, str]]:
    port = endpoint.get("port")
    if isinstance(port, str) and port:
        return _target_ports(read, service, name=port)
    target = endpoint.get("targetPort")
    number = _port_number(target)
    if number is not None:
        return [(number, "TCP")]
    if isinstance(target, str) and target:
        found = set()
        for pod in read.pods:
            if (
                service.selector is not None
                and pod.namespace == service.namespace
                and service.selector.matches(pod.label_map)
                and (named := pod.port_named(target))
            ):
                found.add((named.port, named.protocol))
        return sorted(found)
    return []


def _pod_monitor_ports(shape: PodShape, endpoint: Mapping[str, Any]) -> list[tuple[int, str]]:
    number = _port_number(endpoint.get("portNumber"))
    if number is not None:
        return [(number, "TCP")]
    for key in ("port", "targetPort"):
        value = endpoint.get(key)
        number = _port_number(value)
        if number is not None:
            return [(number, "TCP")]
        if isinstance(value, str) and (named := shape.port_named(value)):
            return [(named.port, named.protocol)]
    return []


def _annotated(read: _Read, proms: Sequence[_Prometheus]) -> list[Dependency]:
    """Prometheus' ``kubernetes-pods`` convention: a pod (or template) annotated
    ``prometheus.io/scrape: "true"`` is scraped on ``prometheus.io/port``, else on each of
    its declared container ports; by every Prometheus without monitors of its own."""
    scrapers = [p for p in proms if p.monitors is None and p.pod_monitors is None]
    if not scrapers:
        return []
    deps = []
    for shape in read.pods:
        notes = dict(shape.annotations)
        if notes.get(_SCRAPE) != "true":
            continue
        number = _port_number(notes.get(_SCRAPE_PORT))
        ports = [(number, "TCP")] if number else [(p.port, p.protocol) for p in shape.ports]
        selected = select_labels(f"k8s:{k}={v}" for k, v in shape.labels)
        if not selected:
            continue
        pods = Pods(shape.namespace, LabelSelector(selected), (shape.labels,), shape.host_network)
        for prom in scrapers:
            what = f"scraped by Prometheus {prom.namespace}/{prom.name} ({_SCRAPE} annotation)"
            owner = attrs.evolve(shape.owner, what=what)
            deps += [Dependency(prom.pods, pods, p, n, owner) for n, p in ports]
    return deps


def is_dns_cache(labels: Mapping[str, str]) -> bool:
    """A node-local DNS cache's pods, as its installations label them."""
    return any(labels.get(k) in _DNS_CACHE_APPS for k in _DNS_CACHE_KEYS)


def _dns_caches(read: _Read) -> list[DnsCache]:
    caches = []
    cluster_ips = {ip for s in read.services.values() for ip in s.cluster_ips}
    config_binds = [ip for cm in read.config_maps for ip in _corefile_binds(cm)]
    for shape in read.pods:
        labels = shape.label_map
        if not is_dns_cache(labels):
            continue
        selected = select_labels(f"k8s:{k}={v}" for k, v in shape.labels)
        if not selected:
            continue
        addresses = [*_local_ips(shape.args), *config_binds]
        addresses = sorted({a for a in addresses if a not in cluster_ips}, key=_ip_order)
        pods = Pods(shape.namespace, LabelSelector(selected), (shape.labels,), shape.host_network)
        owner = attrs.evolve(
            shape.owner,
            what="node-local DNS cache" + (f" on {', '.join(addresses)}" if addresses else ""),
        )
        caches.append(DnsCache(pods, tuple(addresses), owner))
    return caches


def _ip_order(ip: str) -> tuple[int, int]:
    address = ipaddress.ip_address(ip)
    return (address.version, int(address))


def _local_ips(args: Sequence[str]) -> list[str]:
    """The addresses of node-local-dns' ``-localip`` argument (``-localip=A,B`` or two
    words)."""
    found: list[str] = []
    for index, word in enumerate(args):
        value = None
        if word.lstrip("-").startswith("localip="):
            value = word.split("=", 1)[1]
        elif word.lstrip("-") == "localip" and index + 1 < len(args):
            value = args[index + 1]
        if value:
            found += [ip.strip() for ip in value.split(",") if _is_ip(ip.strip())]
    return found


def _corefile_binds(config_map: Mapping[str, Any]) -> list[str]:
    data = config_map.get("data")
    if not isinstance(data, Mapping):
        return []
    found = []
    for text in data.values():
        if not isinstance(text, str):
            continue
        for line in text.splitlines()[:10_000]:
            words = line.split()
            if words[:1] == ["bind"]:
                found += [w for w in words[1:] if _is_ip(w)]
    return found
