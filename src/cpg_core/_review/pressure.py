"""Policy map pressure: how many entries an endpoint's BPF policy map would hold under a set
of policies, against the agent's ``bpf-policy-map-max`` (16,384 by default).

Cilium keeps, per endpoint, one map entry per (peer identity, direction, protocol, port)
that some rule allows or denies. A rule's entries are the identities its peer selects times
its ports: a selector that matches many identities, an entity such as ``cluster``, a CIDR
rule that covers the CIDR identities of other rules, FQDNs that resolve to many addresses,
or port ranges (split into aligned prefixes) multiply. A map that overflows shows up only
as agent errors after the policies are applied; this estimate, from the identities a
capture (or ``--identities``) shows, finds the endpoints near or over the limit first. It
counts each rule's entries on its own (Cilium merges duplicates), so it errs high.
"""

from __future__ import annotations

import bisect
import ipaddress
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import attrs

from cpg_core._base.documents import PolicyDocument
from cpg_core._base.flow import Endpoint
from cpg_core._base.labels import NAMESPACE_LABEL
from cpg_core._policy.agent import POLICY_MAP_MAX
from cpg_core._policy.matcher import (
    PeerView,
    fqdn_matches,
    labels_or_entities_match,
    peer_side,
    selecting_specs,
)
from cpg_core._policy.model import DENY_SECTION, Policy, Rule, Selector, Spec

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

NEAR = 0.8
"""An endpoint at this share of the limit or more is reported as near it."""
_PROTOCOLS_OF_ANY = 3
"""``protocol: ANY`` (or none) is an entry each for TCP, UDP and SCTP."""


@attrs.frozen(slots=True)
class RuleEntries:
    """What one rule adds to an endpoint's policy map."""

    policy: str
    rule: str
    """``ingress[0]``, ``egressDeny[2]``…"""
    peer: str
    """The peer as the rule names it (its selector, entity, CIDRs or FQDNs)."""
    identities: int
    ports: int
    entries: int


@attrs.frozen(slots=True)
class EndpointPressure:
    endpoint: str
    """``namespace/workload``."""
    entries: int
    limit: int
    identities: int
    """The distinct identities the estimate saw in the cluster."""
    largest: tuple[RuleEntries, ...]
    """The rules that add the most entries, largest first (at most five)."""
    advice: tuple[str, ...]

    @property
    def over(self) -> bool:
        return self.entries > self.limit

    @property
    def share(self) -> str:
        return f"{100 * self.entries / self.limit:.0f} %"


def _prefix_blocks(first: int, last: int) -> int:
    """How many port/mask entries cover ports ``first``–``last`` (Cilium stores a range as
    aligned power-of-two blocks)."""
    blocks = 0
    port = first
    while port <= last:
        size = 1
        while port % (size * 2) == 0 and port + size * 2 - 1 <= last:
            size *= 2
        blocks += 1
        port += size
    return blocks


def rule_ports(rule: Rule) -> int:
    """The port entries of a rule: each port (or range, in blocks) per protocol, each ICMP
    type; 1 for a rule without ports (every port: one wildcard entry)."""
    count = 0
    for port_rule in rule.port_rules:
        for port in port_rule.ports:
            protocols = 1 if port.protocol != "ANY" else _PROTOCOLS_OF_ANY
            try:
                first = int(port.port_written or 0)
                last = max(first, int(port.end_written or first))
            except (TypeError, ValueError):  # a named port: one entry once resolved
                first = last = 1
            count += protocols * (_prefix_blocks(first, last) if first else 1)
    count += len(rule.icmps)
    return count or 1


def _describe_peer(rule: Rule) -> str:
    parts = []
    for key, value in rule.peers_written:
        if value:
            parts.append(f"{key}: {value}" if key == rule.entity_field else f"{key} ({len(value)})")
    return "; ".join(parts) or "every peer"


