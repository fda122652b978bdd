"""The grammar written: cpg's rules as CiliumNetworkPolicy rules, the selectors and specs cpg
writes, and its edits of selectors (narrowings), as plain data in the key order they are
rendered. The one writer of the grammar's spelling, beside the model that reads it
(ARCHITECTURE §D54)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cpg_core._base.labels import CLUSTER_LABEL, NAMESPACE_LABEL
from cpg_core._base.rules import (
    ANY_NAME,
    DNS_PORT,
    INGRESS,
    MAX_PORT_RANGE_READ,
    MAX_PORTS_PER_RULE,
    CidrPeer,
    EndpointPeer,
    EntityPeer,
    FqdnPeer,
    Peer,
    Rule,
    chunks,
    peer_selector,
    port_entries,
)
from cpg_core._base.yaml_text import yaml_string
from cpg_core._policy.model import (
    EGRESS_DENY,
    SUBJECT_FIELD,
    PortEntry,
    Rule as ModelRule,
    read_rule,
    read_selector,
)
from cpg_core._policy.port_text import cilium_port


def _port(port: int, proto: str) -> dict[str, str]:
    return {"port": str(port), "protocol": proto}


def _port_entry(first: int, last: int, proto: str) -> dict[str, Any]:
    if first == last:
        return {"port": str(first), "protocol": proto}
    return {"port": str(first), "endPort": last, "protocol": proto}


def rule_to_dict(rule: Rule, policy_namespace: str) -> dict[str, Any]:
    """The CRD shape of a rule, keys in the order they are rendered."""
    prefix = "from" if rule.direction == INGRESS else "to"
    out: dict[str, Any] = {}
    peer = rule.peer
    if isinstance(peer, EntityPeer):
        out[prefix + "Entities"] = [peer.entity]
    elif isinstance(peer, CidrPeer):
        out[prefix + "CIDR"] = list(rule.cidrs)
    elif isinstance(peer, FqdnPeer):
        out["toFQDNs"] = [{"matchName": peer.name}]
    else:
        out[prefix + "Endpoints"] = [{"matchLabels": peer_selector(peer, policy_namespace)}]
    if rule.http:
        by_port: dict[tuple[int, str], list[dict[str, str]]] = {}
        for port, proto, method, path in rule.http:
            by_port.setdefault((port, proto), []).append({"method": method, "path": path})
        port_rules: list[dict[str, Any]] = []
        for port, proto in rule.ports:
            entry: dict[str, Any] = {"ports": [_port(port, proto)]}
            if (port, proto) in by_port:
                entry["rules"] = {"http": by_port[(port, proto)]}
            port_rules.append(entry)
        out["toPorts"] = port_rules
    elif rule.ports:
        out["toPorts"] = [
            {"ports": [_port_entry(*entry) for entry in chunk]}
            for chunk in chunks(port_entries(rule.ports))
        ]
    if rule.icmps:
        out["icmps"] = [
            {"fields": [{"family": fam, "type": t} for fam, t in chunk]}
            for chunk in chunks(rule.icmps)
        ]
    if rule.dns:
        out["toPorts"] = [
            {
                "ports": [_port(DNS_PORT, "UDP"), _port(DNS_PORT, "TCP")],
                "rules": {"dns": [_dns_match(name) for name in rule.dns]},
            }
        ]
    return out


def _dns_match(name: str) -> dict[str, str]:
    return {"matchPattern": name} if name == ANY_NAME else {"matchName": name}


def rule_from_dict(data: object, direction: str, policy_namespace: str) -> Rule | None:
    """The Rule whose ``rule_to_dict`` is exactly ``data``; None for any other shape
    (a rule a human wrote or changed). Read with the policy model, then written again:
    only a rule that writes back to ``data`` is cpg's."""
    read = read_rule(data, direction)
    if read is None or len(read.peer_fields) != 1:
        return None
    peer = _peer_of(read, policy_namespace)
    ports: set[tuple[int, str]] = set()
    http: set[tuple[int, str, str, str]] = set()
    names: set[str] = set()
    for port_rule in read.port_rules:
        found = {port for entry in port_rule.ports for port in _ports_of(entry)}
        if port_rule.has_dns:
            names.update(match.name or match.pattern for match in port_rule.dns)
            continue
        ports |= found
        http |= {(n, proto, h.method, h.path) for n, proto in found for h in port_rule.http}
    icmps = {field.number for field in read.icmps if field.number is not None}
    if peer is None or sum(bool(x) for x in (ports, icmps, names)) != 1:
        return None
    rule = Rule(
        direction,
        peer[0],
        ports=tuple(sorted(ports)),
        icmps=tuple(sorted(icmps)),
        http=tuple(sorted(http)),
        dns=tuple(sorted(names)),
        more_cidrs=peer[1],
    )
    return rule if rule_to_dict(rule, policy_namespace) == dict(read.written) else None


