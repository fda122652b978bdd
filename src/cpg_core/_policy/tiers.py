"""Kubernetes ClusterNetworkPolicy (``policy.networking.k8s.io/v1alpha2``), which Cilium reads
from 1.20: cluster-wide rules in two tiers around the namespaced policies.

The order Kubernetes defines (the network-policy-api's tier documentation): the **Admin**
tier first, its policies by ascending ``priority`` (0–1000) and each policy's rules in the
order written; the first rule that selects the connection decides — ``Accept`` and
``Deny`` are final, ``Pass`` skips the rest of the Admin tier. Then the namespaced policies
(for Cilium, its own policies): a pod they select for the connection's direction gets
their verdict, whatever comes after. Only for a pod they do not select does the
**Baseline** tier decide the same way; with no rule there either, the connection is
allowed (Kubernetes' default).

A rule selects a connection when its subject selects the pod it applies to (the
destination for ingress, the source for egress), one of its peers selects the other end,
and one of its protocols (if it lists any) the port. Peers and subjects select pods by
their namespace's labels (``kubernetes.io/metadata.name`` always among them) and their own;
``networks`` select addresses, a pod's included. A peer of a kind cpg does not know fails
closed, as the API asks: it selects nothing for ``Accept``, everything for ``Deny`` and
``Pass``."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence

import attrs

from cpg_core._base.documents import PolicyDocument
from cpg_core._base.flow import Direction, Endpoint, Flow
from cpg_core._base.labels import NAMESPACE_LABEL, NAMESPACE_LABELS_PREFIX
from cpg_core._flows.synthesis import cluster_of, is_pod_endpoint
from cpg_core._policy.policy_set import PolicySet

KIND = "ClusterNetworkPolicy"
GROUP = "policy.networking.k8s.io/"
ADMIN, BASELINE = "Admin", "Baseline"
ACCEPT, DENY, PASS = "Accept", "Deny", "Pass"
METADATA_NAME = "kubernetes.io/metadata.name"
"""The label Kubernetes puts on every namespace: its name."""


def is_cluster_network_policy(policy: object) -> bool:
    return (
        isinstance(policy, Mapping)
        and policy.get("kind") == KIND
        and str(policy.get("apiVersion") or "").startswith(GROUP)
    )


@attrs.frozen(slots=True)
class TierVerdict:
    """The rule of a tier that decided a connection."""

    action: str
    """``Accept``, ``Deny`` or ``Pass``."""
    tier: str
    policy: str
    section: str
    """``ingress`` or ``egress``."""
    rule: int
    rule_name: str = ""

    @property
    def reason(self) -> str:
        name = f" ({self.rule_name})" if self.rule_name else ""
        verb = {ACCEPT: "accepted", DENY: "denied", PASS: "passed on"}[self.action]
        return (
            f"{verb} by ClusterNetworkPolicy {self.policy} {self.section}[{self.rule}]{name} "
            f"({self.tier} tier)"
        )


def _k8s_labels(endpoint: Endpoint) -> dict[str, str]:
    out = {}
    for text in endpoint.labels:
        source, _, rest = text.partition(":")
        if source == "k8s":
            key, _, value = rest.partition("=")
            out[key] = value
    return out


def _namespace_labels(endpoint: Endpoint) -> dict[str, str]:
    labels = {
        key[len(NAMESPACE_LABELS_PREFIX) :]: value
        for key, value in _k8s_labels(endpoint).items()
        if key.startswith(NAMESPACE_LABELS_PREFIX)
    }
    labels.setdefault(METADATA_NAME, endpoint.namespace)
    return labels


def _pod_labels(endpoint: Endpoint) -> dict[str, str]:
    return {
        key: value
        for key, value in _k8s_labels(endpoint).items()
        if not key.startswith(NAMESPACE_LABELS_PREFIX) and key != NAMESPACE_LABEL
    }


def _holds(selector: object, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector against plain labels (an absent selector selects all; a
    malformed one nothing)."""
    if selector is None:
        return True
    if not isinstance(selector, Mapping):
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(str(key)) != str(value):
            return False
    for expression in selector.get("matchExpressions") or []:
        if not isinstance(expression, Mapping):
            return False
        key, op = str(expression.get("key", "")), expression.get("operator")
        values = [str(v) for v in expression.get("values") or []]
        found = labels.get(key)
        if op == "In":
            ok = found is not None and found in values
        elif op == "NotIn":
            ok = found is None or found not in values
        elif op == "Exists":
            ok = found is not None
        elif op == "DoesNotExist":
            ok = found is None
        else:
            return False
        if not ok:
            return False
    return True


