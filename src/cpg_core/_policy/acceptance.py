"""What Cilium refuses beyond its CRD schema: the checks its policy validator and ``Parse``
(``Rule.Validate``) apply when a CiliumNetworkPolicy is created. Each refusal is a lint
finding with a code of its own, so that ``cpg lint`` errs exactly when Cilium would refuse
the document (ARCHITECTURE §D39). Pure: a policy document in, (code, message, path) out."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from cpg_core._policy.model import (
    ICMP_TYPE_NAMES,
    SECTIONS_BY_DIRECTION,
    CidrEntry,
    IcmpField,
    PortEntry,
    PortRule,
    Rule,
    Selector,
    Spec,
    _seq,
    label_key,
    written_specs,
)
from cpg_core._policy.port_text import cilium_port

Found = tuple[str, str, tuple[str | int, ...]]

_INGRESS_PEERS = (
    "fromEndpoints",
    "fromCIDR",
    "fromCIDRSet",
    "fromEntities",
    "fromNodes",
    "fromGroups",
)
_EGRESS_PEERS = (
    "toEndpoints",
    "toCIDR",
    "toCIDRSet",
    "toEntities",
    "toServices",
    "toGroups",
    "toNodes",
)
_SECTIONS = SECTIONS_BY_DIRECTION
_NO_PORTS = frozenset({"VRRP", "IGMP"})
"""Protocols without transport ports: a port other than 0 is refused."""


def refusals(policy: Mapping[str, Any]) -> list[Found]:
    """Every reason Cilium would refuse ``policy`` that its CRD schema does not catch."""
    found: list[Found] = []
    if "description" in policy:
        found.append(
            (
                "CPG014",
                "a top-level description: Cilium refuses it (it belongs in spec.description)",
                ("description",),
            )
        )
    specs = written_specs(policy)
    if not specs and not isinstance(policy.get("specs"), list):  # specs: [] is accepted
        found.append(
            ("CPG015", "the policy has no spec (nor specs): Cilium refuses an empty policy", ())
        )
    namespaced = policy.get("kind") == "CiliumNetworkPolicy"
    for spec in specs:
        found += _spec_refusals(spec, namespaced)
    return found


def _spec_refusals(spec: Spec, namespaced: bool) -> list[Found]:
    found: list[Found] = []
    if not any(spec.written_rules(section) for section in SECTIONS_BY_DIRECTION):
        found.append(
            (
                "CPG015",
                "the spec has no rule: Cilium needs at least one of ingress, ingressDeny, "
                "egress, egressDeny",
                spec.path,
            )
        )
    subject, node = spec.subject, spec.node_subject
    if namespaced and subject is not None and _has_key(subject, "reserved", "init"):
        found.append(
            (
                "CPG024",
                "a CiliumNetworkPolicy selecting reserved:init: Cilium refuses it (only a "
                "clusterwide policy may police initializing endpoints)",
                subject.path,
            )
        )
    if namespaced and node is not None:
        found.append(
            (
                "CPG029",
                "a CiliumNetworkPolicy with nodeSelector: Cilium refuses it (a host policy "
                "must be a CiliumClusterwideNetworkPolicy)",
                node.path,
            )
        )
    for selector in (subject, node):
        found += _selector_refusals(selector)
    host = node is not None and isinstance(node.written, Mapping)
    for section in SECTIONS_BY_DIRECTION:
        for rule in spec.rules(section):
            found += _rule_refusals(rule, host)
    return found


def _has_key(selector: Selector, source: str, key: str) -> bool:
    keys = [str(k) for k, _ in selector.labels_written]
    keys += [str(e.get("key", "")) for e in selector.expressions_written if isinstance(e, Mapping)]
    return any(label_key(k) == (source, key) for k in keys)


def _selector_refusals(selector: Selector | None) -> list[Found]:
    """Kubernetes' label-selector validation, which Cilium applies to every selector."""
    if selector is None:
        return []
    found: list[Found] = []
    for n, expression in enumerate(selector.expressions_written):
        if not isinstance(expression, Mapping):
            continue
        op, values = expression.get("operator"), _seq(expression.get("values"))
        where = (*selector.path, "matchExpressions", n, "values")
        if op in ("In", "NotIn") and not values:
            found.append(("CPG016", f"operator {op} needs values: Cilium refuses it", where))
        if op in ("Exists", "DoesNotExist") and values:
            found.append(("CPG016", f"operator {op} takes no values: Cilium refuses it", where))
    return found