def _peer_of(read: ModelRule, policy_namespace: str) -> tuple[Peer, tuple[str, ...]] | None:
    """The one peer a rule cpg writes names, and the CIDRs written after the first."""
    if len(read.entities) == 1:
        return EntityPeer(read.entities[0]), ()
    if read.cidrs and not read.cidrs[0].from_set:
        first, *more = (str(entry.cidr) for entry in read.cidrs)
        return CidrPeer(first), tuple(more)
    if len(read.fqdns) == 1 and read.fqdns[0].name:
        return FqdnPeer(read.fqdns[0].name), ()
    if len(read.endpoints) == 1:
        labels = dict(read.endpoints[0].labels)
        namespace = labels.pop(NAMESPACE_LABEL, policy_namespace)
        cluster = labels.pop(CLUSTER_LABEL, "")
        return EndpointPeer(namespace, tuple(sorted(labels.items())), cluster), ()
    return None


def _ports_of(entry: PortEntry) -> list[tuple[int, str]]:
    """The ports of a port entry cpg writes: one port, or a range (as Cilium reads it, up to
    the longest cpg reads back)."""
    if entry.end_written is None:
        port = cilium_port(str(entry.port_written))
        return [] if port is None else [(port, entry.protocol)]
    if entry.span is None or entry.span[1] - entry.span[0] > MAX_PORT_RANGE_READ:
        return []
    return [(n, entry.protocol) for n in range(entry.span[0], entry.span[1] + 1)]


def rule_item_lines(rule: Rule, policy_namespace: str) -> list[str]:
    """An L3/L4 rule (no L7, no FQDN) as a sequence item under ``  ingress:``/``  egress:``,
    written out directly: policies can hold thousands of rules, and a test pins that the
    text reads back as :func:`rule_to_dict`."""
    peer = rule.peer
    assert not isinstance(peer, FqdnPeer) and not rule.http and not rule.dns
    lines: list[str] = []
    prefix = "from" if rule.direction == INGRESS else "to"
    if isinstance(peer, EntityPeer):
        lines += [f"  - {prefix}Entities:", f"    - {yaml_string(peer.entity)}"]
    elif isinstance(peer, CidrPeer):
        lines += [f"  - {prefix}CIDR:", *(f"    - {yaml_string(c)}" for c in rule.cidrs)]
    else:
        lines += [f"  - {prefix}Endpoints:", "    - matchLabels:"]
        lines += [
            f"        {yaml_string(k)}: {yaml_string(v)}"
            for k, v in peer_selector(peer, policy_namespace).items()
        ]
    if rule.ports:
        lines.append("    toPorts:")
        entries = port_entries(rule.ports)
        for start in range(0, len(entries), MAX_PORTS_PER_RULE):
            lines.append("    - ports:")
            for first, last, proto in entries[start : start + MAX_PORTS_PER_RULE]:
                lines.append(f'      - port: "{first}"')
                if last != first:
                    lines.append(f"        endPort: {last}")
                lines.append(f"        protocol: {proto}")
    if rule.icmps:
        lines.append("    icmps:")
        for start in range(0, len(rule.icmps), MAX_PORTS_PER_RULE):
            lines.append("    - fields:")
            for family, icmp_type in rule.icmps[start : start + MAX_PORTS_PER_RULE]:
                lines.append(f"      - family: {family}")
                lines.append(f"        type: {icmp_type}")
    return lines


