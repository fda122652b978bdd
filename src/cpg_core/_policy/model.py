"""Cilium policies as typed values, read once: the one place that knows how the
CiliumNetworkPolicy grammar is spelled (ARCHITECTURE §D54).

A document (a CiliumNetworkPolicy, a CiliumClusterwideNetworkPolicy with ``spec`` and
``specs``, or a Kubernetes NetworkPolicy already translated to one) becomes a
:class:`Policy` of :class:`Spec` values whose rules have their peers, ports and L7 parts
read with Cilium's defaults filled in: a port as Go parses it, ``port: 0`` with an
``endPort`` as the range it opens, an ``endPort`` below ``port`` as the single port,
``ANY`` for a missing protocol, default-deny per direction. Everything that judges or
shows a policy (the matcher, why, plan, verify, drift, pressure, lint's semantic checks,
the reports) reads these values; no other module of the core spells a key of the grammar
(a repository test holds that). What a value was written as is kept beside it
(``written``), for messages that quote the document, and so is where it is in its
document (``path``: ``spec.ingress[0].toPorts[1]``), which lint turns into a line.

A model is made once per document object and kept (the documents are never changed once
read; a :class:`~cpg_core._policy.policy_set.PolicySet` keeps its models for the run)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from cpg_core._base.cilium_version import Version, format_version
from cpg_core._base.documents import PolicyDocument
from cpg_core._base.labels import CLUSTER_LABEL, NAMESPACE_LABEL, NAMESPACE_LABELS_PREFIX
from cpg_core._policy.port_text import cilium_port

INGRESS = "ingress"
EGRESS = "egress"
INGRESS_DENY = "ingressDeny"
EGRESS_DENY = "egressDeny"
SECTIONS = (INGRESS, EGRESS, INGRESS_DENY, EGRESS_DENY)
"""A spec's rule lists, in the order they are written and shown."""
SECTIONS_BY_DIRECTION = (INGRESS, INGRESS_DENY, EGRESS, EGRESS_DENY)
"""The same, each direction's deny rules after its allow rules (the order checks go in)."""
ALLOW_SECTION = {INGRESS: INGRESS, EGRESS: EGRESS}
DENY_SECTION = {INGRESS: INGRESS_DENY, EGRESS: EGRESS_DENY}
CILIUM_KINDS = frozenset({"CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy"})
NAMESPACED_KIND = "CiliumNetworkPolicy"
CLUSTERWIDE_KIND = "CiliumClusterwideNetworkPolicy"
DEFAULT_DENY_FIELD = "enableDefaultDeny"
"""The spec field newer than the oldest Cilium lint knows (lint's version floors name it)."""
SUBJECT_FIELD = "endpointSelector"
"""The spec field a subject selector is written in (messages and narrowing name it)."""

_PEER_KEYS = {
    "from": ("fromEndpoints", "fromEntities", "fromCIDR", "fromCIDRSet", "fromNodes", "fromGroups"),
    "to": (
        "toEndpoints",
        "toEntities",
        "toCIDR",
        "toCIDRSet",
        "toNodes",
        "toGroups",
        "toFQDNs",
        "toServices",
    ),
}
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")

Requirement = tuple[str, str, str, tuple[str, ...]]
"""One term of a selector as Cilium reads it: (source, key, operator, values). The source is
``k8s``, ``reserved``, ``any`` (a key written without one) or another label source."""


def label_key(key: str) -> tuple[str, str]:
    """A selector key's source and key: ``k8s:app`` -> (k8s, app), ``app`` -> (any, app)."""
    source, colon, rest = key.partition(":")
    return (source, rest) if colon else ("any", key)


FIELD_FLOORS: dict[str, Version] = {DEFAULT_DENY_FIELD: (1, 16, 0)}
"""Fields cpg can write that older Cilium CRDs drop, with the first version that keeps them."""


def below_floor(version: Version, fields: Iterable[str]) -> list[str]:
    """The fields among ``fields`` that ``version`` would prune, as readable notes."""
    return [
        f"{field} CNP field (requires >= {format_version(FIELD_FLOORS[field])})"
        for field in fields
        if field in FIELD_FLOORS and version < FIELD_FLOORS[field]
    ]


def specs_police(document: object, direction: str) -> bool:
    """Whether a spec written in ``document`` (``spec`` or ``specs``, of any kind) has rules
    for ``direction``, allow or deny."""
    doc = _map(document)
    specs = [doc.get("spec"), *_seq(doc.get("specs"))]
    return any(isinstance(spec, Mapping) and read_spec(spec).polices(direction) for spec in specs)


