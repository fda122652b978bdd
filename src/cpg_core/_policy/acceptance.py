"""What Cilium refuses beyond its CRD schema: the checks its policy validator and ``Parse``
(``Rule.Validate``) apply when a CiliumNetworkPolicy is created. Each refusal is a lint
finding with a code of its own, so that ``cpg lint`` errs exactly when Cilium would refuse
the document (ARCHITECTURE §D39). Pure: a policy document in, (code, message, path) out."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cpg_core._policy.model import ICMP_TYPE_NAMES, _seq, label_key
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
_SECTIONS = ("ingress", "ingressDeny", "egress", "egressDeny")
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
    specs: list[tuple[tuple[str | int, ...], Mapping[str, Any]]] = []
    if isinstance(policy.get("spec"), Mapping):
        specs.append((("spec",), policy["spec"]))
    if isinstance(policy.get("specs"), list):
        specs += [
            (("specs", n), s) for n, s in enumerate(policy["specs"]) if isinstance(s, Mapping)
        ]
    if not specs and not isinstance(policy.get("specs"), list):  # specs: [] is accepted
        found.append(
            ("CPG015", "the policy has no spec (nor specs): Cilium refuses an empty policy", ())
        )
    namespaced = policy.get("kind") == "CiliumNetworkPolicy"
    for path, spec in specs:
        found += [(c, m, (*path, *p)) for c, m, p in _spec_refusals(spec, namespaced)]
    return found


def _spec_refusals(spec: Mapping[str, Any], namespaced: bool) -> list[Found]:
    found: list[Found] = []
    if not any(isinstance(spec.get(s), list) and spec.get(s) for s in _SECTIONS):
        found.append(
            (
                "CPG015",
                "the spec has no rule: Cilium needs at least one of ingress, ingressDeny, "
                "egress, egressDeny",
                (),
            )
        )
    selector = spec.get("endpointSelector")
    if namespaced and isinstance(selector, Mapping) and _has_key(selector, "reserved", "init"):
        found.append(
            (
                "CPG024",
                "a CiliumNetworkPolicy selecting reserved:init: Cilium refuses it (only a "
                "clusterwide policy may police initializing endpoints)",
                ("endpointSelector",),
            )
        )
    host = isinstance(spec.get("nodeSelector"), Mapping)
    if namespaced and spec.get("nodeSelector") is not None:
        found.append(
            (
                "CPG029",
                "a CiliumNetworkPolicy with nodeSelector: Cilium refuses it (a host policy "
                "must be a CiliumClusterwideNetworkPolicy)",
                ("nodeSelector",),
            )
        )
    for key in ("endpointSelector", "nodeSelector"):
        found += [(c, m, (key, *p)) for c, m, p in _selector_refusals(spec.get(key))]
    for section in _SECTIONS:
        rules = spec.get(section)
        if not isinstance(rules, list):
            continue
        for n, rule in enumerate(rules):
            if isinstance(rule, Mapping):
                found += [
                    (c, m, (section, n, *p)) for c, m, p in _rule_refusals(rule, section, host)
                ]
    return found


def _has_key(selector: Mapping[str, Any], source: str, key: str) -> bool:
    labels, expressions = selector.get("matchLabels"), selector.get("matchExpressions")
    keys = [str(k) for k in labels] if isinstance(labels, Mapping) else []
    keys += [
        str(e.get("key", ""))
        for e in (expressions if isinstance(expressions, list) else [])
        if isinstance(e, Mapping)
    ]
    return any(label_key(k) == (source, key) for k in keys)


def _selector_refusals(selector: object) -> list[Found]:
    """Kubernetes' label-selector validation, which Cilium applies to every selector."""
    if not isinstance(selector, Mapping):
        return []
    found: list[Found] = []
    for n, expression in enumerate(_seq(selector.get("matchExpressions"))):
        if not isinstance(expression, Mapping):
            continue
        op, values = expression.get("operator"), _seq(expression.get("values"))
        where: tuple[str | int, ...] = ("matchExpressions", n, "values")
        if op in ("In", "NotIn") and not values:
            found.append(("CPG016", f"operator {op} needs values: Cilium refuses it", where))
        if op in ("Exists", "DoesNotExist") and values:
            found.append(("CPG016", f"operator {op} takes no values: Cilium refuses it", where))
    return found


