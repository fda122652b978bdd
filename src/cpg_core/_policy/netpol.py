"""Kubernetes NetworkPolicies as Cilium enforces them (ARCHITECTURE §D48): Cilium turns each
into rules of its own, so the one matcher reads one as the CiliumNetworkPolicy that means
the same, Cilium's way (its ``ParseNetworkPolicy``):

- ``podSelector`` selects pods of the policy's namespace (``{}``: all of them);
- each ``policyTypes`` direction is default-deny, rules or none (``policyTypes`` left out:
  Ingress, and Egress when the policy has egress rules);
- a rule without ``from``/``to`` admits every peer (``fromEntities: [all]``): outside the
  cluster too;
- a peer's ``podSelector`` alone selects the policy's namespace, a ``namespaceSelector``
  selects by the namespace's labels (``{}``: every namespace; ``kubernetes.io/metadata.name``
  is the namespace itself); an ``ipBlock`` is a CIDR set, which, as in Cilium, never selects a
  pod Cilium manages;
- ``ports`` with ``port``, ``endPort`` and ``protocol`` (TCP when left out); a named port
  cannot be resolved from a flow and admits nothing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cpg_core._base.labels import NAMESPACE_LABEL, NAMESPACE_LABELS_PREFIX

KIND = "NetworkPolicy"
API_GROUP = "networking.k8s.io/"
SHOWN_AS = " (NetworkPolicy)"
"""The suffix a translated policy's name carries, so every answer says what it came from."""
_NAME_KEY = "kubernetes.io/metadata.name"


def is_network_policy(doc: Mapping[str, Any]) -> bool:
    return doc.get("kind") == KIND and str(doc.get("apiVersion") or "").startswith(API_GROUP)


def as_cilium(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The CiliumNetworkPolicy that means what the NetworkPolicy ``doc`` means to Cilium
    (its name marked so). Parts of an unexpected shape are read as selecting nothing."""
    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
    assert isinstance(metadata, Mapping)
    namespace = str(metadata.get("namespace") or "default")
    spec = doc.get("spec") if isinstance(doc.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    types = spec.get("policyTypes")
    if not isinstance(types, list):
        types = ["Ingress", *(["Egress"] if spec.get("egress") else [])]
    translated: dict[str, Any] = {"endpointSelector": _selector(spec.get("podSelector"))}
    for kind, section, side in (("Ingress", "ingress", "from"), ("Egress", "egress", "to")):
        if kind not in types:
            continue
        rules = []
        for rule in spec.get(section) or []:
            if not isinstance(rule, Mapping):
                continue
            ports = _ports(rule.get("ports"))
            peers = rule.get(side)
            if not peers:
                rules.append({f"{side}Entities": ["all"], **ports})
                continue
            for peer in peers if isinstance(peers, list) else []:
                found = _peer(peer, side)
                if found is not None:
                    rules.append({**found, **ports})
        translated[section] = rules or [{}]  # no rule: that direction is default-deny
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": f"{metadata.get('name', '?')}{SHOWN_AS}", "namespace": namespace},
        "spec": translated,
    }


def _selector(value: object) -> dict[str, Any]:
    """A Kubernetes label selector as an endpoint selector (unchanged keys: pod labels)."""
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, Any] = {}
    if isinstance(value.get("matchLabels"), Mapping) and value["matchLabels"]:
        out["matchLabels"] = {str(k): str(v) for k, v in value["matchLabels"].items()}
    if isinstance(value.get("matchExpressions"), list) and value["matchExpressions"]:
        out["matchExpressions"] = list(value["matchExpressions"])
    return out


def _namespace_key(key: str) -> str:
    return NAMESPACE_LABEL if key == _NAME_KEY else NAMESPACE_LABELS_PREFIX + key


def _peer(peer: object, side: str) -> dict[str, Any] | None:
    if not isinstance(peer, Mapping):
        return None
    block = peer.get("ipBlock")
    if isinstance(block, Mapping):
        entry: dict[str, Any] = {"cidr": str(block.get("cidr", ""))}
        if block.get("except"):
            entry["except"] = [str(c) for c in block["except"]]
        return {f"{side}CIDRSet": [entry]}
    selector = _selector(peer.get("podSelector"))
    namespaces = peer.get("namespaceSelector")
    if isinstance(namespaces, Mapping):
        labels = dict(selector.get("matchLabels") or {})
        expressions = list(selector.get("matchExpressions") or [])
        required = 0
        for key, value in (namespaces.get("matchLabels") or {}).items():
            labels[_namespace_key(str(key))] = str(value)
            required += 1
        for expression in namespaces.get("matchExpressions") or []:
            if isinstance(expression, Mapping):
                expressions.append(
                    {**expression, "key": _namespace_key(str(expression.get("key", "")))}
                )
                required += 1
        if not required:  # namespaceSelector {}: every namespace
            expressions.append({"key": NAMESPACE_LABEL, "operator": "Exists"})
        selector = {}
        if labels:
            selector["matchLabels"] = labels
        if expressions:
            selector["matchExpressions"] = expressions
    elif "podSelector" not in peer:
        return None  # a peer of a kind this reading does not know selects nothing
    return {f"{side}Endpoints": [selector]}


def _ports(value: object) -> dict[str, Any]:
    if not isinstance(value, list) or not value:
        return {}
    ports = []
    for entry in value:
        if not isinstance(entry, Mapping):
            continue
        port: dict[str, Any] = {
            "port": str(entry.get("port") if entry.get("port") is not None else 0),
            "protocol": str(entry.get("protocol") or "TCP"),
        }
        if entry.get("endPort") is not None:
            port["endPort"] = entry["endPort"]
        ports.append(port)
    return {"toPorts": [{"ports": ports}]} if ports else {}