def is_entity_field(name: str) -> bool:
    """Whether a field name is a rule's entities (either direction's)."""
    return name in ("fromEntities", "toEntities")


def side_of(section: str) -> str:
    """``from`` for ingress sections, ``to`` for egress ones."""
    return "from" if section.startswith(INGRESS) else "to"


def direction_of(section: str) -> str:
    """``ingress`` or ``egress``: the traffic direction a section polices."""
    return INGRESS if section.startswith(INGRESS) else EGRESS


def _seq(value: object) -> list[Any]:
    """A written list (anything else: empty, as the matcher always read it)."""
    return value if isinstance(value, list) else []


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@attrs.frozen(slots=True)
class Expression:
    """One ``matchExpressions`` term as written."""

    key: str
    operator: str
    values: tuple[str, ...]
    listed: bool = True
    """``values`` was written as a list (or left out)."""


@attrs.frozen(slots=True, eq=False)
class Selector:
    """A label selector: its labels and expressions as written (strings), and its terms as
    Cilium reads them (None: a selector the API server refuses, which selects nothing)."""

    written: object
    labels: tuple[tuple[str, str], ...]
    expressions: tuple[Expression, ...]
    terms: tuple[Requirement, ...] | None
    other_fields: tuple[str, ...]
    """Fields beyond the labels and expressions (a selector cpg did not write)."""
    path: tuple[str | int, ...] = ()
    """Where it is in its document (empty for a selector read on its own)."""
    peer_terms_kept: dict[tuple[str | None, bool, str | None], Any] = attrs.field(
        factory=dict, repr=False
    )

    @property
    def empty(self) -> bool:
        """``{}``: selects everything (as a subject, every pod of the namespace)."""
        return not self.labels and not self.expressions

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    @property
    def expressions_written(self) -> list[Any]:
        """``matchExpressions`` as written (empty when it is not a list)."""
        written = self.written
        found = written.get("matchExpressions") if isinstance(written, Mapping) else None
        return found if isinstance(found, list) else []

    @property
    def labels_written(self) -> list[tuple[Any, Any]]:
        """``matchLabels`` as written (keys and values not turned into strings)."""
        written = self.written
        labels = written.get("matchLabels") if isinstance(written, Mapping) else None
        return list(labels.items()) if isinstance(labels, Mapping) else []

    @property
    def labels_only(self) -> bool:
        """Only ``matchLabels`` written, and at least one: the selectors cpg writes."""
        written = self.written
        return bool(self.labels) and isinstance(written, Mapping) and len(written) == 1

    @property
    def plain(self) -> bool:
        """Nothing but labels and expressions written (either may be empty)."""
        return not self.other_fields

    def peer_terms(
        self, namespace: str | None, clusterwide: bool, local_cluster: str | None
    ) -> tuple[Requirement, ...] | None:
        """The terms as a peer selector of a policy in ``namespace`` (``clusterwide``: of a
        clusterwide policy; neither: the selector as written), kept per reading."""
        key = (namespace, clusterwide, local_cluster)
        try:
            return self.peer_terms_kept[key]  # type: ignore[no-any-return]
        except KeyError:
            pass
        terms = self.terms
        if terms is not None and (namespace is not None or clusterwide):
            terms = tuple(peer_requirements(list(terms), namespace, local_cluster))
        self.peer_terms_kept[key] = terms
        return terms


LOCAL_CLUSTER = "LocalCluster"
"""The operator of the requirement policy-default-local-cluster adds: the peer's cluster is
the local one. A pod whose cluster the capture does not say counts as local (Hubble names a
pod's cluster only in a mesh); Cilium's own identities (world, host, nodes) carry no cluster
label, so the term never holds for them, whatever else the selector says (a namespace
``NotIn`` or ``DoesNotExist`` does not open a selector to the world)."""


def _names(reqs: Iterable[Requirement], key: str) -> bool:
    return any(k == key and source in ("k8s", "any") for source, k, _, _ in reqs)