def _rule_refusals(rule: Mapping[str, Any], section: str, host: bool) -> list[Found]:
    ingress = section.startswith("ingress")
    found = _peer_refusals(rule, section)
    for key in ("fromCIDRSet", "toCIDRSet"):
        for n, entry in enumerate(_seq(rule.get(key))):
            if isinstance(entry, Mapping):
                found += [(c, m, (key, n, *p)) for c, m, p in _cidr_set_refusals(entry)]
    for key in ("fromEndpoints", "toEndpoints", "fromRequires", "toRequires"):
        for n, selector in enumerate(_seq(rule.get(key))):
            found += [(c, m, (key, n, *p)) for c, m, p in _selector_refusals(selector)]
    for n, port_rule in enumerate(_seq(rule.get("toPorts"))):
        if isinstance(port_rule, Mapping):
            found += [
                (c, m, ("toPorts", n, *p))
                for c, m, p in _port_rule_refusals(port_rule, ingress, host, section)
            ]
    return found + _icmp_refusals(rule)


def _peer_refusals(rule: Mapping[str, Any], section: str) -> list[Found]:
    """Peers Cilium refuses together, or without an agent option; ICMP beside ports."""
    found: list[Found] = []
    peers = list(_INGRESS_PEERS if section.startswith("ingress") else _EGRESS_PEERS)
    if section == "egress":
        peers.append("toFQDNs")
    present = [key for key in peers if isinstance(rule.get(key), list) and rule.get(key)]
    if len(present) > 1:
        found.append(
            (
                "CPG017",
                f"{present[0]} and {present[1]} in one rule: Cilium refuses the combination",
                (present[1],),
            )
        )
    for key in ("fromNodes", "toNodes"):
        if rule.get(key):
            found.append(
                (
                    "CPG026",
                    f"{key}: Cilium refuses node selectors unless its agents run with "
                    "enable-node-selector-labels",
                    (key,),
                )
            )
    if rule.get("icmps") and rule.get("toPorts"):
        found.append(
            (
                "CPG018",
                "toPorts and icmps in one rule: Cilium refuses it (ICMP types go in a rule "
                "of their own)",
                ("icmps",),
            )
        )
    return found


def _icmp_refusals(rule: Mapping[str, Any]) -> list[Found]:
    found: list[Found] = []
    for n, icmp in enumerate(_seq(rule.get("icmps"))):
        fields = icmp.get("fields") if isinstance(icmp, Mapping) else None
        for m, field in enumerate(_seq(fields)):
            raw = field.get("type") if isinstance(field, Mapping) else None
            if isinstance(raw, int) and not isinstance(raw, bool) and not 0 <= raw <= 255:
                found.append(
                    (
                        "CPG025",
                        f"ICMP type {raw} is out of range: a type is 0 to 255 (the schema checks "
                        "only a type written as text)",
                        ("icmps", n, "fields", m, "type"),
                    )
                )
            elif isinstance(field, Mapping) and _icmp_name_refused(field):
                family = field.get("family") or "IPv4"
                found.append(
                    (
                        "CPG025",
                        f"ICMP type {field.get('type')} is not a type of {family}: Cilium "
                        "refuses it",
                        ("icmps", n, "fields", m, "type"),
                    )
                )
    return found


def _icmp_name_refused(field: Mapping[str, Any]) -> bool:
    raw = field.get("type")
    family = str(field.get("family") or "IPv4")
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