class AddressIndex:
    """The world addresses a capture shows, sorted, so that how many fall inside a rule's
    prefixes is two binary searches per prefix, not a scan of every address."""

    def __init__(self, addresses: Iterable[IPAddress]) -> None:
        self._sorted: dict[int, list[int]] = {4: [], 6: []}
        for ip in sorted(set(addresses), key=lambda a: (a.version, int(a))):
            self._sorted[ip.version].append(int(ip))

    def inside(self, networks: Iterable[IPNetwork]) -> int:
        """Addresses inside one of ``networks`` (each counted once)."""
        spans: dict[int, list[tuple[int, int]]] = {4: [], 6: []}
        for net in networks:
            spans[net.version].append((int(net.network_address), int(net.broadcast_address)))
        count = 0
        for version, ranges in spans.items():
            numbers = self._sorted[version]
            last_end = -1
            for start, end in sorted(ranges):
                start = max(start, last_end + 1)  # overlapping prefixes: count once
                if start <= end:
                    count += bisect.bisect_right(numbers, end) - bisect.bisect_left(numbers, start)
                last_end = max(last_end, end)
        return count


def _cidr_identities(rule: Rule, addresses: AddressIndex) -> int:
    """A CIDR rule's identities: each prefix it names, and each other address the cluster
    knows (of CIDR and FQDN rules) that falls inside one of them."""
    networks = [str(e.cidr) for e in rule.cidrs if not e.from_set or e.cidr]
    if not networks:
        return 0
    parsed = []
    for text in networks:
        try:
            parsed.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            continue
    wide = [net for net in parsed if net.num_addresses > 1]
    return len(parsed) + (addresses.inside(wide) if wide else 0)


def _fqdn_identities(rule: Rule, names: Mapping[str, Sequence[str]]) -> int:
    """An FQDN rule's identities: an address per name it matches (at least one a name)."""
    if not rule.fqdns:
        return 0
    matched = sum(1 for _ip, known in names.items() if fqdn_matches(known, rule.fqdns))
    return max(matched, len(rule.fqdns))


class IdentityIndex:
    """The cluster's distinct identities, by namespace, so that a selector of one namespace
    is matched against that namespace's identities only (a cluster's rules × its identities
    is otherwise the cost)."""

    def __init__(self, identities: Iterable[Endpoint]) -> None:
        self.all = _distinct(identities)
        self.views = [peer_side(identity, "", (), None) for identity in self.all]
        """How a rule sees each identity (as a peer of any cluster)."""
        self.by_namespace: dict[str, list[PeerView]] = {}
        self.by_label: dict[tuple[str, str, str], list[PeerView]] = {}
        """A namespace's identities by each of their labels (``app=web``)."""
        for identity, view in zip(self.all, self.views, strict=True):
            self.by_namespace.setdefault(identity.namespace, []).append(view)
            for key, value in view.labels.items():
                if value:
                    self.by_label.setdefault((identity.namespace, key, value), []).append(view)

    def candidates(self, rule: Rule, namespace: str | None) -> list[PeerView]:
        """The identities the rule's endpoint selectors and entities could select: those of
        the namespaces they select in, and of those only the ones with a label a selector
        requires (an identity without it is never selected by that selector)."""
        if rule.entities:
            return self.views
        found: dict[int, PeerView] = {}
        for selector in rule.endpoints:
            named = _selector_namespace(selector)
            if named is _ANY or (named is None and namespace is None):
                return self.views
            space = named if isinstance(named, str) else str(namespace)
            anchor = _required_label(selector)
            views = (
                self.by_namespace.get(space, ())
                if anchor is None
                else self.by_label.get((space, *anchor), ())
            )
            for view in views:
                found[id(view)] = view
        return list(found.values())


_ANY = object()
"""A selector that may select pods of any namespace."""


def _required_label(selector: Selector) -> tuple[str, str] | None:
    """A pod label (key without its source, non-empty value) a selector requires, if any."""
    for key, value in selector.labels:
        source, _, plain = key.rpartition(":")
        if source in ("", "k8s", "any") and plain != NAMESPACE_LABEL and value:
            return plain, value
    return None