@attrs.frozen(slots=True, eq=False)
class TierPeer:
    """A subject or a peer of a ClusterNetworkPolicy rule, read: its kind (``namespaces``,
    ``pods``, ``networks``, ``domainNames``; "" for one cpg does not know) and selectors."""

    kind: str
    namespaces: object = None
    """The namespace selector as written (``namespaces``, or a ``pods`` peer's)."""
    pods: object = None
    """A ``pods`` peer's pod selector as written (None: a ``pods`` value that is no mapping)."""
    networks: tuple[str, ...] = ()
    domains: frozenset[str] = frozenset()


def read_tier_peer(entry: object, *, subject: bool = False) -> TierPeer:
    """A rule's peer, or (``subject``) a policy's subject, which selects pods only."""
    if not isinstance(entry, Mapping):
        return TierPeer("")
    if not subject and "networks" in entry:
        return TierPeer("networks", networks=tuple(str(c) for c in entry["networks"] or []))
    if not subject and "domainNames" in entry:
        names = frozenset(str(n).lower().rstrip(".") for n in entry["domainNames"] or [])
        return TierPeer("domainNames", domains=names)
    if "namespaces" in entry:
        return TierPeer("namespaces", namespaces=entry["namespaces"] or {})
    if "pods" in entry:
        pods = entry["pods"] or {}
        if not isinstance(pods, Mapping):
            return TierPeer("pods")
        return TierPeer(
            "pods",
            namespaces=pods.get("namespaceSelector") or {},
            pods=pods.get("podSelector") or {},
        )
    return TierPeer("")


@attrs.frozen(slots=True)
class PortMatch:
    """One protocol entry of a rule: the protocol and its destination port (``number`` as
    written, or a range; neither: every port)."""

    protocol: str
    number: object = None
    has_number: bool = False
    span: tuple[object, object] | None = None
    every_port: bool = False


@attrs.frozen(slots=True, eq=False)
class TierRule:
    index: int
    name: str
    action: str
    action_written: object
    peers: tuple[TierPeer, ...]
    every_port: bool
    """No protocols listed: every port."""
    ports: tuple[PortMatch, ...] | None
    """The protocols listed (None: a value that is not a list, which selects no port)."""
    peers_written: object
    protocols_written: object


def _read_ports(protocols: object) -> tuple[PortMatch, ...] | None:
    if not isinstance(protocols, list):
        return None
    out = []
    for entry in protocols:
        if not isinstance(entry, Mapping):
            continue
        for name in ("tcp", "udp", "sctp"):
            match = entry.get(name)
            if not isinstance(match, Mapping):
                continue
            port = match.get("destinationPort")
            if not isinstance(port, Mapping):
                out.append(PortMatch(name.upper(), every_port=True))
                continue
            span = port.get("range")
            out.append(
                PortMatch(
                    name.upper(),
                    number=port.get("number"),
                    has_number="number" in port,
                    span=(span.get("start"), span.get("end"))
                    if isinstance(span, Mapping)
                    else None,
                )
            )
    return tuple(out)


@attrs.frozen(slots=True, eq=False)
class TierPolicy:
    """A ClusterNetworkPolicy, read once."""

    name: str
    tier: str
    tier_written: object
    priority: int
    priority_written: object
    subject: TierPeer | None
    """None: a subject that is not a mapping (it selects nothing)."""
    sections: Mapping[str, tuple[TierRule, ...]]
    document: PolicyDocument

    def rules(self, section: str) -> tuple[TierRule, ...]:
        return self.sections.get(section, ())


def read_tier_policy(policy: PolicyDocument) -> TierPolicy:
    spec = policy.get("spec") or {}
    try:
        priority = int(spec.get("priority", 1000))
    except (TypeError, ValueError):
        priority = 1000
    meta = policy.get("metadata") or {}
    subject = spec.get("subject")
    sections = {}
    for section, side in (("ingress", "from"), ("egress", "to")):
        rules = []
        for index, rule in enumerate(spec.get(section) or []):
            if not isinstance(rule, Mapping):
                continue
            protocols = rule.get("protocols")
            rules.append(
                TierRule(
                    index=index,
                    name=str(rule.get("name", "")),
                    action=str(rule.get("action", "")),
                    action_written=rule.get("action"),
                    peers=tuple(read_tier_peer(e) for e in rule.get(side) or []),
                    every_port=not protocols,
                    ports=_read_ports(protocols) if protocols else (),
                    peers_written=rule.get(side),
                    protocols_written=protocols,
                )
            )
        sections[section] = tuple(rules)
    return TierPolicy(
        name=str(meta.get("name", "")),
        tier=str(spec.get("tier") or ""),
        tier_written=spec.get("tier"),
        priority=priority,
        priority_written=spec.get("priority"),
        subject=read_tier_peer(subject, subject=True) if isinstance(subject, Mapping) else None,
        sections=sections,
        document=policy,
    )


_READ: dict[int, tuple[object, TierPolicy]] = {}
_READ_MAX = 1 << 12


