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
from typing import Any

import attrs

from cpg_core.base._documents import PolicyDocument
from cpg_core.base._flow import Direction, Endpoint, Flow
from cpg_core.base._labels import NAMESPACE_LABEL, NAMESPACE_LABELS_PREFIX
from cpg_core.flows._synthesis import cluster_of, is_pod_endpoint
from cpg_core.policy._policy_set import PolicySet

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


def _selects_pod(entry: Mapping[str, Any], endpoint: Endpoint) -> bool | None:
    """Whether a subject or a namespaces/pods peer selects ``endpoint`` (None: a kind cpg
    does not know)."""
    if "namespaces" in entry:
        return is_pod_endpoint(endpoint) and _holds(
            entry["namespaces"] or {}, _namespace_labels(endpoint)
        )
    if "pods" in entry:
        pods = entry["pods"] or {}
        if not isinstance(pods, Mapping):
            return None
        return (
            is_pod_endpoint(endpoint)
            and _holds(pods.get("namespaceSelector") or {}, _namespace_labels(endpoint))
            and _holds(pods.get("podSelector") or {}, _pod_labels(endpoint))
        )
    return None


def _peer_selects(
    peer: object, endpoint: Endpoint, ip: str, names: Sequence[str], local: str = ""
) -> bool | None:
    """Whether a rule's peer selects ``endpoint`` (None: a kind cpg does not know). Cilium
    scopes ``namespaces`` and ``pods`` peers to the local cluster (``local``, the subject's;
    "" when unknown): a pod of another ClusterMesh cluster is never one of them."""
    if not isinstance(peer, Mapping):
        return None
    remote = bool(local) and cluster_of(endpoint) not in ("", local)
    if remote and ("namespaces" in peer or "pods" in peer):
        return False
    if "networks" in peer:
        try:
            address = ipaddress.ip_address(ip)
            return any(
                address in ipaddress.ip_network(str(cidr), strict=False)
                for cidr in peer["networks"] or []
            )
        except ValueError:
            return False
    if "domainNames" in peer:
        wanted = {str(n).lower().rstrip(".") for n in peer["domainNames"] or []}
        return any(_domain_matches(name.lower().rstrip("."), wanted) for name in names)
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


def _protocols_match(protocols: object, flow: Flow) -> bool:
    """Whether one of a rule's protocols selects the flow's port (none listed: every
    port). A named port cannot be resolved from a flow: it selects nothing here."""
    if not protocols:
        return True
    if not isinstance(protocols, list):
        return False
    for entry in protocols:
        if not isinstance(entry, Mapping):
            continue
        for name in ("tcp", "udp", "sctp"):
            match = entry.get(name)
            if not isinstance(match, Mapping) or flow.protocol != name.upper():
                continue
            port = match.get("destinationPort")
            if not isinstance(port, Mapping):
                return True
            if "number" in port and port["number"] == flow.port:
                return True
            span = port.get("range")
            if isinstance(span, Mapping):
                try:
                    if int(span["start"]) <= flow.port <= int(span["end"]):
                        return True
                except (KeyError, TypeError, ValueError):
                    continue
    return False


def _priority(policy: Mapping[str, Any]) -> tuple[int, str]:
    spec = policy.get("spec") or {}
    try:
        priority = int(spec.get("priority", 1000))
    except (TypeError, ValueError):
        priority = 1000
    meta = policy.get("metadata") or {}
    return priority, str(meta.get("name", ""))


def _in_tier(policy: PolicyDocument, tier: str) -> bool:
    return is_cluster_network_policy(policy) and (policy.get("spec") or {}).get("tier") == tier


def _ordered(policies: list[PolicyDocument]) -> list[PolicyDocument]:
    """A tier's policies in the order they are judged: priority, then name."""
    return sorted(policies, key=_priority)


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
        section, side = "ingress", "from"
        subject, peer, ip = flow.destination, flow.source, flow.source_ip
    elif flow.direction == Direction.EGRESS:
        section, side = "egress", "to"
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
        spec = policy.get("spec") or {}
        subject_entry = spec.get("subject")
        if not isinstance(subject_entry, Mapping) or not _selects_pod(subject_entry, subject):
            continue
        for index, rule in enumerate(spec.get(section) or []):
            if not isinstance(rule, Mapping):
                continue
            action = str(rule.get("action", ""))
            if action not in (ACCEPT, DENY, PASS):
                continue
            selected = False
            for entry in rule.get(side) or []:
                found = _peer_selects(entry, peer, ip, names, cluster_of(subject))
                if found is None:  # fail closed
                    found = action != ACCEPT
                if found:
                    selected = True
                    break
            if selected and _protocols_match(rule.get("protocols"), flow):
                return TierVerdict(
                    action=action,
                    tier=tier,
                    policy=_priority(policy)[1],
                    section=section,
                    rule=index,
                    rule_name=str(rule.get("name", "")),
                )
    return None