def labels_selector(labels: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """A selector of exactly these labels (keys sorted): the selectors cpg writes."""
    return {"matchLabels": dict(sorted(labels))}


def spec_document(selector: Mapping[str, Any], sections: Mapping[str, list[Any]]) -> dict[str, Any]:
    """A spec of ``selector`` and the non-empty ``sections`` (section name -> its rules)."""
    spec: dict[str, Any] = {SUBJECT_FIELD: selector}
    for section, rules in sections.items():
        if rules:
            spec[section] = rules
    return spec


def selector_of(labels: Mapping[str, str]) -> dict[str, Any]:
    """A selector of these labels, in the order given."""
    return {"matchLabels": dict(labels)}


def subject_of(spec: Mapping[str, Any]) -> Any:
    """A written spec's subject selector as written (None when it has none)."""
    return spec.get(SUBJECT_FIELD)


def with_subject(spec: Mapping[str, Any], selector: object) -> dict[str, Any]:
    """A written spec with its subject selector replaced."""
    return {**spec, SUBJECT_FIELD: selector}


def subject_document(selector: object, *, under_spec: bool = False) -> dict[str, Any]:
    """A subject selector alone, to paste (under ``spec:`` when asked)."""
    subject = {SUBJECT_FIELD: selector}
    return {"spec": subject} if under_spec else subject


def selector_lines(
    labels: Mapping[str, str], expressions: Iterable[tuple[str, Iterable[str]]], pad: str
) -> list[str]:
    """A selector's body as YAML lines at ``pad``: its labels (sorted), then each ``key In
    (values)`` expression in the order given."""
    lines: list[str] = []
    if labels:
        lines.append(f"{pad}matchLabels:")
        lines += [f"{pad}  {yaml_string(k)}: {yaml_string(v)}" for k, v in sorted(labels.items())]
    listed = list(expressions)
    if listed:
        lines.append(f"{pad}matchExpressions:")
        for key, values in listed:
            lines += [
                f"{pad}- key: {yaml_string(key)}",
                f"{pad}  operator: In",
                f"{pad}  values:",
                *(f"{pad}  - {yaml_string(v)}" for v in values),
            ]
    return lines


def subject_lines(
    labels: Mapping[str, str], expressions: Iterable[tuple[str, Iterable[str]]], indent: str
) -> list[str]:
    """A spec's subject selector as YAML lines at ``indent``."""
    body = selector_lines(labels, expressions, indent + "  ")
    return [f"{indent}{SUBJECT_FIELD}:" + ("" if body else " {}"), *body]


def deny_everything() -> tuple[str, list[dict[str, Any]]]:
    """The section and rules of an egress deny of every peer."""
    return EGRESS_DENY, [{"toEntities": ["all"]}]


EXCLUDING = frozenset({"NotIn", "DoesNotExist"})
"""The operators of the expressions a narrowing adds."""


def excluding(selector: object, key: str, value: str) -> dict[str, Any]:
    """``selector`` (a subject selector) that no longer selects pods with ``key=value``."""
    out = dict(selector) if isinstance(selector, Mapping) else {}
    expressions = list(out.get("matchExpressions") or [])
    expressions.append({"key": key, "operator": "NotIn", "values": [value]})
    out["matchExpressions"] = expressions
    return out


def is_narrowed(selector: object, written: Mapping[str, Any]) -> bool:
    """Whether ``selector`` is cpg's ``written`` selector with pods left out: the same
    labels and only ``NotIn``/``DoesNotExist`` expressions on other keys besides."""
    if not isinstance(selector, Mapping) or set(selector) - {"matchLabels", "matchExpressions"}:
        return False
    labels = written.get("matchLabels") or {}
    if (selector.get("matchLabels") or {}) != labels:
        return False
    expressions = selector.get("matchExpressions")
    if not isinstance(expressions, list) or not expressions:
        return False
    return all(
        isinstance(e, Mapping)
        and e.get("operator") in EXCLUDING
        and isinstance(e.get("key"), str)
        and e["key"] not in labels
        for e in expressions
    )


Exclusion = tuple[str, str, tuple[str, ...]]
"""``(key, operator, values)`` of a ``NotIn``/``DoesNotExist`` expression a selector of
cpg's was narrowed by."""


def without_exclusions(selector: Mapping[str, Any]) -> tuple[dict[str, Any], list[Exclusion]]:
    """``selector`` with the exclusions a narrowing added taken out, and those exclusions."""
    kept, left_out = [], []
    for expression in selector.get("matchExpressions") or []:
        if isinstance(expression, Mapping) and expression.get("operator") in EXCLUDING:
            values = tuple(str(v) for v in expression.get("values") or [])
            left_out.append((str(expression.get("key")), str(expression["operator"]), values))
        else:
            kept.append(expression)
    plain = {k: v for k, v in selector.items() if k != "matchExpressions"}
    if kept:
        plain["matchExpressions"] = kept
    return plain, left_out


def with_exclusions(selector: Mapping[str, Any], left_out: Iterable[Exclusion]) -> dict[str, Any]:
    """``selector`` narrowed by ``left_out`` again (what a rerun writes so a narrowing holds)."""
    narrowed = dict(selector)
    expressions = list(narrowed.get("matchExpressions") or [])
    for key, operator, values in left_out:
        entry: dict[str, Any] = {"key": key, "operator": operator}
        if operator == "NotIn":
            entry["values"] = list(values)
        expressions.append(entry)
    narrowed["matchExpressions"] = expressions
    return narrowed


def in_selection(
    selector: object, *, other_fields: bool = False
) -> tuple[tuple[tuple[str, str], ...], list[tuple[str, tuple[str, ...]]]] | None:
    """A selector cpg writes for a set of workloads: its labels (sorted) and its ``In``
    expressions; None for any other selector (another operator, or another field unless
    ``other_fields``)."""
    if not isinstance(selector, Mapping):
        return None
    if not other_fields and set(selector) - {"matchLabels", "matchExpressions"}:
        return None
    read = read_selector(selector)
    raw = selector.get("matchLabels") or {}
    fixed = tuple(sorted((str(k), str(v)) for k, v in raw.items()))
    if len(read.expressions) != len(read.expressions_written):
        return None  # an expression that is not a mapping
    expressions = []
    for expression in read.expressions_written:
        if expression.get("operator") != "In":
            return None
        values = tuple(str(v) for v in expression.get("values") or ())
        expressions.append((str(expression.get("key")), values))
    return fixed, expressions
