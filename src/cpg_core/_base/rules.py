"""Peers, rule atoms and canonical rules: the vocabulary between flows and policy YAML.

An *atom* is the smallest thing a flow asks for: one direction, one peer, one protocol and
one port (or ICMP type). A policy is a set of atoms; its rules are a pure function of that
set, which is what makes output independent of flow order and of how runs were split.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import attrs

from cpg_core._base.flow import ICMPV4, ICMPV6, PORT_PROTOCOLS
from cpg_core._base.labels import CLUSTER_LABEL, NAMESPACE_LABEL, LabelItems, format_labels

INGRESS = "ingress"
EGRESS = "egress"
T = TypeVar("T")

MAX_PORTS_PER_RULE = 40  # CRD limit on PortRule.ports and ICMPRule.fields

ENTITIES = (
    "host",
    "remote-node",
    "kube-apiserver",
    "health",
    "ingress",
    "init",
    "unmanaged",
)


@attrs.frozen(slots=True, order=True, cache_hash=True)
class EntityPeer:
    entity: str


@attrs.frozen(slots=True, order=True, cache_hash=True)
class CidrPeer:
    cidr: str

    def sort_key(self) -> tuple[int, int, int]:
        net = ipaddress.ip_network(self.cidr, strict=False)
        return (net.version, int(net.network_address), net.prefixlen)


@attrs.frozen(slots=True, order=True, cache_hash=True)
class EndpointPeer:
    namespace: str
    labels: LabelItems
    cluster: str = ""
    """The peer's ClusterMesh cluster when it is not the target's, else "": a selector
    selects the local cluster only unless it names another (Cilium 1.19+)."""


@attrs.frozen(slots=True, order=True, cache_hash=True)
class FqdnPeer:
    """An external service by DNS name (``toFQDNs``), egress only."""

    name: str


Peer = EntityPeer | CidrPeer | EndpointPeer | FqdnPeer

CLUSTER_ENTITY = EntityPeer("cluster")
"""Every endpoint of the local cluster (a port the whole cluster uses, §D47)."""
HTTP = "http"
DNS = "dns"
ANY_NAME = "*"
"""A DNS rule for every name: ``matchPattern: "*"``, the visibility rule Cilium documents."""
DNS_PORT = 53
DNS_PORTS = ((DNS_PORT, "TCP"), (DNS_PORT, "UDP"))


@attrs.frozen(slots=True, order=True)
class Atom:
    """One allow entry a rule is made of: a direction, a peer, a protocol and port, and the
    L7 request if any; entries of one target that share all but the port merge into a rule."""

    direction: str
    peer: Peer
    protocol: str
    port: int
    l7: tuple[str, ...] = ()
    """``()`` for plain L4; ``("http", METHOD, path-regex)``; ``("dns", name)``."""


def peer_sort_key(peer: Peer) -> tuple[Any, ...]:
    if isinstance(peer, EntityPeer):
        return (0, peer.entity)
    if isinstance(peer, CidrPeer):
        return (1, peer.sort_key())
    if isinstance(peer, FqdnPeer):
        return (3, peer.name)
    return (2, peer.namespace, peer.labels, peer.cluster)


def host_cidr(ip: str) -> str | None:
    """``/32`` for IPv4 and ``/128`` for IPv6; None when ``ip`` is not an address."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return None
    return f"{addr}/{addr.max_prefixlen}"