def peer_requirements(
    reqs: list[Requirement], policy_ns: str | None, local_cluster: str | None
) -> list[Requirement]:
    """What a peer selector of a policy in ``policy_ns`` (None: clusterwide) selects, with the
    terms Cilium adds: the namespace (or "has a namespace"), and the local cluster."""
    if any(source == "reserved" for source, _, _, _ in reqs):
        return reqs  # Cilium's own identities: no namespace, no cluster
    out = list(reqs)
    if not _names(reqs, NAMESPACE_LABEL):
        if policy_ns is None:
            out.append(("k8s", NAMESPACE_LABEL, "Exists", ()))
        elif not any(
            k.startswith(NAMESPACE_LABELS_PREFIX) and source in ("k8s", "any")
            for source, k, _, _ in reqs
        ):
            out.append(("k8s", NAMESPACE_LABEL, "In", (policy_ns,)))
    if local_cluster is not None and not _names(reqs, CLUSTER_LABEL):
        out.append(("k8s", CLUSTER_LABEL, LOCAL_CLUSTER, (local_cluster,)))
    return out


def read_selector(written: object, path: tuple[str | int, ...] = ()) -> Selector:
    """A selector as the API server reads it (terms None when it would refuse it: a term
    that can select nothing, an unknown operator, In/NotIn without values)."""
    if not isinstance(written, Mapping):
        return Selector(written, (), (), None, (), path)
    raw_labels = written.get("matchLabels") or {}
    raw_expressions = written.get("matchExpressions") or []
    other = tuple(str(k) for k in written if k not in ("matchLabels", "matchExpressions"))
    if not isinstance(raw_labels, Mapping) or not isinstance(raw_expressions, list):
        return Selector(written, (), (), None, other, path)
    labels = tuple((str(k), "" if v is None else str(v)) for k, v in raw_labels.items())
    terms: list[Requirement] = []
    accepted = True
    for key, value in labels:
        source, name = label_key(key)
        terms.append((source, name, "In", (value,)))
    expressions: list[Expression] = []
    for item in raw_expressions:
        if not isinstance(item, Mapping):
            accepted = False
            continue
        key, op = str(item.get("key", "")), item.get("operator")
        values = item.get("values") or []
        shown_values = tuple(str(v) for v in values) if isinstance(values, list) else ()
        expressions.append(Expression(key, str(op), shown_values, isinstance(values, list)))
        if (
            not isinstance(values, list)
            or op not in _OPERATORS
            or (op in ("In", "NotIn") and not values)
        ):
            accepted = False
            continue
        source, name = label_key(key)
        terms.append((source, name, str(op), shown_values))
    return Selector(
        written, labels, tuple(expressions), tuple(terms) if accepted else None, other, path
    )


_SELECTORS: dict[int, tuple[object, Selector]] = {}
_SELECTORS_MAX = 1 << 16


def selector_model(written: object) -> Selector:
    """A written selector read once and kept while it lives (see :func:`policy_model`)."""
    key = id(written)
    known = _SELECTORS.get(key)
    if known is not None and known[0] is written:
        return known[1]
    read = read_selector(written)
    if len(_SELECTORS) >= _SELECTORS_MAX:
        _SELECTORS.clear()
    _SELECTORS[key] = (written, read)
    return read


@attrs.frozen(slots=True)
class PortEntry:
    """One entry of a port rule's ``ports``."""

    protocol: str
    """As written in capitals, ``ANY`` when left out."""
    span: tuple[int, int] | None
    """The ports it opens as Cilium normalises them; None for a named port."""
    port_written: Any
    end_written: Any
    protocol_written: Any
    written: Mapping[str, Any]
    path: tuple[str | int, ...] = ()

    @property
    def named(self) -> bool:
        return self.span is None

    @property
    def port_text(self) -> str:
        """The port as written (``0`` when left out), for comparing entries."""
        return str(self.written.get("port", "0"))


def read_port(written: Mapping[str, Any], path: tuple[str | int, ...] = ()) -> PortEntry:
    raw = written.get("port")
    end = written.get("endPort")
    return PortEntry(
        str(written.get("protocol") or "ANY"),
        port_range(raw, end),
        raw,
        end,
        written.get("protocol"),
        written,
        path,
    )


def port_range(raw: object, end: object) -> tuple[int, int] | None:
    """A port entry's range as Cilium normalises it: the port read as Go reads a literal
    (``"0100"`` is 64), ``port: 0`` (or none) every port unless an ``endPort`` closes the
    range (``0``-``endPort``), an ``endPort`` below ``port`` the single port; None for a
    named port cpg cannot resolve."""
    low = 0 if raw in (None, "") else cilium_port(str(raw))
    try:
        high = int(end) if end not in (None, "") else 0  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
    if low is None:
        return None
    if low == 0:
        return (0, high if high > 0 else 65535)
    return (low, high if high > low else low)