def _selector_namespace(selector: Selector) -> object:
    """The namespace a selector's labels pin (a str), None when it names none (a namespaced
    policy's own namespace then), or :data:`_ANY` when it may reach others."""
    if not isinstance(selector.written, Mapping):
        return _ANY
    labels = selector.label_map
    for key in ("io.kubernetes.pod.namespace", "k8s:io.kubernetes.pod.namespace"):
        if key in labels:
            return labels[key]
    for key in labels:
        if "io.cilium.k8s.namespace.labels" in key or key.startswith("reserved:"):
            return _ANY
    for expression in selector.expressions:
        if "namespace" in expression.key or expression.key.startswith("reserved:"):
            return _ANY
    return None


def rule_identities(
    rule: Rule,
    namespace: str | None,
    index: IdentityIndex,
    addresses: AddressIndex,
    names: Mapping[str, Sequence[str]],
) -> int:
    """How many identities a rule's peer selects (1 for every peer: the wildcard)."""
    if not any(value for _key, value in rule.peers_written):
        return 1
    count = 0
    if rule.endpoints or rule.entities:
        for view in index.candidates(rule, namespace):
            if labels_or_entities_match(rule, view, namespace):
                count += 1
        count = max(count, 1)  # a rule cpg wrote came from a flow: one identity at least
    count += _cidr_identities(rule, addresses)
    if rule.side == "to":
        count += _fqdn_identities(rule, names)
    return count


def _peer_key(rule: Rule, namespace: str | None) -> tuple[Any, ...]:
    """What a rule's identity count depends on: its peer fields, and its policy's namespace
    (or being clusterwide) only when an endpoint selector of it does not name the namespace
    it selects in."""
    fields = tuple(
        (key, json.dumps(value, sort_keys=True, default=str)) for key, value in rule.peers_written
    )
    pinned = all(isinstance(_selector_namespace(s), str) for s in rule.endpoints)
    return (rule.side, "" if pinned else (namespace,), fields)


def _advice(
    largest: Sequence[RuleEntries],
    entries: int,
    limit: int,
    kinds: Mapping[RuleEntries, tuple[bool, bool]],
) -> tuple[str, ...]:
    """What would shrink the map most; ``kinds``: whether each rule selects through an
    entity, and through CIDRs."""
    out = []
    for item in largest[:3]:
        where = f"{item.policy} {item.rule}"
        entity, cidr = kinds.get(item, (False, False))
        if item.identities >= 50 and entity:
            out.append(
                f"{where} selects {item.identities} identities through an entity: name the "
                "peers it is for instead"
            )
        elif item.identities >= 50:
            out.append(
                f"{where} selects {item.identities} identities: narrow its selector to the "
                "workloads that need it, or give those a common label"
            )
        elif item.ports >= 20:
            out.append(
                f"{where} has {item.ports} port entries: fewer ports, or aligned port ranges"
            )
        elif cidr and item.identities >= 20:
            out.append(
                f"{where} covers {item.identities} CIDR identities: one wider prefix "
                "(toCIDRSet) if that is acceptable"
            )
    if entries > limit:
        out.append(
            f"or raise the agents' bpf-policy-map-max (Helm: bpf.policyMapMax) above "
            f"{entries:,} (65,536 at most is usual)"
        )
    return tuple(out)


Selecting = Callable[[Endpoint], Sequence[tuple[Policy, Spec, str | None]]]
"""The specs that select an endpoint (policy, spec, namespace), as the matcher finds them."""


