"""Would these CiliumNetworkPolicies allow this flow? A policy matcher for what cpg generates
and what people commonly write, so generated policies can be checked before they are applied.

The endpoint that dropped a flow is taken to enforce policy in that direction (it did). A flow
is allowed when some policy that selects the endpoint in that direction has a rule whose peer
and ports match, and no deny rule matches. The answer names the rule, or says why none did.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from cpg_core.flow import ICMPV4, ICMPV6, Direction, Endpoint, Flow
from cpg_core.labels import NAMESPACE_LABEL, reserved_names
from cpg_core.synthesis import endpoint_kind

_SOURCES = ("k8s:", "any:", "reserved:", "cidr:", "unspec:", "container:")
_POLICY_KINDS = frozenset({"CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy"})


@attrs.frozen(slots=True)
class MatchResult:
    allowed: bool
    reason: str
    """Which rule allowed it (``ns/policy ingress[2]``), or why nothing did."""
    policy: str = ""
    rule: int = -1


def _strip_source(key: str) -> str:
    for prefix in _SOURCES:
        if key.startswith(prefix):
            return key[len(prefix) :]
    return key


def endpoint_labels(endpoint: Endpoint) -> dict[str, str]:
    """The labels a selector sees: k8s labels (namespace label included) with plain keys."""
    out: dict[str, str] = {}
    for text in endpoint.labels:
        source, _, rest = text.partition(":")
        if source != "k8s":
            continue
        key, _, value = rest.partition("=")
        out[key] = value
    if endpoint.namespace:
        out.setdefault(NAMESPACE_LABEL, endpoint.namespace)
    return out


def selector_matches(
    selector: object, labels: Mapping[str, str], default_namespace: str | None
) -> bool:
    """A LabelSelector against endpoint labels. ``default_namespace`` is the implicit namespace
    of a namespaced policy's peer selector (None: no implicit namespace)."""
    if not isinstance(selector, Mapping):
        return False
    match_labels = {
        _strip_source(k): str(v) for k, v in (selector.get("matchLabels") or {}).items()
    }
    expressions = selector.get("matchExpressions") or []
    if (
        default_namespace is not None
        and NAMESPACE_LABEL not in match_labels
        and not any(
            _strip_source(str(e.get("key", ""))) == NAMESPACE_LABEL
            for e in expressions
            if isinstance(e, Mapping)
        )
    ):
        match_labels[NAMESPACE_LABEL] = default_namespace
    for key, value in match_labels.items():
        if labels.get(key) != value:
            return False
    for expr in expressions:
        if not isinstance(expr, Mapping):
            return False
        key = _strip_source(str(expr.get("key", "")))
        op = expr.get("operator")
        values = [str(v) for v in expr.get("values") or []]
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def _entities(endpoint: Endpoint) -> set[str]:
    kind = endpoint_kind(endpoint)
    names = {"all"}
    if kind.world:
        names.update({"world"})
        reserved = reserved_names(endpoint.labels)
        names.update(n for n in reserved if n in ("world-ipv4", "world-ipv6"))
    else:
        names.add("cluster")
        if kind.entity:
            names.add(kind.entity)
    return names


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _in_cidrs(ip: str, cidrs: Iterable[object]) -> bool:
    addr = _ip(ip)
    if addr is None:
        return False
    for cidr in cidrs:
        try:
            if addr in ipaddress.ip_network(str(cidr), strict=False):
                return True
        except ValueError:
            continue
    return False


def _fqdn_matches(names: Iterable[str], fqdns: Iterable[object]) -> bool:
    wanted = [n.lower().rstrip(".") for n in names]
    for entry in fqdns:
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("matchName")
        pattern = entry.get("matchPattern")
        if name and str(name).lower().rstrip(".") in wanted:
            return True
        if pattern:
            regex = fnmatch.translate(str(pattern).lower().rstrip("."))
            if any(re.match(regex, n) for n in wanted):
                return True
    return False