_EVERY_PORT = PortEntry("ANY", (0, 65535), None, None, None, {})


@attrs.frozen(slots=True)
class NameMatch:
    """A DNS name match (``toFQDNs`` and DNS L7 rules): an exact name or a pattern."""

    name: str
    pattern: str
    written: object
    path: tuple[str | int, ...] = ()

    @property
    def pattern_written(self) -> object:
        return _map(self.written).get("matchPattern")

    @property
    def pattern_path(self) -> tuple[str | int, ...]:
        return (*self.path, "matchPattern")

    @property
    def text(self) -> str:
        """The name, or else the pattern (what messages show)."""
        return self.name or self.pattern


def read_name_match(written: object, path: tuple[str | int, ...] = ()) -> NameMatch:
    entry = _map(written)
    name, pattern = entry.get("matchName"), entry.get("matchPattern")
    return NameMatch(str(name) if name else "", str(pattern) if pattern else "", written, path)


@attrs.frozen(slots=True)
class HttpRule:
    method: str
    path: str
    written: Mapping[str, Any]
    at: tuple[str | int, ...] = ()
    """Where the rule is written in its document."""


@attrs.frozen(slots=True)
class PortRule:
    """One entry of a rule's ``toPorts``: its ports and the L7 rules on them."""

    ports: tuple[PortEntry, ...]
    """As written (none written: every port, see :attr:`effective_ports`)."""
    http: tuple[HttpRule, ...]
    dns: tuple[NameMatch, ...]
    l7_kinds: tuple[str, ...]
    """The kinds of L7 rules written (``http``, ``dns``, ``kafka``, ``l7proto``…)."""
    has_http: bool
    has_dns: bool
    server_names: tuple[str, ...]
    written: Mapping[str, Any]
    path: tuple[str | int, ...] = ()

    @property
    def has_kafka(self) -> bool:
        rules = self.written.get("rules")
        return isinstance(rules, Mapping) and bool(rules.get("kafka"))

    def l7_path(self, kind: str) -> tuple[str | int, ...]:
        """Where the port rule's L7 rules of ``kind`` are written."""
        return (*self.path, "rules", kind)

    @property
    def effective_ports(self) -> tuple[PortEntry, ...]:
        return self.ports or (_EVERY_PORT,)

    @property
    def has_l7(self) -> bool:
        return bool(self.l7_kinds)


def read_port_rule(written: object, path: tuple[str | int, ...] = ()) -> PortRule | None:
    if not isinstance(written, Mapping):
        return None
    ports = tuple(
        read_port(p, (*path, "ports", m))
        for m, p in enumerate(_seq(written.get("ports")))
        if isinstance(p, Mapping)
    )
    rules = written.get("rules")
    l7 = rules if isinstance(rules, Mapping) else {}
    http = tuple(
        HttpRule(
            str(h.get("method") or ""), str(h.get("path") or ""), h, (*path, "rules", "http", n)
        )
        for n, h in enumerate(_seq(l7.get("http")))
        if isinstance(h, Mapping)
    )
    dns = tuple(
        read_name_match(d, (*path, "rules", "dns", m))
        for m, d in enumerate(_seq(l7.get("dns")))
        if isinstance(d, Mapping)
    )
    names = tuple(str(n) for n in _seq(written.get("serverNames")))
    kinds = tuple(str(k) for k in l7)
    return PortRule(
        ports, http, dns, kinds, bool(l7.get("http")), bool(l7.get("dns")), names, written, path
    )