@attrs.frozen(slots=True)
class Rule:
    """One rule of one direction with exactly one peer: its ports (and their HTTP rules), or
    its ICMP types, or the DNS names it may resolve (a resolver rule on port 53)."""

    direction: str
    peer: Peer
    ports: tuple[tuple[int, str], ...] = ()
    """Sorted ``(port, protocol)`` pairs."""
    icmps: tuple[tuple[str, int], ...] = ()
    """Sorted ``(family, type)`` pairs, family ``IPv4`` or ``IPv6``."""
    http: tuple[tuple[int, str, str, str], ...] = ()
    """Sorted ``(port, protocol, method, path regex)``; their ports are in ``ports`` too."""
    dns: tuple[str, ...] = ()
    """Sorted names a resolver rule allows on UDP/TCP 53."""
    more_cidrs: tuple[str, ...] = ()
    """For a CIDR peer: the other CIDRs on exactly the same ports, written as one ``toCIDR``
    list (sorted; the peer holds the first)."""
    declared: tuple[str, ...] = attrs.field(default=(), eq=False, order=False)
    """What cluster objects declare this rule for (``Kind ns/name (TCP/9443)``, sorted): said
    in its comment; not part of what the rule is (two rules that differ only here are one)."""

    @property
    def cidrs(self) -> tuple[str, ...]:
        return (self.peer.cidr, *self.more_cidrs) if isinstance(self.peer, CidrPeer) else ()

    @property
    def kind(self) -> str:
        return "dns" if self.dns else "icmp" if self.icmps else "ports"

    def atoms(self) -> list[Atom]:
        if self.more_cidrs:
            return [
                atom
                for cidr in self.cidrs
                for atom in attrs.evolve(self, peer=CidrPeer(cidr), more_cidrs=()).atoms()
            ]
        l7_ports = {(port, proto) for port, proto, _, _ in self.http}
        out = [
            Atom(self.direction, self.peer, proto, port)
            for port, proto in self.ports
            if (port, proto) not in l7_ports
        ]
        out += [
            Atom(self.direction, self.peer, proto, port, (HTTP, method, path))
            for port, proto, method, path in self.http
        ]
        out += [
            Atom(self.direction, self.peer, ICMPV4 if fam == "IPv4" else ICMPV6, t)
            for fam, t in self.icmps
        ]
        out += [
            Atom(self.direction, self.peer, proto, port, (DNS, name))
            for name in self.dns
            for port, proto in DNS_PORTS
        ]
        return out


_KIND_ORDER = {"ports": 0, "icmp": 1, "dns": 2}


def rule_sort_key(rule: Rule) -> tuple[Any, ...]:
    return (0 if rule.direction == INGRESS else 1, peer_sort_key(rule.peer), _KIND_ORDER[rule.kind])


def rules_from_atoms(atoms: Iterable[Atom]) -> list[Rule]:
    """Canonical rules: per (direction, peer) one rule for ports (with their HTTP rules), one
    for ICMP and one for DNS names, sorted."""
    ports: dict[tuple[str, Peer], set[tuple[int, str]]] = {}
    http: dict[tuple[str, Peer], set[tuple[int, str, str, str]]] = {}
    icmps: dict[tuple[str, Peer], set[tuple[str, int]]] = {}
    names: dict[tuple[str, Peer], set[str]] = {}
    for atom in atoms:
        key = (atom.direction, atom.peer)
        if atom.l7:
            if atom.l7[0] == HTTP:
                http.setdefault(key, set()).add((atom.port, atom.protocol, atom.l7[1], atom.l7[2]))
                ports.setdefault(key, set()).add((atom.port, atom.protocol))
            elif atom.l7[0] == DNS:
                names.setdefault(key, set()).add(atom.l7[1])
        elif atom.protocol in PORT_PROTOCOLS:
            ports.setdefault(key, set()).add((atom.port, atom.protocol))
        elif atom.protocol == ICMPV4:
            icmps.setdefault(key, set()).add(("IPv4", atom.port))
        elif atom.protocol == ICMPV6:
            icmps.setdefault(key, set()).add(("IPv6", atom.port))
    # Cilium merges the rules of one peer and port: a plain L4 rule beside a DNS rule on port
    # 53 would make the DNS rule match every name (ARCHITECTURE §D21). The DNS rule carries
    # that peer's port 53, L4 flows included. (An HTTP port is one entry with its rules.)
    for key, found in names.items():
        plain = ports.get(key)
        if plain is not None:
            plain -= {(DNS_PORT, "UDP"), (DNS_PORT, "TCP")}
        if ANY_NAME in found:  # every name: the names seen add nothing (they stay evidence)
            found.intersection_update((ANY_NAME,))
    _fold_into_cluster(ports, http)
    rules = [
        Rule(d, p, ports=tuple(sorted(v)), http=tuple(sorted(http.get((d, p), ()))))
        for (d, p), v in ports.items()
        if v
    ]
    rules += [Rule(d, p, icmps=tuple(sorted(v))) for (d, p), v in icmps.items()]
    rules += [Rule(d, p, dns=tuple(sorted(v))) for (d, p), v in names.items()]
    rules = _group_cidrs(rules)
    rules.sort(key=rule_sort_key)
    return rules