def _cidr_set_refusals(entry: Mapping[str, Any]) -> list[Found]:
    outer = _prefix(entry.get("cidr"))
    if outer is None:
        return []  # no cidr (a group reference) or one the schema's cidr format names
    found: list[Found] = []
    for n, text in enumerate(_seq(entry.get("except"))):
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
                    f"except {text} is not inside {entry.get('cidr')}: Cilium refuses it",
                    ("except", n),
                )
            )
    return found


def _port_rule_refusals(
    port_rule: Mapping[str, Any], ingress: bool, host: bool, section: str
) -> list[Found]:
    rules = port_rule.get("rules") if section in ("ingress", "egress") else None
    rules = rules if isinstance(rules, Mapping) else {}
    http, dns = rules.get("http"), rules.get("dns")
    ports = [p for p in _seq(port_rule.get("ports")) if isinstance(p, Mapping)]
    found: list[Found] = []
    for m, port in enumerate(ports):
        found += [(c, t, ("ports", m)) for c, t in _port_refusals(port, bool(http), bool(dns))]
    where: tuple[str | int, ...] = ("rules",)
    placed = (
        (dns and ingress, "DNS rules on ingress: Cilium refuses them", ("rules", "dns")),
        (dns and not ports, "DNS rules need port 53 given: Cilium refuses them", where),
        (host and http, "HTTP rules in a host policy (nodeSelector): Cilium refuses them", where),
        (host and dns and ingress, "L7 rules on host ingress: Cilium refuses them", where),
        (
            port_rule.get("serverNames") and (http or dns) and not port_rule.get("terminatingTLS"),
            "serverNames with L7 rules but no terminatingTLS: Cilium refuses it",
            ("serverNames",),
        ),
        (
            port_rule.get("listener") and ingress,
            "a listener on ingress: Cilium refuses it",
            ("listener",),
        ),
        (
            port_rule.get("listener") and (http or dns),
            "a listener with L7 rules: Cilium refuses it",
            ("listener",),
        ),
    )
    found += [("CPG021", text, path) for refused, text, path in placed if refused]
    for n, rule in enumerate(_seq(http)):
        if not isinstance(rule, Mapping):
            continue
        for key in ("path", "method"):
            problem = regex_problem(rule.get(key))
            if problem:
                found.append(
                    ("CPG022", f"{key} {rule.get(key)!r}: {problem}", ("rules", "http", n, key))
                )
    return found


def _port_refusals(port: Mapping[str, Any], http: bool, dns: bool) -> list[tuple[str, str]]:
    """What Cilium refuses in one port entry, given the L7 rules beside it."""
    text = "" if port.get("port") is None else str(port.get("port"))
    protocol = str(port.get("protocol") or "")
    if not text:
        return [("CPG020", "a port entry without port: Cilium refuses it")]
    number = cilium_port(text)  # Cilium tries a number first, then a name
    if number is None:
        return []  # a named port, or one CPG009 names (out of range, not a number)
    found: list[tuple[str, str]] = []
    if protocol in _NO_PORTS and number != 0:
        found.append(("CPG020", f"{protocol} has no ports: Cilium refuses port {text} (use 0)"))
    end = port.get("endPort")
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


def _sections(spec: Mapping[str, Any]) -> Iterator[tuple[str, int, Mapping[str, Any]]]:
    for section in _SECTIONS:
        for n, rule in enumerate(_seq(spec.get(section))):
            if isinstance(rule, Mapping):
                yield section, n, rule


def spec_rules(
    policy: Mapping[str, Any],
) -> list[tuple[tuple[str | int, ...], str, Mapping[str, Any]]]:
    """Every rule of a policy: (its path, its section, the rule)."""
    out: list[tuple[tuple[str | int, ...], str, Mapping[str, Any]]] = []
    specs: Sequence[tuple[tuple[str | int, ...], Any]] = [(("spec",), policy.get("spec"))]
    specs = [*specs, *((("specs", n), s) for n, s in enumerate(_seq(policy.get("specs"))))]
    for path, spec in specs:
        if isinstance(spec, Mapping):
            out += [((*path, section, n), section, rule) for section, n, rule in _sections(spec)]
    return out
