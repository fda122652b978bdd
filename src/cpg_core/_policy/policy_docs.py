"""What a YAML document holds in Cilium's terms: its CiliumNetworkPolicy,
CiliumClusterwideNetworkPolicy and Kubernetes ClusterNetworkPolicy documents (which Cilium
reads from 1.20) and Kubernetes NetworkPolicies (read as the Cilium policy Cilium makes of
each; a ``kind: List`` included), each checked to have the
types Cilium's CRD gives the parts cpg reads, so that a policy folder from an untrusted pull
request is named field by field instead of crashing a matcher."""

from __future__ import annotations

from typing import Any

from cpg_core._base.errors import CpgError
from cpg_core._policy.netpol import as_cilium, is_network_policy
from cpg_core._policy.netpol_validation import network_policy_refusals

_KINDS = frozenset({"CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy"})


class PolicyShapeProblem(CpgError, ValueError):
    """A document that is not shaped as a Cilium policy (or a list of them) should be; the
    message names the field."""


def policies_in(doc: object, where: str = "") -> list[dict[str, Any]]:
    """The Cilium policies of one YAML document: itself, or the items of a ``kind: List``
    (as ``kubectl get cnp,ccnp -A -o yaml`` writes). _Shape names a field of the wrong type."""
    if not isinstance(doc, dict):
        return []
    kind = doc.get("kind")
    if kind is None:
        return []
    if not isinstance(kind, str):
        raise PolicyShapeProblem(f"{where}kind: expected a string, got {type(kind).__name__}")
    if kind in _KINDS:
        _check_policy(doc, where)
        return [doc]
    if is_network_policy(doc):  # as Cilium enforces it: a policy of its own (§D48)
        if not isinstance(doc.get("metadata"), dict) or not isinstance(doc.get("spec"), dict):
            raise PolicyShapeProblem(f"{where}: a NetworkPolicy needs metadata and spec")
        _check_network_policy(doc, where)
        translated = as_cilium(doc)
        _check_policy(translated, where)
        return [translated]
    if kind == "ClusterNetworkPolicy" and str(doc.get("apiVersion") or "").startswith(
        "policy.networking.k8s.io/"
    ):
        _check_cluster_network_policy(doc, where)
        return [doc]
    if kind.endswith("List"):
        items = doc.get("items")
        if items is None:
            return []
        if not isinstance(items, list):
            raise PolicyShapeProblem(f"{where}items: expected a list, got {type(items).__name__}")
        return [
            policy
            for index, entry in enumerate(items)
            for policy in policies_in(entry, f"{where}items[{index}].")
        ]
    return []


def _check_network_policy(doc: dict[str, Any], where: str) -> None:
    """A NetworkPolicy the API server would refuse is never enforced: named by its first
    refused field, not judged as a reading of it."""
    refused = network_policy_refusals(doc)
    if not refused:
        return
    _code, message, path = refused[0]
    field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    more = f" (and {len(refused) - 1} more: cpg lint names each)" if len(refused) > 1 else ""
    meta = doc.get("metadata") or {}
    named = (
        f"NetworkPolicy {meta.get('namespace', 'default')}/{meta.get('name', '?')} "
        if not where
        else ""
    )
    raise PolicyShapeProblem(f"{where}{named}{field}: {message}{more}")


def _check_policy(doc: dict[str, Any], where: str) -> None:
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict):
        raise PolicyShapeProblem(
            f"{where}metadata: expected a mapping, got {type(metadata).__name__}"
        )
    for key in ("name", "namespace"):
        value = metadata.get(key)
        if value is not None and not isinstance(value, str):
            raise PolicyShapeProblem(
                f"{where}metadata.{key}: expected a string, got {type(value).__name__}"
            )
    if not isinstance(metadata.get("name"), str):
        raise PolicyShapeProblem(f"{where}metadata.name: missing")
    spec, specs = doc.get("spec"), doc.get("specs")
    if spec is not None:
        _check_spec(spec, f"{where}spec")
    if specs is not None:
        for index, item in enumerate(_list_of(specs, f"{where}specs")):
            _check_spec(item, f"{where}specs[{index}]")