def _fold_into_cluster(
    ports: dict[tuple[str, Peer], set[tuple[int, str]]],
    http: dict[tuple[str, Peer], set[tuple[int, str, str, str]]],
) -> None:
    """A port the ``cluster`` entity has in a direction needs no pod peer of this cluster
    beside it (a rule written for the cluster replaces the rules of today's peers, also in a
    file an earlier run wrote them into); an HTTP rule on that port would be void too."""
    for direction in (INGRESS, EGRESS):
        wide = ports.get((direction, CLUSTER_ENTITY))
        if not wide:
            continue
        for key, found in ports.items():
            peer = key[1]
            if key[0] != direction or type(peer) is not EndpointPeer or peer.cluster:
                continue
            found -= wide
            if key in http:
                http[key] = {h for h in http[key] if (h[0], h[1]) not in wide}


def _group_cidrs(rules: list[Rule]) -> list[Rule]:
    """CIDR peers allowed exactly the same ports (or ICMP types) become one rule with a
    ``toCIDR`` list: one rule a reviewer reads instead of one per address."""
    groups: dict[tuple[Any, ...], list[Rule]] = {}
    out: list[Rule] = []
    for rule in rules:
        if isinstance(rule.peer, CidrPeer) and not rule.http:
            groups.setdefault((rule.direction, rule.ports, rule.icmps), []).append(rule)
        else:
            out.append(rule)
    for group in groups.values():
        cidrs = sorted({c for rule in group for c in rule.cidrs}, key=_cidr_order)
        first = group[0]
        out.append(attrs.evolve(first, peer=CidrPeer(cidrs[0]), more_cidrs=tuple(cidrs[1:])))
    return out


def _cidr_order(cidr: str) -> tuple[Any, ...]:
    return peer_sort_key(CidrPeer(cidr))


def chunks(items: Sequence[T]) -> list[Sequence[T]]:
    return [items[i : i + MAX_PORTS_PER_RULE] for i in range(0, len(items), MAX_PORTS_PER_RULE)]


def peer_selector(peer: EndpointPeer, policy_namespace: str) -> dict[str, str]:
    labels = dict(peer.labels)
    if peer.namespace != policy_namespace:
        labels[NAMESPACE_LABEL] = peer.namespace
    if peer.cluster:
        labels[CLUSTER_LABEL] = peer.cluster
    return dict(sorted(labels.items()))


MIN_PORT_RANGE = 3
"""Runs of at least this many consecutive observed ports become one ``port``/``endPort``
entry; shorter runs stay single ports (as readable, and the same rule)."""
MAX_PORT_RANGE_READ = 4096
"""A cpg-shaped entry spanning more ports than this is left to the human who wrote it."""


def port_entries(ports: Iterable[tuple[int, str]]) -> list[tuple[int, int, str]]:
    """``(first, last, protocol)`` entries for sorted ``(port, protocol)`` pairs: every run of
    consecutive ports that were all observed becomes one entry, never a range with a gap."""
    by_protocol: dict[str, list[int]] = {}
    for port, proto in ports:
        by_protocol.setdefault(proto, []).append(port)
    entries: list[tuple[int, int, str]] = []
    for proto, numbers in by_protocol.items():
        numbers.sort()
        start = 0
        for i in range(1, len(numbers) + 1):
            if i < len(numbers) and numbers[i] == numbers[i - 1] + 1:
                continue
            run = numbers[start:i]
            if len(run) >= MIN_PORT_RANGE:
                entries.append((run[0], run[-1], proto))
            else:
                entries.extend((n, n, proto) for n in run)
            start = i
    entries.sort(key=lambda e: (e[0], e[2]))
    return entries