def _rule_refusals(rule: Rule, host: bool) -> list[Found]:
    found = _peer_refusals(rule)
    for entry in rule.cidr_sets_written:
        found += _cidr_set_refusals(entry)
    for selector in (*rule.endpoints_both_sides, *rule.requires_both_sides):
        found += _selector_refusals(selector)
    for port_rule in rule.port_rules:
        found += _port_rule_refusals(port_rule, rule.section, host)
    return found + _icmp_refusals(rule)


def _peer_refusals(rule: Rule) -> list[Found]:
    """Peers Cilium refuses together, or without an agent option; ICMP beside ports."""
    found: list[Found] = []
    peers = list(_INGRESS_PEERS if rule.side == "from" else _EGRESS_PEERS)
    if rule.section == "egress":
        peers.append("toFQDNs")
    written = rule.written
    present = [key for key in peers if isinstance(written.get(key), list) and written.get(key)]
    if len(present) > 1:
        found.append(
            (
                "CPG017",
                f"{present[0]} and {present[1]} in one rule: Cilium refuses the combination",
                (*rule.path, present[1]),
            )
        )
    for key in ("fromNodes", "toNodes"):
        if written.get(key):
            found.append(
                (
                    "CPG026",
                    f"{key}: Cilium refuses node selectors unless its agents run with "
                    "enable-node-selector-labels",
                    (*rule.path, key),
                )
            )
    if rule.has_icmps and rule.has_ports:
        found.append(
            (
                "CPG018",
                "toPorts and icmps in one rule: Cilium refuses it (ICMP types go in a rule "
                "of their own)",
                (*rule.path, "icmps"),
            )
        )
    return found


def _icmp_refusals(rule: Rule) -> list[Found]:
    found: list[Found] = []
    for field in rule.icmps:
        raw = field.type_written
        if isinstance(raw, int) and not isinstance(raw, bool) and not 0 <= raw <= 255:
            found.append(
                (
                    "CPG025",
                    f"ICMP type {raw} is out of range: a type is 0 to 255 (the schema checks "
                    "only a type written as text)",
                    field.path,
                )
            )
        elif _icmp_name_refused(field):
            found.append(
                (
                    "CPG025",
                    f"ICMP type {raw} is not a type of {field.family_written or 'IPv4'}: Cilium "
                    "refuses it",
                    field.path,
                )
            )
    return found


def _icmp_name_refused(field: IcmpField) -> bool:
    raw = field.type_written
    family = str(field.family_written or "IPv4")
    if not isinstance(raw, str) or raw.isdigit() or family not in ICMP_TYPE_NAMES:
        return False  # numbers and families are the schema's to check
    return raw not in ICMP_TYPE_NAMES[family]


def _prefix(text: object) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        if isinstance(text, str) and "/" in text:
            return ipaddress.ip_network(text, strict=False)
    except ValueError:
        pass
    return None


def _cidr_set_refusals(entry: CidrEntry) -> list[Found]:
    outer = _prefix(entry.cidr)
    if outer is None:
        return []  # no cidr (a group reference) or one the schema's cidr format names
    found: list[Found] = []
    for n, text in enumerate(entry.excepts):
        inner = _prefix(text)
        if inner is None:
            continue
        if (
            inner.version != outer.version
            or inner.prefixlen < outer.prefixlen
            or inner.network_address not in outer
        ):
            found.append(
                (
                    "CPG019",
                    f"except {text} is not inside {entry.cidr}: Cilium refuses it",
                    (*entry.path[:-1], "except", n),
                )
            )
    return found


def _port_rule_refusals(port_rule: PortRule, section: str, host: bool) -> list[Found]:
    """The port entries Cilium refuses, given the L7 rules beside them (an allow rule's),
    L7 rules where it refuses them, and HTTP rules whose patterns Go's regexp refuses."""
    allow = section in ("ingress", "egress")
    http, dns = allow and port_rule.has_http, allow and port_rule.has_dns
    found = [
        (c, t, port.path) for port in port_rule.ports for c, t in _port_refusals(port, http, dns)
    ]
    found += _l7_placement_refusals(port_rule, section, host)
    for rule in port_rule.http if allow else ():
        for key, value in (
            ("path", rule.written.get("path")),
            ("method", rule.written.get("method")),
        ):
            problem = regex_problem(value)
            if problem:
                found.append(("CPG022", f"{key} {value!r}: {problem}", (*rule.at, key)))
    return found