def _check_cluster_network_policy(doc: dict[str, Any], where: str) -> None:
    """A Kubernetes ClusterNetworkPolicy: the parts the matcher reads, typed."""
    metadata = _mapping(doc.get("metadata"), f"{where}metadata")
    if not isinstance(metadata.get("name"), str):
        raise PolicyShapeProblem(f"{where}metadata.name: missing")
    spec = _mapping(doc.get("spec"), f"{where}spec")
    _mapping(spec.get("subject"), f"{where}spec.subject")
    for section, side in (("ingress", "from"), ("egress", "to")):
        for index, rule in enumerate(_list_of(spec.get(section) or [], f"{where}spec.{section}")):
            rule = _mapping(rule, f"{where}spec.{section}[{index}]")
            _list_of(rule.get(side) or [], f"{where}spec.{section}[{index}].{side}")
            _list_of(rule.get("protocols") or [], f"{where}spec.{section}[{index}].protocols")


_RULE_LISTS = ("ingress", "egress", "ingressDeny", "egressDeny")
_SELECTOR_LISTS = ("fromEndpoints", "toEndpoints", "fromRequires", "toRequires")
_STRING_LISTS = ("fromEntities", "toEntities", "fromCIDR", "toCIDR")
_MAPPING_LISTS = ("fromCIDRSet", "toCIDRSet", "toFQDNs", "toServices", "icmps", "toGroups")


def _mapping(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PolicyShapeProblem(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _list_of(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise PolicyShapeProblem(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _check_selector(value: object, where: str) -> None:
    selector = _mapping(value, where)
    labels = selector.get("matchLabels")
    if labels is not None:
        for key, item in _mapping(labels, f"{where}.matchLabels").items():
            if not isinstance(key, str) or not isinstance(item, str | int | float | bool):
                raise PolicyShapeProblem(f"{where}.matchLabels.{key}: expected a string")
    expressions = selector.get("matchExpressions")
    if expressions is not None:
        for index, item in enumerate(_list_of(expressions, f"{where}.matchExpressions")):
            _mapping(item, f"{where}.matchExpressions[{index}]")


def _check_spec(value: object, where: str) -> None:
    """The parts of a policy spec cpg reads have the types Cilium's CRD gives them."""
    spec = _mapping(value, where)
    for key in ("endpointSelector", "nodeSelector"):
        if spec.get(key) is not None:
            _check_selector(spec[key], f"{where}.{key}")
    for direction in _RULE_LISTS:
        if spec.get(direction) is None:
            continue
        for index, rule in enumerate(_list_of(spec[direction], f"{where}.{direction}")):
            _check_rule(rule, f"{where}.{direction}[{index}]")


def _check_rule(value: object, here: str) -> None:
    rule = _mapping(value, here)
    for key in _SELECTOR_LISTS:
        if rule.get(key) is not None:
            for n, item in enumerate(_list_of(rule[key], f"{here}.{key}")):
                _check_selector(item, f"{here}.{key}[{n}]")
    for key in _STRING_LISTS:
        if rule.get(key) is not None and not all(
            isinstance(item, str) for item in _list_of(rule[key], f"{here}.{key}")
        ):
            raise PolicyShapeProblem(f"{here}.{key}: expected a list of strings")
    for key in _MAPPING_LISTS:
        if rule.get(key) is not None:
            for n, item in enumerate(_list_of(rule[key], f"{here}.{key}")):
                _mapping(item, f"{here}.{key}[{n}]")
    if rule.get("toPorts") is not None:
        for n, port_rule in enumerate(_list_of(rule["toPorts"], f"{here}.toPorts")):
            _check_port_rule(port_rule, f"{here}.toPorts[{n}]")


def _check_port_rule(value: object, here: str) -> None:
    port_rule = _mapping(value, here)
    if port_rule.get("ports") is not None:
        for m, port in enumerate(_list_of(port_rule["ports"], f"{here}.ports")):
            _mapping(port, f"{here}.ports[{m}]")
    if port_rule.get("rules") is not None:
        _mapping(port_rule["rules"], f"{here}.rules")