ICMP_TYPE_NAMES: dict[str, dict[str, int]] = {
    "IPv4": {
        "EchoReply": 0,
        "DestinationUnreachable": 3,
        "Redirect": 5,
        "Echo": 8,
        "EchoRequest": 8,
        "RouterAdvertisement": 9,
        "RouterSelection": 10,
        "TimeExceeded": 11,
        "ParameterProblem": 12,
        "Timestamp": 13,
        "TimestampReply": 14,
        "Photuris": 40,
        "ExtendedEchoRequest": 42,
        "ExtendedEchoReply": 43,
    },
    "IPv6": {
        "DestinationUnreachable": 1,
        "PacketTooBig": 2,
        "TimeExceeded": 3,
        "ParameterProblem": 4,
        "EchoRequest": 128,
        "EchoReply": 129,
        "MulticastListenerQuery": 130,
        "MulticastListenerReport": 131,
        "MulticastListenerDone": 132,
        "RouterSolicitation": 133,
        "RouterAdvertisement": 134,
        "NeighborSolicitation": 135,
        "NeighborAdvertisement": 136,
        "RedirectMessage": 137,
        "RouterRenumbering": 138,
        "ICMPNodeInformationQuery": 139,
        "ICMPNodeInformationResponse": 140,
        "InverseNeighborDiscoverySolicitation": 141,
        "InverseNeighborDiscoveryAdvertisement": 142,
        "HomeAgentAddressDiscoveryRequest": 144,
        "HomeAgentAddressDiscoveryReply": 145,
        "MobilePrefixSolicitation": 146,
        "MobilePrefixAdvertisement": 147,
        "DuplicateAddressRequestCodeSuffix": 157,
        "DuplicateAddressConfirmationCodeSuffix": 158,
        "ExtendedEchoRequest": 160,
        "ExtendedEchoReply": 161,
    },
}
"""The ICMP type names Cilium accepts, per family, and their numbers."""


@attrs.frozen(slots=True)
class IcmpField:
    """One ICMP type a rule names: its family and type as written, and the (family, number)
    Cilium reads (None: one it would refuse)."""

    family_written: object
    type_written: object
    number: tuple[str, int] | None
    path: tuple[str | int, ...] = ()
    """Where its type is written."""


def icmp_type(field: Mapping[str, Any]) -> tuple[str, int] | None:
    """An ICMP field's family and type number (a name read in its family), or None when
    Cilium would refuse it."""
    family = str(field.get("family") or "IPv4")
    raw = field.get("type")
    if family not in ICMP_TYPE_NAMES or raw is None or isinstance(raw, bool):
        return None
    text = str(raw)
    if text.isdigit():
        number = int(text)
        return (family, number) if number <= 255 else None
    number_of = ICMP_TYPE_NAMES[family].get(text)
    return None if number_of is None else (family, number_of)


@attrs.frozen(slots=True)
class CidrEntry:
    """A CIDR peer: ``fromCIDR``/``toCIDR`` (no exceptions) or a CIDR set entry."""

    cidr: object
    """As written (None for a set entry that names a CIDR group instead)."""
    excepts: tuple[object, ...]
    from_set: bool
    path: tuple[str | int, ...] = ()
    """Where the CIDR is written (a set entry: its ``cidr``)."""


