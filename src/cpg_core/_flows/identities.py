"""Identity where Hubble leaves it out, from what Cilium and Kubernetes know: a
``CiliumEndpoint`` holds a pod's IPs and its identity, a ``CiliumIdentity`` the labels behind
an identity number, and a pod's owner references name its workload.

Hubble drops identity in several ways: an L7 proxy record or a stale ipcache gives a pod the
world identity (with its pod name, or without), an exporter's field mask keeps the identity
number and not its labels, a pod that just started has no labels yet. :class:`IdentityBook`
turns the objects ``kubectl get ciliumendpoints,ciliumidentities,pods -A -o json`` prints
(or the same objects read from the cluster) into what each flow needs, and
:meth:`IdentityBook.resolve` gives a flow back with what the objects say (ARCHITECTURE §D40).

An IP is reused: a pod that holds it today may not have held it when the flow was seen. So a
world-reported peer becomes the pod at its IP only when the flow names that pod, or, when
the flow names none, when the pod already existed at the flow's time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from cpg_core._base.errors import CpgError
from cpg_core._base.flow import Endpoint, Flow, endpoint_of
from cpg_core._base.labels import select_labels
from cpg_core._flows.attribution import NO_TIME, time_key
from cpg_core._flows.synthesis import endpoint_kind

WORLD_POD = "world_pod"
"""A peer Hubble reported as the world, whose IP a CiliumEndpoint or a pod holds."""
IDENTITY = "identity"
"""An identity number Hubble gave without its labels, whose CiliumIdentity has them."""
OWNER = "owner"
"""A pod without a stable label, named by the workload its owner references give."""
UNTRUSTED = "untrusted"
"""A world-reported peer whose IP a pod holds now, but not provably when the flow was seen
(another pod name, or a pod created after the flow): left as it was."""
KINDS = (WORLD_POD, IDENTITY, OWNER, UNTRUSTED)

_NAMESPACE_KEY = "io.kubernetes.pod.namespace"
_RESERVED_IDENTITIES = 256
"""Identity numbers below this are Cilium's reserved ones (host, world, …), never a pod's."""
_OWNERS = {"Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job", "ReplicaSet"}


class IdentityInputError(CpgError):
    """An identities document cpg cannot read; the message names it and the field."""


@attrs.frozen(slots=True)
class KnownPod:
    """One pod as the identity objects describe it."""

    namespace: str
    name: str
    labels: tuple[str, ...]
    """``k8s:key=value`` as Hubble spells them (the CiliumEndpoint's identity labels)."""
    identity: int = 0
    ips: tuple[str, ...] = ()
    created: str = NO_TIME
    """A time key ("" when the object did not say)."""
    workload: str = ""
    """``Kind/name`` of the workload its owner references name ("" when none)."""


@attrs.frozen(slots=True)
class IdentityBook:
    """What the identity objects say, indexed for flows. Plain values: it crosses to worker
    processes with the aggregate options."""

    pods_at: Mapping[str, tuple[KnownPod, ...]] = attrs.field(factory=dict)
    """IP → the pods that hold it."""
    labels_of: Mapping[int, tuple[str, ...]] = attrs.field(factory=dict)
    """Identity number → its labels (CiliumIdentity)."""
    workload_of: Mapping[tuple[str, str], str] = attrs.field(factory=dict)
    """(namespace, pod) → ``Kind/name`` of its workload."""
    pods: int = 0
    identities: int = 0

    @property
    def empty(self) -> bool:
        return not (self.pods_at or self.labels_of or self.workload_of)

    def resolve(self, flow: Flow) -> tuple[Flow, tuple[str, ...]]:
        """``flow`` with each side Hubble left without identity filled in from the book,
        and the kinds of what was filled in (or found untrusted), one per side."""
        kinds: list[str] = []
        source, kind = self.endpoint(flow.source, flow.source_ip, flow.time)
        if kind:
            kinds.append(kind)
        destination, kind = self.endpoint(flow.destination, flow.destination_ip, flow.time)
        if kind:
            kinds.append(kind)
        if source is flow.source and destination is flow.destination:
            return flow, tuple(kinds)
        return attrs.evolve(flow, source=source, destination=destination), tuple(kinds)

    def endpoint(self, endpoint: Endpoint, ip: str, when: str) -> tuple[Endpoint, str]:
        """One side of a flow seen at ``when`` with ``ip``, filled in, and the kind ("" when
        the book has nothing to say)."""
        if not endpoint.labels and endpoint.identity >= _RESERVED_IDENTITIES:
            labels = self.labels_of.get(endpoint.identity)
            if labels is not None:
                named = endpoint_of(
                    endpoint.namespace, labels, endpoint.identity, endpoint.pod_name, ""
                )
                return self._with_workload(named), IDENTITY
        if ip and ip in self.pods_at and endpoint_kind(endpoint).world:
            pod = self._pod_at(ip, endpoint, when)
            if pod is None:
                return endpoint, UNTRUSTED
            named = endpoint_of(pod.namespace, pod.labels, pod.identity, pod.name, "")
            return self._with_workload(named, pod.workload), WORLD_POD
        if endpoint.pod_name and not endpoint.workload:
            named = self._with_workload(endpoint)
            if named is not endpoint:
                return named, OWNER
        return endpoint, ""

    def _pod_at(self, ip: str, endpoint: Endpoint, when: str) -> KnownPod | None:
        held = self.pods_at[ip]
        if endpoint.pod_name:
            for pod in held:
                if pod.name == endpoint.pod_name and (
                    not endpoint.namespace or pod.namespace == endpoint.namespace
                ):
                    return pod
            return None  # another pod holds the IP now
        seen = time_key(when) if when else NO_TIME
        existed = [pod for pod in held if pod.created and seen and pod.created <= seen]
        return existed[0] if len(existed) == 1 else None

    def _with_workload(self, endpoint: Endpoint, workload: str = "") -> Endpoint:
        """The endpoint with its workload's name when no stable label names it."""
        if select_labels(endpoint.labels):
            return endpoint
        found = workload or self.workload_of.get((endpoint.namespace, endpoint.pod_name), "")
        return attrs.evolve(endpoint, workload=found) if found else endpoint


def identity_book(documents: Iterable[Any], where: str = "identities") -> IdentityBook:
    """The book of every CiliumEndpoint, CiliumIdentity and Pod in ``documents`` (parsed
    JSON or YAML: single objects, or ``kind: List`` as kubectl prints them); other kinds are
    left alone. IdentityInputError names an object cpg cannot read."""
    pods: dict[tuple[str, str], KnownPod] = {}
    labels_of: dict[int, tuple[str, ...]] = {}
    for n, item in enumerate(_objects(documents)):
        kind = item.get("kind")
        at = f"{where}: item {n + 1} ({kind})"
        if kind == "CiliumIdentity":
            number, labels = _identity(item, at)
            labels_of[number] = labels
        elif kind in ("CiliumEndpoint", "Pod"):
            pod = _endpoint(item, at) if kind == "CiliumEndpoint" else _pod(item, at)
            key = (pod.namespace, pod.name)
            known = pods.get(key)
            pods[key] = pod if known is None else _joined(known, pod, kind == "CiliumEndpoint")
    pods_at: dict[str, list[KnownPod]] = {}
    for pod in pods.values():
        for ip in pod.ips:
            pods_at.setdefault(ip, []).append(pod)
    return IdentityBook(
        pods_at={ip: tuple(sorted(held, key=_pod_order)) for ip, held in pods_at.items()},
        labels_of=labels_of,
        workload_of={key: pod.workload for key, pod in pods.items() if pod.workload},
        pods=len(pods),
        identities=len(labels_of),
    )


def joined_books(books: Iterable[IdentityBook]) -> IdentityBook:
    """Several books as one (several files; files and the cluster)."""
    pods_at: dict[str, tuple[KnownPod, ...]] = {}
    labels_of: dict[int, tuple[str, ...]] = {}
    workload_of: dict[tuple[str, str], str] = {}
    pods = identities = 0
    for book in books:
        for ip, held in book.pods_at.items():
            pods_at[ip] = tuple(sorted({*pods_at.get(ip, ()), *held}, key=_pod_order))
        labels_of.update(book.labels_of)
        workload_of.update(book.workload_of)
        pods, identities = pods + book.pods, identities + book.identities
    return IdentityBook(pods_at, labels_of, workload_of, pods, identities)


def _pod_order(pod: KnownPod) -> tuple[str, str, str]:
    return (pod.namespace, pod.name, pod.created)


def _objects(documents: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    for doc in documents:
        if not isinstance(doc, Mapping):
            continue
        kind = doc.get("kind")
        items = doc.get("items")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
            yield from (item for item in items if isinstance(item, Mapping))
        elif isinstance(kind, str):
            yield doc


def _meta(item: Mapping[str, Any], at: str) -> tuple[str, str, str]:
    meta = item.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise IdentityInputError(f"{at}: metadata.name is missing")
    namespace = meta.get("namespace") or ""
    if not isinstance(namespace, str):
        raise IdentityInputError(f"{at}: metadata.namespace is not a string")
    created = meta.get("creationTimestamp")
    return meta["name"], namespace, time_key(created) if isinstance(created, str) else NO_TIME


def _strings(value: Any, at: str, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise IdentityInputError(f"{at}: {field} is not a list of strings")
    return value


def _identity(item: Mapping[str, Any], at: str) -> tuple[int, tuple[str, ...]]:
    name, _namespace, _created = _meta(item, at)
    if not name.isdigit():
        raise IdentityInputError(f"{at}: metadata.name {name[:40]!r} is not an identity number")
    labels = item.get("security-labels") or {}
    if not isinstance(labels, Mapping):
        raise IdentityInputError(f"{at}: security-labels is not a map")
    return int(name), tuple(f"{key}={value}" for key, value in sorted(labels.items()))


def _endpoint(item: Mapping[str, Any], at: str) -> KnownPod:
    name, namespace, created = _meta(item, at)
    status = item.get("status") or {}
    if not isinstance(status, Mapping):
        raise IdentityInputError(f"{at}: status is not a map")
    identity = status.get("identity") or {}
    number = identity.get("id", 0) if isinstance(identity, Mapping) else 0
    if not isinstance(number, int):
        raise IdentityInputError(f"{at}: status.identity.id is not a number")
    labels = _strings(identity.get("labels"), at, "status.identity.labels")
    networking = status.get("networking") or {}
    addressing = networking.get("addressing") if isinstance(networking, Mapping) else None
    ips = []
    for address in addressing or []:
        if isinstance(address, Mapping):
            ips += [address[k] for k in ("ipv4", "ipv6") if isinstance(address.get(k), str)]
    external = status.get("external-identifiers") or {}
    pod_name = external.get("pod-name") if isinstance(external, Mapping) else None
    return KnownPod(
        namespace=namespace,
        name=pod_name if isinstance(pod_name, str) and pod_name else name,
        labels=tuple(labels),
        identity=number,
        ips=tuple(ips),
        created=created,
    )


def _pod(item: Mapping[str, Any], at: str) -> KnownPod:
    name, namespace, created = _meta(item, at)
    meta = item["metadata"]
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise IdentityInputError(f"{at}: metadata.labels is not a map")
    status = item.get("status") or {}
    ips = []
    if isinstance(status, Mapping):
        ips += [
            p["ip"] for p in status.get("podIPs") or [] if isinstance(p, Mapping) and p.get("ip")
        ]
        if isinstance(status.get("podIP"), str) and status["podIP"] not in ips:
            ips.append(status["podIP"])
    hubble = [f"k8s:{key}={value}" for key, value in sorted(labels.items())]
    if namespace:
        hubble.append(f"k8s:{_NAMESPACE_KEY}={namespace}")
    return KnownPod(
        namespace=namespace,
        name=name,
        labels=tuple(hubble),
        ips=tuple(ips),
        created=created,
        workload=_workload(meta.get("ownerReferences"), labels),
    )


def _workload(owners: Any, labels: Mapping[str, Any]) -> str:
    """``Kind/name`` of the workload a pod's owner references name: a ReplicaSet's
    Deployment (its name less the pod-template-hash), a Job's CronJob (its name less the
    scheduled time), else the owner itself."""
    for owner in owners or []:
        if not isinstance(owner, Mapping) or owner.get("controller") is False:
            continue
        kind, name = owner.get("kind"), owner.get("name")
        if kind not in _OWNERS or not isinstance(name, str) or not name:
            continue
        if kind == "ReplicaSet":
            suffix = f"-{labels.get('pod-template-hash', '')}"
            if suffix != "-" and name.endswith(suffix):
                return f"Deployment/{name[: -len(suffix)]}"
        if kind == "Job":
            base, _, stamp = name.rpartition("-")
            if base and stamp.isdigit() and len(stamp) >= 8:
                return f"CronJob/{base}"
        return f"{kind}/{name}"
    return ""


def _joined(known: KnownPod, other: KnownPod, other_is_endpoint: bool) -> KnownPod:
    """A pod seen as a CiliumEndpoint and as a Pod: the endpoint's identity and labels
    (what Cilium selects on), the pod's owner, every IP."""
    endpoint, pod = (other, known) if other_is_endpoint else (known, other)
    return attrs.evolve(
        endpoint,
        labels=endpoint.labels or pod.labels,
        ips=tuple(dict.fromkeys((*endpoint.ips, *pod.ips))),
        created=endpoint.created or pod.created,
        workload=endpoint.workload or pod.workload,
    )