@attrs.frozen(slots=True)
class _Side:
    """What a rule needs to know about the flow's peer."""

    endpoint: Endpoint
    labels: dict[str, str]
    entities: frozenset[str]
    world: bool
    ip: str
    names: tuple[str, ...]


def _peer_matches(rule: Mapping[str, Any], prefix: str, peer: _Side, policy_ns: str | None) -> bool:
    """Whether a rule's L3 part selects the peer. A rule with no L3 part selects every peer."""
    keys = [prefix + "Endpoints", prefix + "Entities", prefix + "CIDR", prefix + "CIDRSet"]
    if prefix == "to":
        keys += ["toFQDNs", "toServices"]
    present = [k for k in keys if k in rule]
    if not present:
        return True
    for selector in rule.get(prefix + "Endpoints") or []:
        if not peer.world and selector_matches(selector, peer.labels, policy_ns):
            return True
    if peer.entities & set(rule.get(prefix + "Entities") or []):
        return True
    if peer.world and _in_cidrs(peer.ip, rule.get(prefix + "CIDR") or []):
        return True
    for entry in rule.get(prefix + "CIDRSet") or []:
        if not isinstance(entry, Mapping) or not peer.world:
            continue
        if _in_cidrs(peer.ip, [entry.get("cidr")]) and not _in_cidrs(
            peer.ip, entry.get("except") or []
        ):
            return True
    return prefix == "to" and peer.world and _fqdn_matches(peer.names, rule.get("toFQDNs") or [])


def _l7_matches(port_rule: Mapping[str, Any], flow: Flow) -> bool:
    rules = port_rule.get("rules")
    if not isinstance(rules, Mapping) or not rules:
        return True
    http_rules = rules.get("http")
    if http_rules and flow.l7 is not None and flow.l7.http is not None:
        method = flow.l7.http.method.upper()
        path = flow.l7.http.url.split("?", 1)[0].split("#", 1)[0]
        if "://" in path:
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        for rule in http_rules:
            if not isinstance(rule, Mapping):
                continue
            want_method = rule.get("method")
            want_path = rule.get("path")
            if want_method and not re.fullmatch(str(want_method), method):
                continue
            if want_path and not re.fullmatch(str(want_path), path or "/"):
                continue
            return True
        return False
    dns_rules = rules.get("dns")
    if dns_rules and flow.l7 is not None and flow.l7.dns is not None:
        return _fqdn_matches([flow.l7.dns.query], dns_rules)
    return True  # an L4 flow on a port with L7 rules reaches the proxy: allowed at L4


def _ports_match(rule: Mapping[str, Any], flow: Flow) -> bool:
    to_ports = rule.get("toPorts")
    icmps = rule.get("icmps")
    if not to_ports and not icmps:
        return True
    if flow.protocol in (ICMPV4, ICMPV6):
        family = "IPv4" if flow.protocol == ICMPV4 else "IPv6"
        for icmp in icmps or []:
            for field in (icmp or {}).get("fields") or []:
                if field.get("family", "IPv4") == family and str(field.get("type")) == str(
                    flow.port
                ):
                    return True
        return False
    for port_rule in to_ports or []:
        if not isinstance(port_rule, Mapping):
            continue
        ports = port_rule.get("ports") or [{}]
        for port in ports:
            proto = str(port.get("protocol") or "ANY").upper()
            if proto not in (flow.protocol, "ANY"):
                continue
            try:
                low = int(port.get("port") or 0)
                high = int(port.get("endPort") or low)
            except (TypeError, ValueError):
                continue  # a named port: cpg cannot resolve it from a flow
            if (low == 0 or low <= flow.port <= high) and _l7_matches(port_rule, flow):
                return True
    return False


def _side(endpoint: Endpoint, ip: str, names: Sequence[str]) -> _Side:
    kind = endpoint_kind(endpoint)
    return _Side(
        endpoint=endpoint,
        labels=endpoint_labels(endpoint),
        entities=frozenset(_entities(endpoint)),
        world=kind.world,
        ip=ip,
        names=tuple(names),
    )