@attrs.frozen(slots=True, eq=False)
class Rule:
    """One rule of a spec's section, its peers and ports read."""

    section: str
    index: int
    side: str
    """``from`` (ingress sections) or ``to`` (egress ones)."""
    endpoints: tuple[Selector, ...]
    entities: tuple[str, ...]
    cidrs: tuple[CidrEntry, ...]
    fqdns: tuple[NameMatch, ...]
    services: tuple[Any, ...]
    nodes: tuple[Selector, ...]
    groups: tuple[Any, ...]
    requires: tuple[Selector, ...]
    peer_fields: tuple[str, ...]
    """The peer fields written (an empty list counts: it is written)."""
    port_rules: tuple[PortRule, ...]
    icmps: tuple[IcmpField, ...]
    has_ports: bool
    """``toPorts`` written non-empty."""
    has_icmps: bool
    authentication: object
    written: Mapping[str, Any]
    path: tuple[str | int, ...] = ()
    """Where the rule is in its document (``spec.ingress[0]``)."""

    @property
    def endpoint_field(self) -> str:
        return self.side + "Endpoints"

    @property
    def entity_field(self) -> str:
        return self.side + "Entities"

    @property
    def requires_fields_written(self) -> list[str]:
        """The requirement fields written non-empty (deprecated peers), either direction's."""
        return [key for key in ("fromRequires", "toRequires") if self.written.get(key)]

    @property
    def entities_written(self) -> list[tuple[str, int, Any]]:
        """(field, index, entity) of every entity written, either direction's field."""
        return [
            (key, n, entity)
            for key in ("fromEntities", "toEntities")
            for n, entity in enumerate(_seq(self.written.get(key)))
        ]

    @property
    def endpoints_both_sides(self) -> list[Selector]:
        """Every endpoint selector written, in either direction's field, with its path."""
        return self._both_sides("Endpoints", self.endpoints)

    @property
    def requires_both_sides(self) -> list[Selector]:
        """Every requirement selector written, in either direction's field, with its path."""
        return self._both_sides("Requires", self.requires)

    def _both_sides(self, field: str, own: tuple[Selector, ...]) -> list[Selector]:
        other = "to" if self.side == "from" else "from"
        theirs = [
            read_selector(selector, (*self.path, other + field, n))
            for n, selector in enumerate(_seq(self.written.get(other + field)))
        ]
        return [*own, *theirs] if self.side == "from" else [*theirs, *own]

    @property
    def cidr_sets_written(self) -> list[CidrEntry]:
        """Every CIDR set entry written, in either direction's field (``cidrs`` holds the
        rule's own side's, as it reads them)."""
        own = [entry for entry in self.cidrs if entry.from_set]
        other = "toCIDRSet" if self.side == "from" else "fromCIDRSet"
        theirs = [
            CidrEntry(
                e.get("cidr"), tuple(_seq(e.get("except"))), True, (*self.path, other, n, "cidr")
            )
            for n, e in enumerate(_seq(self.written.get(other)))
            if isinstance(e, Mapping)
        ]
        return [*own, *theirs] if self.side == "from" else [*theirs, *own]

    @property
    def has_fqdn_field(self) -> bool:
        """``toFQDNs`` written non-empty (in a rule of either direction)."""
        return bool(self.written.get("toFQDNs"))

    @property
    def fqdn_path(self) -> tuple[str | int, ...]:
        return (*self.path, "toFQDNs")

    @property
    def peers_key(self) -> str:
        """Its peers as one comparable value (every field but the ports and authentication)."""
        peers = {
            k: v for k, v in self.written.items() if k not in ("toPorts", "icmps", "authentication")
        }
        return json.dumps(peers, sort_keys=True, default=str)

    @property
    def has_l3(self) -> bool:
        return bool(self.peer_fields)

    @property
    def has_l4(self) -> bool:
        return self.has_ports or self.has_icmps

    @property
    def direction(self) -> str:
        return direction_of(self.section)

    @property
    def deny(self) -> bool:
        return self.section in (INGRESS_DENY, EGRESS_DENY)

    @property
    def empty(self) -> bool:
        """``{}``: selects no peer (Cilium's default-deny idiom)."""
        return not self.has_l3 and not self.has_l4

    @property
    def where(self) -> str:
        return f"{self.section}[{self.index}]"

    @property
    def peers_written(self) -> list[tuple[str, Any]]:
        """The peer fields written and their values, in the grammar's order."""
        return [(key, self.written[key]) for key in self.peer_fields]

    @property
    def fqdns_written(self) -> list[object]:
        return [m.written for m in self.fqdns]

    def without_l7(self) -> Rule:
        """The rule with its L7 rules taken off (what it admits at L4)."""
        return attrs.evolve(
            self,
            port_rules=tuple(
                attrs.evolve(p, http=(), dns=(), l7_kinds=(), has_http=False, has_dns=False)
                for p in self.port_rules
            ),
        )


def read_rule(
    written: object, section: str, index: int = 0, base: tuple[str | int, ...] = ()
) -> Rule | None:
    """One rule of ``section`` (None: not a mapping, which selects nothing); ``base`` is
    where its spec is in the document."""
    if not isinstance(written, Mapping):
        return None
    side = side_of(section)
    keys = _PEER_KEYS[side]
    path = (*base, section, index)
    cidrs = [
        CidrEntry(c, (), False, (*path, side + "CIDR", n))
        for n, c in enumerate(_seq(written.get(side + "CIDR")))
    ]
    cidrs += [
        CidrEntry(
            e.get("cidr"), tuple(_seq(e.get("except"))), True, (*path, side + "CIDRSet", n, "cidr")
        )
        for n, e in enumerate(_seq(written.get(side + "CIDRSet")))
        if isinstance(e, Mapping)
    ]
    icmps = tuple(
        IcmpField(
            f.get("family"), f.get("type"), icmp_type(f), (*path, "icmps", n, "fields", m, "type")
        )
        for n, icmp in enumerate(_seq(written.get("icmps")))
        for m, f in enumerate(_seq(_map(icmp).get("fields")))
        if isinstance(f, Mapping)
    )
    port_rules = tuple(
        p
        for p in (
            read_port_rule(p, (*path, "toPorts", n))
            for n, p in enumerate(_seq(written.get("toPorts")))
        )
        if p is not None
    )
    return Rule(
        section=section,
        index=index,
        side=side,
        endpoints=tuple(
            read_selector(s, (*path, side + "Endpoints", n))
            for n, s in enumerate(_seq(written.get(side + "Endpoints")))
        ),
        entities=tuple(str(e) for e in _seq(written.get(side + "Entities"))),
        cidrs=tuple(cidrs),
        fqdns=tuple(
            read_name_match(f, (*path, "toFQDNs", n))
            for n, f in enumerate(_seq(written.get("toFQDNs") if side == "to" else None))
            if isinstance(f, Mapping)
        ),
        services=tuple(_seq(written.get("toServices") if side == "to" else None)),
        nodes=tuple(read_selector(s) for s in _seq(written.get(side + "Nodes"))),
        groups=tuple(_seq(written.get(side + "Groups"))),
        requires=tuple(
            read_selector(s, (*path, side + "Requires", n))
            for n, s in enumerate(_seq(written.get(side + "Requires")))
        ),
        peer_fields=tuple(k for k in keys if k in written),
        port_rules=port_rules,
        icmps=icmps,
        has_ports=bool(written.get("toPorts")),
        has_icmps=bool(written.get("icmps")),
        authentication=written.get("authentication"),
        written=written,
        path=path,
    )