def endpoint_pressure(
    endpoint: Endpoint,
    name: str,
    selecting: Selecting,
    identities: IdentityIndex,
    *,
    addresses: Sequence[IPAddress] | AddressIndex = (),
    names: Mapping[str, Sequence[str]] | None = None,
    limit: int = POLICY_MAP_MAX,
    _counted: dict[object, int] | None = None,
) -> EndpointPressure:
    """The estimated policy map entries of ``endpoint`` under ``policies``."""
    if not isinstance(addresses, AddressIndex):
        addresses = AddressIndex(addresses)
    rules: list[RuleEntries] = []
    kinds: dict[RuleEntries, tuple[bool, bool]] = {}
    counted = _counted if _counted is not None else {}
    for policy, spec, namespace in selecting(endpoint):
        for direction in ("ingress", "egress"):
            for section in (direction, DENY_SECTION[direction]):
                for rule in spec.rules(section):
                    if not rule.written:
                        continue  # {} selects no peer: no entry
                    # A rule counts the same for every endpoint, and so does every rule
                    # with the same peer (kube-dns, a shared backend: written many times).
                    count = counted.get(id(rule))
                    if count is None:
                        peer = _peer_key(rule, namespace)
                        count = counted.get(peer)
                        if count is None:
                            count = counted[peer] = rule_identities(
                                rule, namespace, identities, addresses, names or {}
                            )
                        counted[id(rule)] = count
                    ports = rule_ports(rule)
                    entry = RuleEntries(
                        policy=policy.display_name,
                        rule=rule.where,
                        peer=_describe_peer(rule),
                        identities=count,
                        ports=ports,
                        entries=count * ports,
                    )
                    rules.append(entry)
                    kinds[entry] = (bool(rule.entities), bool(rule.cidrs))
    entries = sum(r.entries for r in rules)
    largest = tuple(sorted(rules, key=lambda r: (-r.entries, r.policy, r.rule))[:5])
    return EndpointPressure(
        endpoint=name,
        entries=entries,
        limit=limit,
        identities=len(identities.all),
        largest=largest,
        advice=_advice(largest, entries, limit, kinds),
    )


def policy_map_pressure(
    endpoints: Iterable[tuple[str, Endpoint]],
    policies: Sequence[PolicyDocument] | Selecting,
    identities: Iterable[Endpoint],
    *,
    addresses: Collection[str] = (),
    names: Mapping[str, Sequence[str]] | None = None,
    limit: int = POLICY_MAP_MAX,
    counted: dict[object, int] | None = None,
) -> tuple[EndpointPressure, ...]:
    """The endpoints (``namespace/workload``, an endpoint of it) whose estimated entries
    reach :data:`NEAR` of ``limit`` or more, the fullest first. ``identities`` are the
    distinct identities of the cluster (a capture's endpoints); ``policies`` the documents,
    or how to find the specs that select an endpoint; ``addresses`` the world
    addresses it saw, ``names`` what DNS said of them. ``counted`` (the identity count of
    each rule and of each peer) may be kept by a caller that calls again with the same
    documents, identities, addresses and names."""
    index = IdentityIndex(identities)
    parsed = []
    for text in addresses:
        try:
            parsed.append(ipaddress.ip_address(text))
        except ValueError:
            continue
    counted = {} if counted is None else counted
    address_index = AddressIndex(parsed)
    if callable(policies):
        selecting = policies
    else:
        documents = list(policies)

        def selecting(endpoint: Endpoint) -> list[Any]:
            return selecting_specs(documents, endpoint)

    found = []
    for name, endpoint in endpoints:
        pressure = endpoint_pressure(
            endpoint,
            name,
            selecting,
            index,
            addresses=address_index,
            names=names,
            limit=limit,
            _counted=counted,
        )
        if pressure.entries >= NEAR * limit:
            found.append(pressure)
    return tuple(sorted(found, key=lambda p: (-p.entries, p.endpoint)))


def _distinct(identities: Iterable[Endpoint]) -> list[Endpoint]:
    """One endpoint per identity (its labels): pods of one workload share an identity."""
    seen: dict[tuple[str, tuple[str, ...]], Endpoint] = {}
    for endpoint in dict.fromkeys(identities):  # equal endpoints: one sort of their labels
        if endpoint.labels:
            seen.setdefault((endpoint.namespace, tuple(sorted(endpoint.labels))), endpoint)
    return [seen[key] for key in sorted(seen)]
