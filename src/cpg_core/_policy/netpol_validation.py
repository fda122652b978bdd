"""What the API server refuses in a Kubernetes NetworkPolicy (``networking.k8s.io/v1``): its
own validation of the spec (peers, ``ipBlock``, ports and ``endPort``, label selectors,
``policyTypes``) and the types its decoder wants, one finding per field. A NetworkPolicy the
API server refuses is never stored, so a file holding one would not apply: lint says which
field, and the review commands name it instead of judging a reading of it.

Also here: the one place where Cilium's reading of a valid NetworkPolicy changed between
releases (an ingress rule whose only peer is an ``ipBlock``; §D61)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cpg_core._base.cilium_version import Version
from cpg_core._base.labels import label_problem
from cpg_core._policy.netpol import SHOWN_AS

Found = tuple[str, str, tuple[str | int, ...]]
"""A finding: its code, message and the path of the field it is about."""

CODE = "CPG047"
_REFUSED = ": the API server refuses it"
_SPEC_FIELDS = frozenset({"podSelector", "ingress", "egress", "policyTypes"})
_PEER_FIELDS = frozenset({"podSelector", "namespaceSelector", "ipBlock"})
_PORT_FIELDS = frozenset({"protocol", "port", "endPort"})
_SELECTOR_FIELDS = frozenset({"matchLabels", "matchExpressions"})
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_PROTOCOLS = ("TCP", "UDP", "SCTP")
_PORT_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")

IPBLOCK_FIXED_SINCE: Version = (1, 20, 0)
"""The first Cilium release whose reading of an ipBlock-only ingress peer is that CIDR only
(cilium/cilium#46305; backported to 1.19 patch releases of June 2026)."""


def network_policy_refusals(policy: Mapping[str, Any]) -> list[Found]:
    """Every field of the NetworkPolicy ``policy`` the API server would refuse."""
    found: list[Found] = []
    metadata = policy.get("metadata")
    if not isinstance(metadata, Mapping):
        found.append((CODE, "metadata: a mapping with the name is required" + _REFUSED, ()))
    elif not isinstance(metadata.get("name"), str) or not metadata.get("name"):
        found.append((CODE, "metadata.name: required" + _REFUSED, ("metadata",)))
    spec = policy.get("spec")
    if not isinstance(spec, Mapping):
        return [*found, (CODE, f"spec: {_wanted('a mapping', spec)}" + _REFUSED, ("spec",))]
    found += _unknown(spec, _SPEC_FIELDS, ("spec",))
    if "podSelector" in spec:
        found += _selector(spec["podSelector"], ("spec", "podSelector"))
    for section, side in (("ingress", "from"), ("egress", "to")):
        rules = spec.get(section)
        if rules is None:
            continue
        if not isinstance(rules, list):
            found.append(
                (CODE, f"{_wanted('a list of rules', rules)}" + _REFUSED, ("spec", section))
            )
            continue
        for n, rule in enumerate(rules):
            found += _rule(rule, side, ("spec", section, n))
    found += _policy_types(spec.get("policyTypes"))
    return found


def _wanted(what: str, value: object) -> str:
    return f"must be {what}, not {_type_name(value)}"


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    return "a list" if isinstance(value, list) else "a mapping"


def _unknown(
    given: Mapping[str, Any], known: frozenset[str], path: tuple[str | int, ...]
) -> list[Found]:
    return [
        (
            CODE,
            f"unknown field {key!r}" + _REFUSED + " (kubectl's strict field check)",
            (*path, str(key)),
        )
        for key in given
        if key not in known
    ]


def _rule(rule: object, side: str, path: tuple[str | int, ...]) -> list[Found]:
    if not isinstance(rule, Mapping):
        return [(CODE, _wanted("a mapping", rule) + _REFUSED, path)]
    found = _unknown(rule, frozenset({"ports", side}), path)
    ports = rule.get("ports")
    if ports is not None:
        if not isinstance(ports, list):
            found.append((CODE, _wanted("a list", ports) + _REFUSED, (*path, "ports")))
        else:
            for n, port in enumerate(ports):
                found += _port(port, (*path, "ports", n))
    peers = rule.get(side)
    if peers is not None:
        if not isinstance(peers, list):
            found.append((CODE, _wanted("a list of peers", peers) + _REFUSED, (*path, side)))
        else:
            for n, peer in enumerate(peers):
                found += _peer(peer, (*path, side, n))
    return found


def _port(port: object, path: tuple[str | int, ...]) -> list[Found]:
    if not isinstance(port, Mapping):
        return [(CODE, _wanted("a mapping", port) + _REFUSED, path)]
    found = _unknown(port, _PORT_FIELDS, path)
    protocol = port.get("protocol")
    if protocol is not None and protocol not in _PROTOCOLS:
        found.append(
            (CODE, f"protocol {protocol!r} is not TCP, UDP or SCTP" + _REFUSED, (*path, "protocol"))
        )
    number = port.get("port")
    if number is not None:
        problem = _port_problem(number)
        if problem:
            found.append((CODE, f"port {number!r}: {problem}" + _REFUSED, (*path, "port")))
    end = port.get("endPort")
    if end is None:
        return found
    where = (*path, "endPort")
    if isinstance(end, bool) or not isinstance(end, int):
        found.append((CODE, f"endPort {_wanted('a number', end)}" + _REFUSED, where))
    elif number is None:
        found.append((CODE, "endPort without port" + _REFUSED, where))
    elif isinstance(number, bool) or not isinstance(number, int):
        found.append((CODE, "endPort with a named port" + _REFUSED, where))
    elif not 1 <= end <= 65535:
        found.append((CODE, f"endPort {end} is not 1 to 65535" + _REFUSED, where))
    elif end < number:
        found.append((CODE, f"endPort {end} is below port {number}" + _REFUSED, where))
    return found


def _port_problem(value: object) -> str:
    """Why a NetworkPolicy port (a number, or a container port's name) is refused ("")."""
    if isinstance(value, bool):
        return "a boolean is not a port"
    if isinstance(value, int):
        return "" if 1 <= value <= 65535 else "a port is 1 to 65535"
    if not isinstance(value, str):
        return _wanted("a number or a port name", value)
    if len(value) > 15 or not _PORT_NAME.fullmatch(value) or "--" in value:
        return "a port name is at most 15 lowercase letters, digits and inner dashes"
    if not any(c.isalpha() for c in value):
        return "a port name needs a letter (write a number unquoted)"
    return ""


def _peer(peer: object, path: tuple[str | int, ...]) -> list[Found]:
    if not isinstance(peer, Mapping):
        return [(CODE, _wanted("a mapping", peer) + _REFUSED, path)]
    found = _unknown(peer, _PEER_FIELDS, path)
    given = [
        key for key in ("podSelector", "namespaceSelector", "ipBlock") if peer.get(key) is not None
    ]
    if not given:
        found.append(
            (
                CODE,
                "a peer names nothing (podSelector, namespaceSelector or ipBlock)" + _REFUSED,
                path,
            )
        )
    elif "ipBlock" in given and len(given) > 1:
        found.append(
            (CODE, "ipBlock beside a podSelector or namespaceSelector in one peer" + _REFUSED, path)
        )
    for key in ("podSelector", "namespaceSelector"):
        if key in given:
            found += _selector(peer[key], (*path, key))
    if "ipBlock" in given:
        found += _ip_block(peer["ipBlock"], (*path, "ipBlock"))
    return found


def _ip_block(block: object, path: tuple[str | int, ...]) -> list[Found]:
    if not isinstance(block, Mapping):
        return [(CODE, _wanted("a mapping", block) + _REFUSED, path)]
    found = _unknown(block, frozenset({"cidr", "except"}), path)
    outer = _network(block.get("cidr"))
    if outer is None:
        found.append(
            (CODE, f"cidr {block.get('cidr')!r} is not a CIDR" + _REFUSED, (*path, "cidr"))
        )
    excepts = block.get("except")
    if excepts is None:
        return found
    if not isinstance(excepts, list):
        return [*found, (CODE, _wanted("a list", excepts) + _REFUSED, (*path, "except"))]
    for n, text in enumerate(excepts):
        inner = _network(text)
        where = (*path, "except", n)
        if inner is None:
            found.append((CODE, f"except {text!r} is not a CIDR" + _REFUSED, where))
        elif outer is not None and not (
            inner.version == outer.version
            and inner.prefixlen > outer.prefixlen
            and inner.network_address in outer
        ):
            found.append(
                (
                    CODE,
                    f"except {text} is not strictly inside cidr {block.get('cidr')}" + _REFUSED,
                    where,
                )
            )
    return found


def _network(text: object) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    if not isinstance(text, str) or "/" not in text:
        return None
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def _selector(selector: object, path: tuple[str | int, ...]) -> list[Found]:
    """Kubernetes' label selector validation."""
    if selector is None:
        return []
    if not isinstance(selector, Mapping):
        return [(CODE, _wanted("a label selector (a mapping)", selector) + _REFUSED, path)]
    found = _unknown(selector, _SELECTOR_FIELDS, path)
    labels = selector.get("matchLabels")
    if labels is not None and not isinstance(labels, Mapping):
        found.append((CODE, _wanted("a mapping", labels) + _REFUSED, (*path, "matchLabels")))
    elif labels is not None:
        for key, value in labels.items():
            where = (*path, "matchLabels", str(key))
            if not isinstance(value, str):
                found.append(
                    (CODE, f"the value of {key} {_wanted('a text', value)}" + _REFUSED, where)
                )
                continue
            problem = label_problem(str(key), value)
            if problem:
                found.append(("CPG003", problem, where))
    expressions = selector.get("matchExpressions")
    if expressions is not None and not isinstance(expressions, list):
        found.append((CODE, _wanted("a list", expressions) + _REFUSED, (*path, "matchExpressions")))
    elif expressions is not None:
        for n, term in enumerate(expressions):
            found += _expression(term, (*path, "matchExpressions", n))
    return found


def _expression(term: object, path: tuple[str | int, ...]) -> list[Found]:
    if not isinstance(term, Mapping):
        return [(CODE, _wanted("a mapping", term) + _REFUSED, path)]
    found = _unknown(term, frozenset({"key", "operator", "values"}), path)
    key, operator, values = term.get("key"), term.get("operator"), term.get("values")
    if not isinstance(key, str) or not key:
        found.append((CODE, "key: required" + _REFUSED, (*path, "key")))
    else:
        problem = label_problem(key, "")
        if problem:
            found.append(("CPG003", problem, (*path, "key")))
    if operator not in _OPERATORS:
        found.append(
            (
                CODE,
                f"operator {operator!r} is not In, NotIn, Exists or DoesNotExist" + _REFUSED,
                (*path, "operator"),
            )
        )
    if values is not None and not isinstance(values, list):
        return [*found, (CODE, _wanted("a list", values) + _REFUSED, (*path, "values"))]
    values = values or []
    if operator in ("In", "NotIn") and not values:
        found.append(("CPG016", f"operator {operator} needs values" + _REFUSED, (*path, "values")))
    if operator in ("Exists", "DoesNotExist") and values:
        found.append(
            ("CPG016", f"operator {operator} takes no values" + _REFUSED, (*path, "values"))
        )
    for n, value in enumerate(values):
        where = (*path, "values", n)
        if not isinstance(value, str):
            found.append((CODE, _wanted("a text", value) + _REFUSED, where))
            continue
        problem = label_problem("key", value)
        if problem:
            found.append(("CPG003", problem, where))
    return found


def _policy_types(types: object) -> list[Found]:
    path: tuple[str | int, ...] = ("spec", "policyTypes")
    if types is None:
        return []
    if not isinstance(types, list):
        return [(CODE, _wanted("a list", types) + _REFUSED, path)]
    found: list[Found] = []
    for n, value in enumerate(types):
        if value not in ("Ingress", "Egress"):
            found.append(
                (CODE, f"policy type {value!r} is not Ingress or Egress" + _REFUSED, (*path, n))
            )
    if len(types) > 2:
        found.append((CODE, "more than two policyTypes" + _REFUSED, path))
    return found


def ipblock_only_ingress(policy: Mapping[str, Any]) -> list[tuple[str | int, ...]]:
    """The ingress peers of the NetworkPolicy ``policy`` that are an ``ipBlock`` alone: read
    as that CIDR only since the fix of cilium/cilium#46305; earlier releases, on agents with
    a cluster name, also admitted every pod of the policy's namespace there."""
    spec = policy.get("spec")
    rules = spec.get("ingress") if isinstance(spec, Mapping) else None
    found: list[tuple[str | int, ...]] = []
    for n, rule in enumerate(rules if isinstance(rules, list) else []):
        peers = rule.get("from") if isinstance(rule, Mapping) else None
        for m, peer in enumerate(peers if isinstance(peers, list) else []):
            if (
                isinstance(peer, Mapping)
                and peer.get("ipBlock") is not None
                and peer.get("podSelector") is None
                and peer.get("namespaceSelector") is None
            ):
                found.append(("spec", "ingress", n, "from", m, "ipBlock"))
    return found


def _read_with_ipblock_ingress(policy: Mapping[str, Any]) -> bool:
    """A NetworkPolicy as cpg reads it (the Cilium policy Cilium makes of it) with an ingress
    rule that is an ipBlock alone (a CIDR set)."""
    meta = policy.get("metadata")
    if not isinstance(meta, Mapping) or not str(meta.get("name", "")).endswith(SHOWN_AS):
        return False
    spec = policy.get("spec")
    rules = spec.get("ingress") if isinstance(spec, Mapping) else None
    return any(
        isinstance(rule, Mapping) and rule.get("fromCIDRSet")
        for rule in (rules if isinstance(rules, list) else [])
    )


def ipblock_release_note(policies: Sequence[Mapping[str, Any]], version: Version) -> str:
    """What an agent older than the fix reads differently in ``policies`` (NetworkPolicies
    as written, or as cpg reads them), or ""."""
    if version >= IPBLOCK_FIXED_SINCE:
        return ""
    names = []
    for policy in policies:
        if ipblock_only_ingress(policy) or _read_with_ipblock_ingress(policy):
            meta = policy.get("metadata")
            meta = meta if isinstance(meta, Mapping) else {}
            name = str(meta.get("name", "?")).removesuffix(SHOWN_AS)
            names.append(f"{meta.get('namespace', 'default')}/{name}")
    if not names:
        return ""
    shown = ", ".join(sorted(names)[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"NetworkPolicy {shown}: an ingress peer that is an ipBlock alone is judged as that CIDR "
        "only, as Cilium 1.20 reads it (and 1.19 patch releases with the fix of "
        "cilium/cilium#46305); an older agent with a cluster name set also admits every pod of "
        "the policy's namespace there"
    )


__all__ = [
    "IPBLOCK_FIXED_SINCE",
    "ipblock_only_ingress",
    "ipblock_release_note",
    "network_policy_refusals",
]