@attrs.frozen(slots=True, eq=False)
class Spec:
    """One spec of a policy: its subject and its rules by section."""

    index: int
    """Its place in the policy (0: ``spec``; then ``specs`` in order, after ``spec``)."""
    in_specs: bool
    """Written in ``specs`` (a list), not as the single ``spec``."""
    subject: Selector | None
    """The endpoint selector (None: none written)."""
    node_subject: Selector | None
    sections: Mapping[str, tuple[Rule, ...]]
    default_deny_off: frozenset[str]
    """The directions ``enableDefaultDeny`` turns off (``ingress``/``egress``)."""
    default_deny_written: object
    description: str
    written: Mapping[str, Any]

    def rules(self, section: str) -> tuple[Rule, ...]:
        return self.sections.get(section, ())

    def written_rules(self, section: str) -> list[Any]:
        """The section's list as written (its entries that are not mappings included)."""
        return _seq(self.written.get(section))

    def polices(self, direction: str) -> bool:
        """Whether the spec has rules for ``direction``, allow or deny: an endpoint it
        selects is policed in that direction."""
        return bool(self.written.get(direction)) or bool(
            self.written.get(DENY_SECTION.get(direction, ""))
        )

    def enforces(self, direction: str) -> bool:
        """Whether it puts an endpoint it selects into default-deny for ``direction``."""
        return self.polices(direction) and direction not in self.default_deny_off

    @property
    def path(self) -> tuple[str | int, ...]:
        """Where the spec is in its document (``spec`` or ``specs[n]``)."""
        return ("specs", self.index - self.first_in_specs) if self.in_specs else ("spec",)

    first_in_specs: int = 0


def read_spec(
    written: Mapping[str, Any], index: int = 0, *, in_specs: bool = False, first: int = 0
) -> Spec:
    base: tuple[str | int, ...] = ("specs", index - first) if in_specs else ("spec",)
    subject = written.get(SUBJECT_FIELD)
    node = written.get("nodeSelector")
    default_deny = written.get(DEFAULT_DENY_FIELD)
    off = (
        frozenset(d for d in (INGRESS, EGRESS) if default_deny.get(d) is False)
        if isinstance(default_deny, Mapping)
        else frozenset()
    )
    sections = {
        section: tuple(
            rule
            for rule in (
                read_rule(r, section, n, base) for n, r in enumerate(_seq(written.get(section)))
            )
            if rule is not None
        )
        for section in SECTIONS
    }
    description = written.get("description")
    return Spec(
        index=index,
        in_specs=in_specs,
        subject=None if subject is None else read_selector(subject, (*base, SUBJECT_FIELD)),
        node_subject=None if node is None else read_selector(node, (*base, "nodeSelector")),
        sections=sections,
        default_deny_off=off,
        default_deny_written=default_deny,
        description=str(description) if description else "",
        written=written,
        first_in_specs=first,
    )