def _policy_name(policy: Mapping[str, Any]) -> str:
    meta = policy.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '?')}"


def match_flow(
    policies: Sequence[Mapping[str, Any]],
    flow: Flow,
    ip_names: Mapping[str, Sequence[str]] | None = None,
) -> MatchResult:
    """Whether ``policies`` allow ``flow`` in its traffic direction, and by which rule."""
    if flow.direction == Direction.INGRESS:
        direction, target, target_ip, peer_ep, peer_ip, prefix = (
            "ingress",
            flow.destination,
            flow.destination_ip,
            flow.source,
            flow.source_ip,
            "from",
        )
    elif flow.direction == Direction.EGRESS:
        direction, target, target_ip, peer_ep, peer_ip, prefix = (
            "egress",
            flow.source,
            flow.source_ip,
            flow.destination,
            flow.destination_ip,
            "to",
        )
    else:
        return MatchResult(False, "the flow has no traffic direction")
    names = list(flow.destination_names if direction == "egress" else flow.source_names)
    names += list((ip_names or {}).get(peer_ip, ()))
    peer = _side(peer_ep, peer_ip, names)
    target_labels = endpoint_labels(target)
    selecting = []
    for policy in policies:
        if not isinstance(policy, Mapping) or policy.get("kind") not in _POLICY_KINDS:
            continue
        meta = policy.get("metadata") or {}
        namespace = meta.get("namespace") if policy.get("kind") == "CiliumNetworkPolicy" else None
        if namespace and namespace != target.namespace:
            continue
        specs = [policy.get("spec")] if policy.get("spec") else []
        specs += list(policy.get("specs") or [])
        for spec in specs:
            if isinstance(spec, Mapping) and selector_matches(
                spec.get("endpointSelector"), target_labels, None
            ):
                selecting.append((policy, spec, namespace))
    for policy, spec, namespace in selecting:  # deny rules win over any allow
        for index, rule in enumerate(spec.get(direction + "Deny") or []):
            if (
                isinstance(rule, Mapping)
                and _peer_matches(rule, prefix, peer, namespace)
                and _ports_match(rule, flow)
            ):
                return MatchResult(
                    False,
                    f"denied by {_policy_name(policy)} {direction}Deny[{index}]",
                    _policy_name(policy),
                    index,
                )
    peer_hit = None
    for policy, spec, namespace in selecting:
        for index, rule in enumerate(spec.get(direction) or []):
            if not isinstance(rule, Mapping) or not _peer_matches(rule, prefix, peer, namespace):
                continue
            if _ports_match(rule, flow):
                return MatchResult(
                    True,
                    f"allowed by {_policy_name(policy)} {direction}[{index}]",
                    _policy_name(policy),
                    index,
                )
            peer_hit = peer_hit or f"{_policy_name(policy)} {direction}[{index}]"
    who = f"{target.namespace}/{target.pod_name or ','.join(target.labels) or target_ip}"
    if not selecting:
        return MatchResult(False, f"no policy selects {who} for {direction}")
    traffic = f"{flow.protocol}/{flow.port}" if flow.protocol else "this traffic"
    if peer_hit:
        return MatchResult(False, f"{peer_hit} selects the peer but not {traffic}")
    return MatchResult(False, f"no {direction} rule selects the peer ({direction} {traffic})")


def dns_names(flows: Iterable[Flow]) -> dict[str, list[str]]:
    """IP → names learned from DNS responses (any verdict) in a capture."""
    out: dict[str, list[str]] = {}
    for flow in flows:
        dns = flow.l7.dns if flow.l7 is not None else None
        if dns is None or not dns.query:
            continue
        name = dns.query.rstrip(".")
        for ip in dns.ips:
            names = out.setdefault(ip, [])
            if name not in names:
                names.append(name)
    return out