def _l7_placement_refusals(port_rule: PortRule, section: str, host: bool) -> list[Found]:
    """L7 rules, listeners and server names where Cilium refuses them."""
    allow, ingress = section in ("ingress", "egress"), section.startswith("ingress")
    http, dns = allow and port_rule.has_http, allow and port_rule.has_dns
    written = port_rule.written
    where = (*port_rule.path, "rules")
    placed = (
        (dns and ingress, "DNS rules on ingress: Cilium refuses them", (*where, "dns")),
        (dns and not port_rule.ports, "DNS rules need port 53 given: Cilium refuses them", where),
        (host and http, "HTTP rules in a host policy (nodeSelector): Cilium refuses them", where),
        (host and dns and ingress, "L7 rules on host ingress: Cilium refuses them", where),
        (
            written.get("serverNames") and (http or dns) and not written.get("terminatingTLS"),
            "serverNames with L7 rules but no terminatingTLS: Cilium refuses it",
            (*port_rule.path, "serverNames"),
        ),
        (
            written.get("listener") and ingress,
            "a listener on ingress: Cilium refuses it",
            (*port_rule.path, "listener"),
        ),
        (
            written.get("listener") and (http or dns),
            "a listener with L7 rules: Cilium refuses it",
            (*port_rule.path, "listener"),
        ),
    )
    return [("CPG021", text, path) for refused, text, path in placed if refused]


def _port_refusals(port: PortEntry, http: bool, dns: bool) -> list[tuple[str, str]]:
    """What Cilium refuses in one port entry, given the L7 rules beside it."""
    text = "" if port.port_written is None else str(port.port_written)
    protocol = str(port.protocol_written or "")
    if not text:
        return [("CPG020", "a port entry without port: Cilium refuses it")]
    number = cilium_port(text)  # Cilium tries a number first, then a name
    if number is None:
        return []  # a named port, or one CPG009 names (out of range, not a number)
    found: list[tuple[str, str]] = []
    if protocol in _NO_PORTS and number != 0:
        found.append(("CPG020", f"{protocol} has no ports: Cilium refuses port {text} (use 0)"))
    end = port.end_written
    if dns and isinstance(end, int) and end > number:
        found.append(("CPG021", "DNS rules on a port range: Cilium refuses them"))
    if (http or dns) and number == 0:
        found.append(("CPG021", "L7 rules on port 0 (every port): Cilium refuses them"))
    if http and protocol != "TCP":
        shown = protocol or "no protocol"
        found.append(
            (
                "CPG021",
                f"HTTP rules on {shown}: Cilium applies L7 rules to TCP only (give protocol: TCP)",
            )
        )
    return found


_UNSUPPORTED = (
    (re.compile(r"\(\?<?[=!]"), "lookaround assertions"),
    (re.compile(r"\\[1-9]|\(\?P="), "backreferences"),
    (re.compile(r"\(\?>"), "atomic groups"),
    (re.compile(r"\(\?\("), "conditionals"),
    (re.compile(r"[*+?}][+]"), "possessive quantifiers"),
)


def regex_problem(pattern: object) -> str:
    """Why Go's regexp (RE2), which Cilium compiles HTTP rules with, refuses ``pattern``;
    "" when it compiles. Python's re stands in for the syntax they share; what RE2 lacks
    (lookarounds, backreferences, …) and repetitions over 1000 are refused as RE2 does."""
    if not isinstance(pattern, str) or not pattern:
        return ""
    for shape, what in _UNSUPPORTED:
        if shape.search(pattern):
            return f"not a Go regular expression ({what} are not RE2)"
    for match in re.finditer(r"\{(\d+)(?:,(\d*))?\}", pattern):
        if any(int(n) > 1000 for n in match.groups() if n):
            return "not a Go regular expression (a repetition count above 1000)"
    translated = re.sub(r"\\[pP](\{[^}]*\}|[A-Za-z])", ".", pattern).replace(r"\z", r"\Z")
    translated = re.sub(r"\(\?<(?![=!])", "(?P<", translated)
    try:
        re.compile(translated)
    except re.error as exc:
        return f"not a regular expression ({exc})"
    return ""