def written_specs(document: Mapping[str, Any]) -> tuple[Spec, ...]:
    """Every spec a document writes as a mapping, an empty one too, read where it stands
    (``spec``, ``specs[n]``): what Cilium checks, and what an edit of the file addresses.
    Read once and kept while the document lives, as :func:`policy_model` keeps a policy
    (whose specs these are, but for an empty ``spec``)."""
    key = id(document)
    known = _WRITTEN.get(key)
    if known is not None and known[0] is document:
        return known[1]
    single = document.get("spec")
    specs: tuple[Spec, ...] = (read_spec(single),) if isinstance(single, Mapping) else ()
    specs += tuple(
        read_spec(item, n + 1, in_specs=True, first=1)
        for n, item in enumerate(_seq(document.get("specs")))
        if isinstance(item, Mapping)
    )
    if len(_WRITTEN) >= _READ_MAX:
        _WRITTEN.clear()
    _WRITTEN[key] = (document, specs)
    return specs


@attrs.frozen(slots=True, eq=False)
class Policy:
    """One policy document, read."""

    kind: str
    name: str
    namespace: str | None
    """Where it applies: a CiliumNetworkPolicy's namespace (``default`` when the file names
    none, as kubectl applies it); None for clusterwide kinds."""
    written_namespace: str
    specs: tuple[Spec, ...]
    document: PolicyDocument

    @property
    def cilium(self) -> bool:
        """A CiliumNetworkPolicy or CiliumClusterwideNetworkPolicy."""
        return self.kind in CILIUM_KINDS

    @property
    def label(self) -> str:
        """``namespace/name`` as written (``/name`` when the file names no namespace)."""
        return f"{self.written_namespace}/{self.name or '?'}"

    @property
    def display_name(self) -> str:
        """``namespace/name``, or ``name`` for a clusterwide policy."""
        return self.label.lstrip("/")

    def rules(self, section: str) -> Iterator[tuple[Spec, Rule]]:
        for spec in self.specs:
            for rule in spec.rules(section):
                yield spec, rule


def read_policy(document: PolicyDocument) -> Policy:
    """A policy document as typed values (a document of another kind: a Policy with no
    specs, so judging skips it)."""
    doc: Mapping[str, Any] = document if isinstance(document, Mapping) else {}
    kind = str(doc.get("kind") or "")
    meta = _map(doc.get("metadata"))
    written_ns = meta.get("namespace", "")
    namespace: str | None = None
    if kind == NAMESPACED_KIND:
        namespace = str(written_ns) if written_ns else "default"
    specs: tuple[Spec, ...] = ()
    if kind in CILIUM_KINDS:  # an empty spec selects nothing and is left out
        specs = tuple(spec for spec in written_specs(doc) if spec.in_specs or spec.written)
    return Policy(
        kind=kind,
        name=str(meta.get("name", "") or ""),
        namespace=namespace,
        written_namespace=str(written_ns or ""),
        specs=specs,
        document=document,
    )


_READ: dict[int, tuple[object, Policy]] = {}
_WRITTEN: dict[int, tuple[object, tuple[Spec, ...]]] = {}
_READ_MAX = 1 << 15


def policy_model(document: PolicyDocument) -> Policy:
    """The model of ``document``, read once and kept while the document lives (the entry
    holds the document, so its id cannot stand for another while kept)."""
    key = id(document)
    known = _READ.get(key)
    if known is not None and known[0] is document:
        return known[1]
    model = read_policy(document)
    if len(_READ) >= _READ_MAX:
        _READ.clear()
    _READ[key] = (document, model)
    return model


def document_namespace(policy: object) -> str | None:
    """The namespace a CiliumNetworkPolicy applies in (``default`` when its file names none,
    as kubectl applies it), or None for every other kind (clusterwide)."""
    if not isinstance(policy, Mapping) or policy.get("kind") != NAMESPACED_KIND:
        return None
    meta = policy.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return str(namespace) if namespace else "default"


def selector_labels(
    node: Any, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], str, str]]:
    """Every selector label of a document, wherever a selector is written (a peer, a
    subject, a ClusterNetworkPolicy's namespace or pod selector): (path, key, value)."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            here = (*path, str(key))
            if key == "matchLabels" and isinstance(value, Mapping):
                for k, v in value.items():
                    yield (*here, str(k)), str(k), "" if v is None else str(v)
            elif key == "matchExpressions" and isinstance(value, list):
                for n, expression in enumerate(value):
                    if isinstance(expression, Mapping):
                        values = expression.get("values")
                        for v in values if isinstance(values, list) and values else [""]:
                            yield (*here, n), str(expression.get("key", "")), str(v)
            elif key != "metadata":
                yield from selector_labels(value, here)
    elif isinstance(node, list):
        for n, item in enumerate(node):
            yield from selector_labels(item, (*path, n))