def tier_policy(policy: PolicyDocument) -> TierPolicy:
    """The model of a ClusterNetworkPolicy document, read once and kept while it lives."""
    key = id(policy)
    known = _READ.get(key)
    if known is not None and known[0] is policy:
        return known[1]
    model = read_tier_policy(policy)
    if len(_READ) >= _READ_MAX:
        _READ.clear()
    _READ[key] = (policy, model)
    return model


def _selects_pod(entry: TierPeer, endpoint: Endpoint) -> bool | None:
    """Whether a subject or a namespaces/pods peer selects ``endpoint`` (None: a kind cpg
    does not know)."""
    if entry.kind == "namespaces":
        return is_pod_endpoint(endpoint) and _holds(entry.namespaces, _namespace_labels(endpoint))
    if entry.kind == "pods":
        if entry.pods is None:
            return None
        return (
            is_pod_endpoint(endpoint)
            and _holds(entry.namespaces, _namespace_labels(endpoint))
            and _holds(entry.pods, _pod_labels(endpoint))
        )
    return None


def _peer_selects(
    peer: TierPeer, endpoint: Endpoint, ip: str, names: Sequence[str], local: str = ""
) -> bool | None:
    """Whether a rule's peer selects ``endpoint`` (None: a kind cpg does not know). Cilium
    scopes ``namespaces`` and ``pods`` peers to the local cluster (``local``, the subject's;
    "" when unknown): a pod of another ClusterMesh cluster is never one of them."""
    if not peer.kind:
        return None
    remote = bool(local) and cluster_of(endpoint) not in ("", local)
    if remote and peer.kind in ("namespaces", "pods"):
        return False
    if peer.kind == "networks":
        try:
            address = ipaddress.ip_address(ip)
            return any(
                address in ipaddress.ip_network(cidr, strict=False) for cidr in peer.networks
            )
        except ValueError:
            return False
    if peer.kind == "domainNames":
        return any(_domain_matches(name.lower().rstrip("."), peer.domains) for name in names)
    return _selects_pod(peer, endpoint)


def _domain_matches(name: str, patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        if pattern.startswith("*."):
            head, _, rest = name.partition(".")
            if head and rest == pattern[2:]:
                return True
        elif name == pattern:
            return True
    return False


def _protocols_match(rule: TierRule, flow: Flow) -> bool:
    """Whether one of a rule's protocols selects the flow's port (none listed: every
    port). A named port cannot be resolved from a flow: it selects nothing here."""
    if rule.every_port:
        return True
    if rule.ports is None:
        return False
    for match in rule.ports:
        if match.protocol != flow.protocol:
            continue
        if match.every_port:
            return True
        if match.has_number and match.number == flow.port:
            return True
        if match.span is not None:
            try:
                if int(match.span[0]) <= flow.port <= int(match.span[1]):  # type: ignore[call-overload]
                    return True
            except (TypeError, ValueError):
                continue
    return False


def _in_tier(policy: PolicyDocument, tier: str) -> bool:
    return is_cluster_network_policy(policy) and tier_policy(policy).tier == tier


def _ordered(policies: list[PolicyDocument]) -> list[TierPolicy]:
    """A tier's policies in the order they are judged: priority, then name."""
    return sorted((tier_policy(p) for p in policies), key=lambda p: (p.priority, p.name))


def tier_verdict(
    policies: Iterable[PolicyDocument],
    tier: str,
    flow: Flow,
    names: Sequence[str] = (),
) -> TierVerdict | None:
    """The rule of ``tier`` that decides ``flow`` in its direction, or None when no rule of
    that tier selects it. Policies of one priority are taken in name order (Kubernetes
    leaves their order to the implementation)."""
    if flow.direction == Direction.INGRESS:
        section = "ingress"
        subject, peer, ip = flow.destination, flow.source, flow.source_ip
    elif flow.direction == Direction.EGRESS:
        section = "egress"
        subject, peer, ip = flow.source, flow.destination, flow.destination_ip
    else:
        return None
    if isinstance(policies, PolicySet):
        chosen = policies.remembered(
            ("tier", tier), lambda: _ordered([p for p in policies if _in_tier(p, tier)])
        )
    else:
        chosen = _ordered([p for p in policies if _in_tier(p, tier)])
    for policy in chosen:
        if policy.subject is None or not _selects_pod(policy.subject, subject):
            continue
        for rule in policy.rules(section):
            if rule.action not in (ACCEPT, DENY, PASS):
                continue
            selected = False
            for entry in rule.peers:
                found = _peer_selects(entry, peer, ip, names, cluster_of(subject))
                if found is None:  # fail closed
                    found = rule.action != ACCEPT
                if found:
                    selected = True
                    break
            if selected and _protocols_match(rule, flow):
                return TierVerdict(
                    action=rule.action,
                    tier=tier,
                    policy=policy.name,
                    section=section,
                    rule=rule.index,
                    rule_name=rule.name,
                )
    return None