def describe_peer(peer: Peer) -> str:
    if isinstance(peer, EntityPeer):
        return f"entity {peer.entity}"
    if isinstance(peer, CidrPeer):
        return peer.cidr
    if isinstance(peer, FqdnPeer):
        return peer.name
    where = f" in cluster {peer.cluster}" if peer.cluster else ""
    return f"{peer.namespace}/{format_labels(peer.labels)}{where}"


def describe_rule(rule: Rule) -> str:
    """The comment above a rule: its traffic and its peer, e.g. ``TCP/8080 from shop/app=web``."""
    if rule.dns:
        way = "from" if rule.direction == INGRESS else "to"
        names = "any name" if rule.dns == (ANY_NAME,) else _listed(rule.dns)
        return printable(f"DNS UDP/53, TCP/53 for {names} {way} {describe_peer(rule.peer)}")
    http: dict[tuple[int, str], list[str]] = {}
    for port, proto, method, path in rule.http:
        http.setdefault((port, proto), []).append(f"{method} {path}")
    if http:
        traffic = [
            f"{proto}/{port}"
            + (f" (HTTP {', '.join(http[(port, proto)])})" if (port, proto) in http else "")
            for port, proto in rule.ports
        ]
    else:
        traffic = [
            f"{proto}/{first}" + (f"-{last}" if last != first else "")
            for first, last, proto in port_entries(rule.ports)
        ]
    traffic += [f"ICMP{fam[2:]} type {t}" for fam, t in rule.icmps]
    way = "from" if rule.direction == INGRESS else "to"
    peer = _listed(rule.cidrs) if rule.more_cidrs else describe_peer(rule.peer)
    if rule.peer == CLUSTER_ENTITY and rule.ports:
        peer += _CLUSTER_WHY[rule.direction]
    return printable(f"{', '.join(traffic)} {way} {peer}")


DECLARED_BY = "; declared by "
"""Where a rule's comment says which cluster objects declare it (ARCHITECTURE §D58)."""


def declared_suffix(declared: Sequence[str]) -> str:
    """The end of a rule's comment naming the objects that declare it ("" for none)."""
    if not declared:
        return ""
    shown = "; ".join(declared[:COMMENT_ITEMS])
    more = len(declared) - COMMENT_ITEMS
    return printable(DECLARED_BY + shown + (f"; and {more} more" if more > 0 else ""))


def declared_pieces(suffix: str) -> tuple[str, ...]:
    """The objects a comment's :func:`declared_suffix` names (what a merge keeps)."""
    if not suffix.startswith(DECLARED_BY):
        return ()
    return tuple(p for p in suffix[len(DECLARED_BY) :].split("; ") if not p.startswith("and "))


def with_declared(rules: Iterable[Rule], sources: Iterable[Rule]) -> list[Rule]:
    """``rules`` each with what ``sources`` of the same direction, peer and kind say
    declares it (a merge's rules are made again from atoms, which carry no words)."""
    said: dict[tuple[str, Peer, str], set[str]] = {}
    for rule in sources:
        if rule.declared:
            said.setdefault((rule.direction, rule.peer, rule.kind), set()).update(rule.declared)
    if not said:
        return list(rules)
    out = []
    for rule in rules:
        found = said.get((rule.direction, rule.peer, rule.kind))
        out.append(attrs.evolve(rule, declared=tuple(sorted(found))) if found else rule)
    return out


COMMENT_ITEMS = 12
"""Peers or names a rule's comment lists before it says how many more the rule holds: the
comment is one line a reviewer reads, the rule below it lists every one."""


def _listed(items: tuple[str, ...]) -> str:
    if len(items) <= COMMENT_ITEMS:
        return ", ".join(items)
    shown = ", ".join(items[:COMMENT_ITEMS])
    return f"{shown} and {len(items) - COMMENT_ITEMS} more (listed below)"


_CLUSTER_WHY = {
    INGRESS: " (served to the whole cluster: workloads the capture did not show keep it)",
    EGRESS: " (a client of the whole cluster: pods the capture did not show stay in reach)",
}


def printable(text: str) -> str:
    """``text`` with every non-printable character escaped, so it is safe in one comment line."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )
