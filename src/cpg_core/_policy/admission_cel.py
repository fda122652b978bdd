"""Lint's rules as CEL for a ValidatingAdmissionPolicy (§D62): each rule
that can be judged on one document becomes a validation the API server evaluates on every
create and update of a Cilium policy, so a tenant's ``kubectl apply`` meets the checks a pull
request meets. An expression is true when the document passes the rule.

The expressions keep to what the API server's CEL offers every supported release (1.30 on):
the standard macros (``all``, ``exists``, ``filter``, ``map``), ``has``, ``size``, string
``matches`` (RE2) and ``startsWith``; they read ``object`` and the policy's ``variables``
(declared once, below); every iteration is over a list or map of the document, each guarded
by ``has`` so that an absent field is a pass, never an error. Rules that need more than one
document, or what the API server has already removed or refused before admission, are listed
in :data:`NOT_AT_ADMISSION` with why."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

import attrs

from cpg_core._base.cilium_version import Version
from cpg_core._base.labels import CLUSTER_LABEL, NAMESPACE_LABEL
from cpg_core._policy.acceptance import _EGRESS_PEERS, _INGRESS_PEERS, _SECTIONS
from cpg_core._policy.model import ICMP_TYPE_NAMES, _seq
from cpg_core._policy.netpol_validation import IPBLOCK_FIXED_SINCE
from cpg_core._policy.port_text import GO_UINT


@attrs.frozen(slots=True)
class Variable:
    """A value the policy computes once per request (``variables.NAME``)."""

    name: str
    expression: str


@attrs.frozen(slots=True)
class AdmissionCheck:
    """One lint rule as a CEL expression: true when the document passes it."""

    code: str
    expression: str


@attrs.frozen(slots=True)
class NotAtAdmission:
    """A lint rule the admission guard does not enforce, and why."""

    code: str
    why: str


def _every_spec(condition: str) -> str:
    """Every spec ``s`` of the policy (``spec``, and each of ``specs``) holds ``condition``."""
    return f"variables.specs.all(s, {condition})"


def _each_rule(condition: str, sections: tuple[str, ...] = _SECTIONS) -> str:
    """Every rule ``r`` of every spec ``s`` holds ``condition``."""
    parts = [f"(!has(s.{section}) || s.{section}.all(r, {condition}))" for section in sections]
    return _every_spec(" && ".join(parts))


def _at_most_one_peer(peers: tuple[str, ...]) -> str:
    present = " + ".join(f"(has(r.{p}) && size(r.{p}) > 0 ? 1 : 0)" for p in peers)
    return f"{present} <= 1"


def _selector_terms_valid(selector: str) -> str:
    """Kubernetes' rule for matchExpressions: In/NotIn need values, Exists/DoesNotExist
    take none."""
    return (
        f"(!has({selector}.matchExpressions) || {selector}.matchExpressions.all(e, "
        "((e.operator != 'In' && e.operator != 'NotIn') || (has(e.values) && size(e.values) > 0))"
        " && ((e.operator != 'Exists' && e.operator != 'DoesNotExist') || !has(e.values) || "
        "size(e.values) == 0)))"
    )


def _nonempty(field: str) -> str:
    """``field`` written, and not empty."""
    return f"(has({field}) && size({field}) > 0)"


def _empty_selector(selector: str) -> str:
    """A selector with no label and no expression: it selects everything."""
    return (
        f"!{_nonempty(selector + '.matchLabels')} && !{_nonempty(selector + '.matchExpressions')}"
    )


def _default_deny_idiom() -> str:
    """The spec's rules are ``{}`` only, allow rules and at least one: Cilium's default-deny
    idiom, meant to select every pod of the namespace."""
    count = " + ".join(f"(has(s.{x}) ? size(s.{x}) : 0)" for x in ("ingress", "egress"))
    return (
        f"({count}) > 0 && (!has(s.ingress) || s.ingress.all(r, size(r) == 0)) && "
        "(!has(s.egress) || s.egress.all(r, size(r) == 0)) && "
        f"!{_nonempty('s.ingressDeny')} && !{_nonempty('s.egressDeny')}"
    )


def _side_rules(condition: str) -> str:
    """Every rule holds ``condition``, with ``SIDE`` the side its peers are written on
    (``from`` in the ingress sections, ``to`` in the egress ones)."""
    return (
        _each_rule(condition.replace("SIDE", "from"), ("ingress", "ingressDeny"))
        + " && "
        + _each_rule(condition.replace("SIDE", "to"), ("egress", "egressDeny"))
    )


_WORLD = "['world', 'all', 'world-ipv4', 'world-ipv6']"
_EVERYWHERE = "['0.0.0.0/0', '::/0']"
_INIT = "'reserved:init'"


_SOURCES = ("k8s", "any", "reserved", "cilium", "unspec", "container")
"""Label sources a selector key may start with (``k8s:app``); the label is checked without."""
_LABEL_KEY = (
    "^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
"""A Kubernetes label key: a DNS-subdomain prefix and ``/`` (optional), then a name (their
lengths are checked beside it)."""
_LABEL_VALUE = "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"


def _label_key_valid(key: str, sourced: bool = True) -> str:
    """``key`` (without its label source, when ``sourced``: Cilium's selectors) is a key
    Kubernetes takes: the name at most 63 characters, the prefix at most 253."""
    sources = "|".join(_SOURCES)
    unsourced = (
        f"({key}.matches('^({sources}):') ? {key}.substring({key}.indexOf(':') + 1) : {key})"
        if sourced
        else key
    )
    return (
        f"[{unsourced}].all(u, u.matches('{_LABEL_KEY}') && (u.lastIndexOf('/') < 0 ? "
        "size(u) <= 63 : u.lastIndexOf('/') <= 253 && size(u) - u.lastIndexOf('/') <= 64))"
    )


def _label_value_valid(value: str) -> str:
    return f"(size({value}) <= 63 && {value}.matches('{_LABEL_VALUE}'))"


def _selector_labels_valid(selector: str, sourced: bool = True) -> str:
    """Every label of ``selector`` is one Kubernetes takes."""
    return (
        f"(!has({selector}.matchLabels) || {selector}.matchLabels.all(k, "
        f"{_label_key_valid('k', sourced)} && "
        f"{_label_value_valid(f'{selector}.matchLabels[k]')})) && "
        f"(!has({selector}.matchExpressions) || {selector}.matchExpressions.all(e, "
        f"{_label_key_valid('e.key', sourced)} && "
        f"(!has(e.values) || e.values.all(v, {_label_value_valid('v')}))))"
    )


def _rules_lists(section: str, items: str) -> str:
    """For each rule of ``section`` of spec ``s``, the list ``items`` makes of rule ``r``."""
    return f"(has(s.{section}) ? s.{section}.map(r, {items}) : [])"


def _peer_selector_lists() -> str:
    """Of spec ``s``: its subject (endpointSelector, nodeSelector) and each rule's endpoint
    peers, a list per place: the selectors Cilium validates as Kubernetes does."""
    lists = [
        "[has(s.endpointSelector) ? [s.endpointSelector] : [], "
        "has(s.nodeSelector) ? [s.nodeSelector] : []]"
    ]
    for sections, side in ((("ingress", "ingressDeny"), "from"), (("egress", "egressDeny"), "to")):
        for section in sections:
            key = f"r.{side}Endpoints"
            lists.append(_rules_lists(section, f"has({key}) ? {key} : []"))
    return " + ".join(lists)


def _other_selector_lists() -> str:
    """Of spec ``s``: every other label selector the CRD's schema lets it hold (nodes, CIDR
    groups, services; the API server prunes any other before admission), a list per place."""
    lists = []
    for sections, side in ((("ingress", "ingressDeny"), "from"), (("egress", "egressDeny"), "to")):
        for section in sections:
            key = f"r.{side}Nodes"
            lists.append(_rules_lists(section, f"has({key}) ? {key} : []"))
            cidrs = f"r.{side}CIDRSet"
            lists.append(
                _rules_lists(
                    section,
                    f"has({cidrs}) ? {cidrs}.filter(c, has(c.cidrGroupSelector))"
                    ".map(c, c.cidrGroupSelector) : []",
                )
            )
            if side == "to":
                lists.append(
                    _rules_lists(
                        section,
                        "has(r.toServices) ? r.toServices.filter(v, has(v.k8sServiceSelector) "
                        "&& has(v.k8sServiceSelector.selector))"
                        ".map(v, v.k8sServiceSelector.selector) : []",
                    )
                )
    return " + ".join(lists)


def _every_selector(variable: str, condition: str) -> str:
    """Every selector ``sel`` of ``variables.VARIABLE`` (lists per spec) holds ``condition``."""
    return f"variables.{variable}.all(lists, lists.all(l, l.all(sel, {condition})))"


def _icmp_field_valid() -> str:
    """ICMP field ``f``: a type written as a number is 0 to 255; one written as a name is a
    name of its family (IPv4 when not given)."""
    family = "(has(f.family) && f.family != '' ? f.family : 'IPv4')"
    names = {
        fam: "[" + ", ".join(f"'{n}'" for n in sorted(ICMP_TYPE_NAMES[fam])) + "]"
        for fam in ("IPv4", "IPv6")
    }
    return (
        "!has(f.type) || (type(f.type) == int ? (f.type >= 0 && f.type <= 255) : "
        f"(type(f.type) != string || f.type.matches('^[0-9]+$') || !({family} in ['IPv4', 'IPv6']) "
        f"|| ({family} == 'IPv4' ? f.type in {names['IPv4']} : f.type in {names['IPv6']})))"
    )


def _namespace_keys() -> str:
    """The namespace label as a selector may spell it (with a label source or without)."""
    keys = [NAMESPACE_LABEL, *(f"{source}:{NAMESPACE_LABEL}" for source in _SOURCES)]
    return "[" + ", ".join(f"'{k}'" for k in keys) + "]"


def _subject_in_home() -> str:
    """Spec ``s`` of a namespaced policy whose home namespace is ``home``: its subject asks
    for no other namespace (Cilium adds the home one, so it would select no pod)."""
    keys = _namespace_keys()
    return (
        "!has(s.endpointSelector) || ("
        f"!(has(s.endpointSelector.matchLabels) && s.endpointSelector.matchLabels.exists(k, "
        f"k in {keys} && s.endpointSelector.matchLabels[k] != home)) && "
        "!(has(s.endpointSelector.matchExpressions) && s.endpointSelector.matchExpressions"
        f".exists(e, e.key in {keys} && e.operator == 'In' && has(e.values) && "
        "size(e.values) > 0 && !(home in e.values))))"
    )


_GO_UINT = f"^({GO_UINT.pattern})$"
"""cpg's reading of Go's unsigned literals (RE2 takes the same pattern), anchored."""
_IN_RANGE = {
    16: "^0*[0-9a-f]{1,4}$",
    8: "^0*([0-7]{1,5}|1[0-7]{5})$",
    2: "^0*[01]{1,16}$",
}
"""The digits of a number at most 65535 in each base (leading zeros allowed)."""


def _digit_sum(body: str, base: int) -> str:
    """The value of the lowercase digits ``body`` in ``base`` (the last 16 digits: the range
    check has made every digit before them a zero)."""
    terms = []
    for power in range(16):
        at = f"size({body}) - {power + 1}"
        terms.append(
            f"({at} >= 0 ? '0123456789abcdef'.indexOf({body}.charAt({at})) * {base**power} : 0)"
        )
    return _balanced_sum(terms)


def _balanced_sum(terms: list[str]) -> str:
    """``terms`` added up as a balanced tree: CEL parsers bound how deep an expression nests
    (32 in cel-cpp), and a chain of additions nests one level per term."""
    if len(terms) == 1:
        return terms[0]
    middle = len(terms) // 2
    return f"({_balanced_sum(terms[:middle])} + {_balanced_sum(terms[middle:])})"


def _port_value(text: str) -> str:
    """The port Cilium reads from the string ``text`` (a Go unsigned literal: a base prefix
    or a leading 0 for octal, underscores), or -1 when it reads none (out of 0-65535, or not
    a number: a named port)."""
    body = (
        "(d.matches('^0[xXoObB]') ? d.substring(2) : (d.matches('^0[0-9]') ? d.substring(1) "
        ": d)).lowerAscii()"
    )
    base = (
        "(d.matches('^0[xX]') ? 16 : (d.matches('^0[oO]') || d.matches('^0[0-9]') ? 8 : "
        "(d.matches('^0[bB]') ? 2 : 10)))"
    )
    by_base = " : ".join(
        f"b == {n} ? (x.matches('{_IN_RANGE[n]}') ? {_digit_sum('x', n)} : -1)" for n in (16, 8, 2)
    )
    value = f"(b == 10 ? (size(x) <= 5 && int(x) <= 65535 ? int(x) : -1) : ({by_base} : -1))"
    return (
        f"(size({text}) <= 64 && {text}.matches('{_GO_UINT}') ? [{text}.replace('_', '')]"
        f".map(d, [{body}].map(x, [{base}].map(b, {value})[0])[0])[0] : -1)"
    )


def _compiles(pattern: str) -> str:
    """True when ``pattern`` is a regular expression Go accepts, an error otherwise: CEL's
    ``matches`` compiles it with Go's regexp, as Cilium does, and CEL has no way to ask
    without failing. A failing validation takes its binding's action as a refusal does
    (under ``failurePolicy: Fail``), its message the error and the expression's first line."""
    return f"(''.matches({pattern}) ? true : true)"


def _port_entries() -> str:
    """Of spec ``s``: per section, per rule, per port rule, each port entry as what the
    checks read of it: its text, the port Cilium reads (-1: none), its endPort (-1: none),
    its protocol, and the port rule's L7 rules (HTTP, DNS: of the allow sections only).
    The endPort is null when not written."""
    sections = []
    for section in _SECTIONS:
        l7 = section in ("ingress", "egress")
        http = "has(pr.rules) && has(pr.rules.http) && size(pr.rules.http) > 0" if l7 else "false"
        dns = "has(pr.rules) && has(pr.rules.dns) && size(pr.rules.dns) > 0" if l7 else "false"
        entry = (
            "[has(x.port) ? string(x.port) : ''].map(t, {"
            "'t': t, "
            f"'v': {_port_value('t')}, "
            "'e': has(x.endPort) ? x.endPort : null, "
            "'p': has(x.protocol) ? x.protocol : '', "
            f"'http': {http}, 'dns': {dns}"
            "})[0]"
        )
        sections.append(
            f"(has(s.{section}) ? s.{section}.map(r, has(r.toPorts) ? r.toPorts.map(pr, "
            f"has(pr.ports) ? pr.ports.map(x, {entry}) : []) : []) : [])"
        )
    return "[" + ", ".join(sections) + "]"


def _every_port(condition: str) -> str:
    """Every port entry ``x`` (as :func:`_port_entries` reads it) holds ``condition``."""
    return (
        "variables.ports.all(spec, spec.all(section, section.all(rule, rule.all(pr, "
        f"pr.all(x, {condition})))))"
    )


_PORT_UNPARSED = (
    "((x.t.matches('^[0-9]+$') && x.v < 0) || (x.e != null && (x.e < 0 || x.e > 65535)))"
)
"""CPG009: digits Cilium does not read as a port, or an endPort out of 0-65535."""
_PORT_OCTAL = f"(!{_PORT_UNPARSED} && x.v >= 0 && x.t != string(x.v))"
"""CPG027: a port Cilium reads as another number than written (0100 is 64)."""
_END_BELOW = (
    f"(!{_PORT_UNPARSED} && !{_PORT_OCTAL} && x.e != null && x.v >= 0 && x.e > 0 && x.e < x.v)"
)
"""CPG023: an endPort below the port (Cilium reads the port alone)."""


def _l7_placement(section: str) -> str:
    """Port rule ``pr`` of a rule of ``section`` of spec ``s``: its L7 rules, TLS names and
    listener where Cilium takes them (CPG021's placement checks)."""
    l7 = section in ("ingress", "egress")
    ingress = section.startswith("ingress")
    http = f"(has(pr.rules) && {_nonempty('pr.rules.http')})" if l7 else "false"
    dns = f"(has(pr.rules) && {_nonempty('pr.rules.dns')})" if l7 else "false"
    ports = "(has(pr.ports) && size(pr.ports) > 0)"
    host = "has(s.nodeSelector)"
    refused = [
        f"({dns} && {str(ingress).lower()})",
        f"({dns} && !{ports})",
        f"({host} && {http})",
        f"({host} && {dns} && {str(ingress).lower()})",
        f"({_nonempty('pr.serverNames')} && ({http} || {dns}) && !{_nonempty('pr.terminatingTLS')})",
        f"({_nonempty('pr.listener')} && {str(ingress).lower()})",
        f"({_nonempty('pr.listener')} && ({http} || {dns}))",
    ]
    return f"!has(r.toPorts) || r.toPorts.all(pr, !({' || '.join(refused)}))"


_PEER_FIELDS = {
    "ingress": (
        "fromCIDR",
        "fromCIDRSet",
        "fromEndpoints",
        "fromEntities",
        "fromGroups",
        "fromNodes",
        "fromRequires",
    ),
    "egress": (
        "toCIDR",
        "toCIDRSet",
        "toEndpoints",
        "toEntities",
        "toFQDNs",
        "toGroups",
        "toNodes",
        "toRequires",
        "toServices",
    ),
}
"""The peer fields the CRD's schema gives a rule of each allow section."""


def _same_peers(section: str) -> str:
    """Rules ``a`` and ``b`` name the same peers (every field but ports, ICMP and
    authentication written alike)."""
    return " && ".join(
        f"has(a.{key}) == has(b.{key}) && (!has(a.{key}) || a.{key} == b.{key})"
        for key in _PEER_FIELDS[section]
    )


def _same_port(first: str, second: str) -> str:
    """Port entries naming the same port for a protocol both take (a protocol left out is
    TCP, UDP and SCTP)."""

    def protocol(entry: str) -> str:
        return f"(has({entry}.protocol) && {entry}.protocol != '' ? {entry}.protocol.upperAscii() : 'ANY')"

    def port(entry: str) -> str:
        return f"(has({entry}.port) ? string({entry}.port) : '0')"

    any_of = "['TCP', 'UDP', 'SCTP']"
    one, two = protocol(first), protocol(second)
    return (
        f"{port(first)} == {port(second)} && ({one} == {two} || ({one} == 'ANY' && {two} in "
        f"{any_of}) || ({two} == 'ANY' && {one} in {any_of}))"
    )


def _l4_voids_l7(section: str) -> str:
    """Spec ``s``: no port of an L7 port rule is also in a plain port rule of a rule with the
    same peers (Cilium merges them, and the plain one admits every request)."""
    layered = "has(p.rules) && size(p.rules) > 0"
    plain = "!(has(q.rules) && size(q.rules) > 0)"
    return (
        f"!has(s.{section}) || s.{section}.all(a, !has(a.toPorts) || a.toPorts.all(p, "
        f"!({layered}) || !has(p.ports) || p.ports.all(e, !s.{section}.exists(b, "
        f"{_same_peers(section)} && has(b.toPorts) && b.toPorts.exists(q, {plain} && "
        f"has(q.ports) && q.ports.exists(f, {_same_port('e', 'f')}))))))"
    )


_IDX = "[0, 1, 2, 3, 4, 5, 6, 7]"
_ZERO_GROUPS = "['', '0', '0:0', '0:0:0', '0:0:0:0', '0:0:0:0:0', '0:0:0:0:0:0', '0:0:0:0:0:0:0', '0:0:0:0:0:0:0:0']"


def _cidr_normalized(t: str) -> str:
    """A CIDR text with its address as 8 groups (the IPv6 ``::`` expanded; a dotted IPv4 tail
    kept, counting for two), or the text itself for IPv4."""
    a = f"{t}.split('/')[0]"
    padded = f"(({a}.startsWith('::') ? '0' : '') + {a} + ({a}.endsWith('::') ? '0' : ''))"
    present = f"(size({padded}.split(':')) - 1 + ({a}.contains('.') ? 1 : 0))"
    expanded = f"{padded}.replace('::', ':' + {_ZERO_GROUPS}[8 - {present}] + ':')"
    return f"({a}.contains(':') ? ({a}.contains('::') ? {expanded} : {a}) : {a}) + '/' + {t}.split('/')[1]"


def _hex_group(g: str) -> str:
    terms = [
        f"(size({g}) > {p} ? '0123456789abcdef'.indexOf({g}.lowerAscii().charAt(size({g}) - {p + 1})) * {16**p} : 0)"
        for p in range(4)
    ]
    return f"(({terms[0]} + {terms[1]}) + ({terms[2]} + {terms[3]}))"


def _cidr_parsed(n: str) -> str:
    """A normalized CIDR text as {'v': family, 'len': prefix length, 'g': 16-bit groups}."""
    a = f"{n}.split('/')[0]"
    parts = f"{a}.split(':')"
    quad = f"{parts}[6].split('.')"
    v6 = (
        f"{_IDX}.map(k, {a}.contains('.') && k >= 6 ? (k == 6 ? int({quad}[0]) * 256 + "
        f"int({quad}[1]) : int({quad}[2]) * 256 + int({quad}[3])) : {_hex_group(parts + '[k]')})"
    )
    v4q = f"{a}.split('.')"
    v4 = f"[int({v4q}[0]) * 256 + int({v4q}[1]), int({v4q}[2]) * 256 + int({v4q}[3])]"
    return (
        f"{{'v': {a}.contains(':') ? 6 : 4, 'len': int({n}.split('/')[1]), "
        f"'g': {a}.contains(':') ? {v6} : {v4}}}"
    )


_POWERS_OF_TWO = "[" + ", ".join(str(2**n) for n in range(17)) + "]"


def _cidr_contains(outer: str, inner: str) -> str:
    shift = f"{_POWERS_OF_TWO}[16 - ({outer}.len - k * 16)]"
    return (
        f"({outer}.v == {inner}.v && {inner}.len >= {outer}.len && {_IDX}.filter(k, k < size({outer}.g)).all(k, "
        f"(k + 1) * 16 <= {outer}.len ? {outer}.g[k] == {inner}.g[k] : (k * 16 < {outer}.len ? "
        f"{outer}.g[k] / {shift} == {inner}.g[k] / {shift} : true)))"
    )


def _cidr_set_entries() -> str:
    """Of spec ``s``: per section, per rule, each CIDR set entry that names a CIDR, as its
    CIDR and its exceptions (texts)."""
    sections = []
    for section in _SECTIONS:
        side = "from" if section.startswith("ingress") else "to"
        key = f"r.{side}CIDRSet"
        sections.append(
            f"(has(s.{section}) ? s.{section}.map(r, has({key}) ? {key}.filter(c, has(c.cidr))"
            ".map(c, {'c': c.cidr, 'x': has(c.except) ? c.except : []}) : []) : [])"
        )
    return "[" + ", ".join(sections) + "]"


def _each_cidr_entry(variable: str, make: str) -> str:
    """``variables.VARIABLE`` (CIDR set entries by spec, section and rule) with each entry
    ``e`` made into ``make``."""
    return f"variables.{variable}.map(a, a.map(b, b.map(c, c.map(e, {make}))))"


def _rule_cidrs() -> str:
    """Of spec ``s``: per section, per rule, the CIDRs its peers name (``fromCIDR`` and the
    CIDR of each CIDR set entry, either direction's)."""
    sections = []
    for section in _SECTIONS:
        side = "from" if section.startswith("ingress") else "to"
        plain, sets = f"r.{side}CIDR", f"r.{side}CIDRSet"
        sections.append(
            f"(has(s.{section}) ? s.{section}.map(r, (has({plain}) ? {plain} : []) + "
            f"(has({sets}) ? {sets}.filter(c, has(c.cidr)).map(c, c.cidr) : [])) : [])"
        )
    return "[" + ", ".join(sections) + "]"


def _cidr_literal(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> str:
    """A CIDR as the parsed form the checks compare (family, prefix length, 16-bit groups)."""
    value = int(network.network_address)
    count = 8 if network.version == 6 else 2
    groups = [(value >> (16 * (count - 1 - n))) & 0xFFFF for n in range(count)]
    return f"{{'v': {network.version}, 'len': {network.prefixlen}, 'g': {groups}}}"


def pod_cidr_checks(pod_cidrs: Sequence[str]) -> tuple[AdmissionCheck, ...]:
    """CPG007 for the cluster's pod CIDRs: a CIDR rule inside one selects no pod (Cilium's
    CIDR rules never select the pods it manages); none without pod CIDRs."""
    networks = [ipaddress.ip_network(text, strict=False) for text in pod_cidrs]
    if not networks:
        return ()
    pods = "[" + ", ".join(_cidr_literal(n) for n in networks) + "]"
    everywhere = "['0.0.0.0/0', '::/0']"
    return (
        AdmissionCheck(
            "CPG007",
            "variables.ruleCidrsParsed.all(a, a.all(b, b.all(c, c.all(e, e.t in "
            f"{everywhere} || !{pods}.exists(p, {_cidr_contains('p', 'e.p')})))))",
        ),
    )


def _cluster_peer_selectors(peer: str, nodes: bool) -> str:
    """The label selectors of a ClusterNetworkPolicy subject or peer ``peer``."""
    parts = [
        f"(has({peer}.namespaces) ? [{peer}.namespaces] : [])",
        f"(has({peer}.pods) && has({peer}.pods.namespaceSelector) ? "
        f"[{peer}.pods.namespaceSelector] : [])",
        f"(has({peer}.pods) && has({peer}.pods.podSelector) ? [{peer}.pods.podSelector] : [])",
    ]
    if nodes:
        parts.append(f"(has({peer}.nodes) ? [{peer}.nodes] : [])")
    return " + ".join(parts)


def _cluster_selectors() -> str:
    """Of a Kubernetes ClusterNetworkPolicy: per rule (the subject first, as a rule of one
    peer), per peer, its label selectors."""
    subject = (
        "(has(object.spec.subject) ? [["
        + _cluster_peer_selectors("object.spec.subject", False)
        + "]] : [])"
    )
    ingress = (
        "(has(object.spec.ingress) ? object.spec.ingress.map(r, has(r.from) ? r.from.map(p, "
        + _cluster_peer_selectors("p", False)
        + ") : []) : [])"
    )
    egress = (
        "(has(object.spec.egress) ? object.spec.egress.map(r, has(r.to) ? r.to.map(p, "
        + _cluster_peer_selectors("p", True)
        + ") : []) : [])"
    )
    return (
        "object.kind != 'ClusterNetworkPolicy' || !has(object.spec) ? [] : "
        f"{subject} + {ingress} + {egress}"
    )


def cluster_network_policy_checks(version: Version, since: Version) -> tuple[AdmissionCheck, ...]:
    """The checks of a Kubernetes ClusterNetworkPolicy (its CRD's schema is the API server's
    to apply): label syntax (CPG003, keys as Kubernetes writes them), and before ``since``
    (the first Cilium that reads the kind) the policy itself (CPG035)."""
    checks = [
        AdmissionCheck(
            "CPG003",
            "variables.clusterSelectors.all(r, r.all(p, p.all(sel, "
            + _selector_labels_valid("sel", sourced=False)
            + ")))",
        )
    ]
    if version < since:
        checks.append(AdmissionCheck("CPG035", "false"))
    return tuple(checks)


CILIUM_KINDS = "['CiliumNetworkPolicy', 'CiliumClusterwideNetworkPolicy']"
"""The kinds Cilium's checks are for (the guard sees Kubernetes NetworkPolicies too)."""


def network_policy_checks(version: Version) -> tuple[AdmissionCheck, ...]:
    """The checks of a Kubernetes NetworkPolicy (the API server validates its fields itself):
    an ingress rule without ``from`` admits every source (CPG006); before Cilium's fix of
    cilium/cilium#46305, an ipBlock-only ingress peer also admits the policy's namespace
    (CPG052)."""
    checks = [
        AdmissionCheck(
            "CPG006",
            "!has(object.spec.ingress) || object.spec.ingress.all(r, has(r.from) && "
            "size(r.from) > 0)",
        )
    ]
    if version < IPBLOCK_FIXED_SINCE:
        checks.append(
            AdmissionCheck(
                "CPG052",
                "!has(object.spec.ingress) || object.spec.ingress.all(r, !has(r.from) || "
                "r.from.all(p, !has(p.ipBlock) || has(p.podSelector) || "
                "has(p.namespaceSelector)))",
            )
        )
    return tuple(checks)


MAX_SPECS = 32
"""The most specs (``spec`` and each of ``specs``) a policy may have to be checked at
admission."""
MAX_RULES = 1_000
"""The most rules, over all specs and sections, a policy may have to be checked."""
MAX_ENTRIES = 1_200
"""The most entries (selectors and their labels, CIDRs, ports, L7 rules, ICMP fields, other
peers) a policy may have to be checked."""
MAX_CIDRS = 200
"""The most CIDRs (with CIDR sets' exceptions) a policy may have to be checked: reading one
costs the API server some thousand units of its budget."""
MAX_PAIRED_RULES = 32
"""The most rules a policy may have for the checks that compare rules pairwise (CPG008,
CPG011)."""
MAX_PAIRED_ENTRIES = 128
"""And the most entries (the ports of its rules are compared pairwise too)."""
"""Together, the bounds keep every expression within the API server's CEL cost limits (one
million units per expression, ten million per policy evaluation): beyond them a check would
cost more than the API server allows and fail, so the guard warns instead (:data:`SIZE_CHECK`)
and leaves the policy to lint."""


_X = "'x'"


def _tally(items: str, each: str, name: str) -> str:
    """A character per item of list (or map) ``items``, with ``each`` the text of item
    ``name``: CEL has no sum, so counts are added up as the length of joined text."""
    return f"{items}.map({name}, {each}).join('')"


def _selector_tally(selector: str, depth: int) -> str:
    """One character for ``selector`` and one per label, expression and value it holds."""
    e, v = f"e{depth}", f"v{depth}"
    values = f"(has({e}.values) ? {_tally(e + '.values', _X, v)} : '')"
    return (
        f"'x' + (has({selector}.matchLabels) ? "
        f"{_tally(selector + '.matchLabels', _X, v)} : '') + "
        f"(has({selector}.matchExpressions) ? "
        f"{_tally(selector + '.matchExpressions', _X + ' + ' + values, e)} : '')"
    )


def _rule_tally(side: str) -> str:
    """The characters of rule ``r``: one per entry of each of its lists, its selectors'
    labels and its port rules' ports and L7 rules counted in."""
    plain = ("CIDR", "Entities", "Requires", "Groups")
    parts = [f"(has(r.{side}{f}) ? {_tally(f'r.{side}{f}', _X, 'c')} : '')" for f in plain]
    for field in (f"{side}Endpoints", f"{side}Nodes"):
        selectors = _tally("r." + field, _selector_tally("c", 1), "c")
        parts.append(f"(has(r.{field}) ? {selectors} : '')")
    group = "(has(c.cidrGroupSelector) ? " + _selector_tally("c.cidrGroupSelector", 1) + " : '')"
    excepted = "(has(c.except) ? " + _tally("c.except", _X, "x") + " : '')"
    cidr_set = _tally(f"r.{side}CIDRSet", f"'x' + {excepted} + {group}", "c")
    parts.append(f"(has(r.{side}CIDRSet) ? {cidr_set} : '')")
    if side == "to":
        parts.append(f"(has(r.toFQDNs) ? {_tally('r.toFQDNs', _X, 'c')} : '')")
        service = (
            "'x' + (has(c.k8sServiceSelector) && has(c.k8sServiceSelector.selector) ? "
            + _selector_tally("c.k8sServiceSelector.selector", 1)
            + " : '')"
        )
        parts.append(f"(has(r.toServices) ? {_tally('r.toServices', service, 'c')} : '')")
    l7 = [
        f"(has(p.rules) && has(p.rules.{kind}) ? {_tally('p.rules.' + kind, _X, 'x')} : '')"
        for kind in ("http", "dns", "kafka", "l7")
    ]
    ports = _balanced_sum([_X, f"(has(p.ports) ? {_tally('p.ports', _X, 'x')} : '')", *l7])
    parts.append(f"(has(r.toPorts) ? {_tally('r.toPorts', ports, 'p')} : '')")
    fields = "'x' + (has(c.fields) ? " + _tally("c.fields", _X, "x") + " : '')"
    parts.append(f"(has(r.icmps) ? {_tally('r.icmps', fields, 'c')} : '')")
    return _balanced_sum([_X, *parts])


def _cidr_tally() -> str:
    """Of spec ``s``: a character per CIDR its rules name (sets' exceptions counted in)."""
    parts = []
    for section in _SECTIONS:
        side = "from" if section.startswith("ingress") else "to"
        excepted = "(has(c.except) ? " + _tally("c.except", _X, "x") + " : '')"
        plain = f"(has(r.{side}CIDR) ? {_tally(f'r.{side}CIDR', _X, 'c')} : '')"
        sets = f"(has(r.{side}CIDRSet) ? {_tally(f'r.{side}CIDRSet', _X + ' + ' + excepted, 'c')} : '')"
        parts.append(
            f"(has(s.{section}) ? {_tally('s.' + section, plain + ' + ' + sets, 'r')} : '')"
        )
    return _balanced_sum(parts)


def _spec_entries() -> str:
    """Of spec ``s``: a character per entry it holds (its subject's labels, its rules')."""
    subject = _balanced_sum(
        [
            f"(has(s.{key}) ? {_selector_tally('s.' + key, 0)} : '')"
            for key in ("endpointSelector", "nodeSelector")
        ]
    )
    rules = []
    for section in _SECTIONS:
        each = _rule_tally("from" if section.startswith("ingress") else "to")
        rules.append(f"(has(s.{section}) ? {_tally('s.' + section, each, 'r')} : '')")
    return _balanced_sum([subject, *rules])


def _spec_rule_count(spec: str = "s") -> str:
    """How many rules spec ``spec`` has, over its sections."""
    return _balanced_sum([f"(has({spec}.{x}) ? size({spec}.{x}) : 0)" for x in _SECTIONS])


ADMISSION_VARIABLES = (
    Variable("namespaced", "object.kind == 'CiliumNetworkPolicy'"),
    Variable(
        "specs",
        f"!(object.kind in {CILIUM_KINDS}) ? [] : "
        "(has(object.spec) ? [object.spec] : []) + (has(object.specs) ? object.specs : [])",
    ),
    Variable(
        "ruleCount",
        f"size(variables.specs) > {MAX_SPECS} ? {MAX_RULES + 1} : "
        + _balanced_sum(
            [
                f"(size(variables.specs) > {n} ? "
                + _spec_rule_count(f"variables.specs[{n}]")
                + " : 0)"
                for n in range(MAX_SPECS)
            ]
        ),
    ),
    Variable(
        "entryCount",
        f"variables.ruleCount > {MAX_RULES} ? {MAX_ENTRIES + 1} : "
        f"size(variables.specs.map(s, {_spec_entries()}).join(''))",
    ),
    Variable(
        "cidrCount",
        f"variables.entryCount > {MAX_ENTRIES} ? {MAX_CIDRS + 1} : "
        f"size(variables.specs.map(s, {_cidr_tally()}).join(''))",
    ),
    Variable(
        "checkable",
        f"variables.ruleCount <= {MAX_RULES} && variables.entryCount <= {MAX_ENTRIES} && "
        f"variables.cidrCount <= {MAX_CIDRS}",
    ),
    Variable(
        "pairable",
        f"variables.ruleCount <= {MAX_PAIRED_RULES} && "
        f"variables.entryCount <= {MAX_PAIRED_ENTRIES}",
    ),
    Variable("checkedSpecs", "variables.checkable ? variables.specs : []"),
    Variable("peerSelectors", f"variables.checkedSpecs.map(s, {_peer_selector_lists()})"),
    Variable("otherSelectors", f"variables.checkedSpecs.map(s, {_other_selector_lists()})"),
    Variable("ports", f"variables.checkedSpecs.map(s, {_port_entries()})"),
    Variable("ruleCidrs", f"variables.checkedSpecs.map(s, {_rule_cidrs()})"),
    Variable(
        "ruleCidrsNormalized",
        _each_cidr_entry("ruleCidrs", f"{{'t': e, 'n': {_cidr_normalized('e')}}}"),
    ),
    Variable(
        "ruleCidrsParsed",
        _each_cidr_entry("ruleCidrsNormalized", f"{{'t': e.t, 'p': {_cidr_parsed('e.n')}}}"),
    ),
    Variable("clusterSelectors", _cluster_selectors()),
    Variable("cidrSets", f"variables.checkedSpecs.map(s, {_cidr_set_entries()})"),
    Variable(
        "cidrSetsNormalized",
        _each_cidr_entry(
            "cidrSets",
            f"{{'c': {_cidr_normalized('e.c')}, 'x': e.x.map(t, {_cidr_normalized('t')})}}",
        ),
    ),
    Variable(
        "cidrSetsParsed",
        _each_cidr_entry(
            "cidrSetsNormalized",
            f"{{'c': {_cidr_parsed('e.c')}, 'x': e.x.map(t, {_cidr_parsed('t')})}}",
        ),
    ),
)
"""What several checks read: whether the policy is namespaced, its specs (``spec`` and each
of ``specs``), and per spec the lists of label selectors it holds (one list per place)."""


ADMISSION_CHECKS = (
    AdmissionCheck(
        "CPG003",
        _every_selector("peerSelectors", _selector_labels_valid("sel"))
        + " && "
        + _every_selector("otherSelectors", _selector_labels_valid("sel")),
    ),
    AdmissionCheck(
        "CPG004",
        _every_spec(
            f"!(has(s.endpointSelector) && {_empty_selector('s.endpointSelector')}) || "
            f"({_default_deny_idiom()})"
        ),
    ),
    AdmissionCheck(
        "CPG005",
        _side_rules(f"!has(r.SIDEEndpoints) || r.SIDEEndpoints.all(e, !({_empty_selector('e')}))"),
    ),
    AdmissionCheck(
        "CPG006",
        _side_rules(
            f"(!has(r.SIDEEntities) || !r.SIDEEntities.exists(e, e in {_WORLD})) && "
            f"(!has(r.SIDECIDR) || !r.SIDECIDR.exists(c, c in {_EVERYWHERE})) && "
            f"(!has(r.SIDECIDRSet) || !r.SIDECIDRSet.exists(c, has(c.cidr) && c.cidr in "
            f"{_EVERYWHERE}))"
        ),
    ),
    AdmissionCheck(
        "CPG008",
        "!variables.pairable || "
        + _every_spec(f"({_l4_voids_l7('ingress')}) && ({_l4_voids_l7('egress')})"),
    ),
    AdmissionCheck("CPG009", _every_port(f"!{_PORT_UNPARSED}")),
    AdmissionCheck(
        "CPG010",
        _every_spec(
            "!("
            + " || ".join(
                f"(has(s.{x}) && s.{x}.exists(r, {_nonempty('r.toFQDNs')}))" for x in _SECTIONS
            )
            + ") || (has(s.egress) && s.egress.exists(r, has(r.toPorts) && "
            "r.toPorts.exists(p, has(p.rules) && " + _nonempty("p.rules.dns") + ")))"
        ),
    ),
    AdmissionCheck(
        "CPG011",
        "!variables.pairable || "
        + _every_spec(
            " && ".join(
                f"(!has(s.{x}) || s.{x}.all(r, size(s.{x}.filter(o, o == r)) == 1))"
                for x in _SECTIONS
            )
        ),
    ),
    AdmissionCheck(
        "CPG015",
        "(has(object.spec) || has(object.specs)) && "
        + _every_spec(
            " || ".join(f"(has(s.{section}) && size(s.{section}) > 0)" for section in _SECTIONS)
        ),
    ),
    AdmissionCheck("CPG016", _every_selector("peerSelectors", _selector_terms_valid("sel"))),
    AdmissionCheck(
        "CPG017",
        _each_rule(_at_most_one_peer(_INGRESS_PEERS), ("ingress", "ingressDeny"))
        + " && "
        + _each_rule(_at_most_one_peer((*_EGRESS_PEERS, "toFQDNs")), ("egress",))
        + " && "
        + _each_rule(_at_most_one_peer(_EGRESS_PEERS), ("egressDeny",)),
    ),
    AdmissionCheck(
        "CPG018",
        _each_rule("!(has(r.icmps) && size(r.icmps) > 0 && has(r.toPorts) && size(r.toPorts) > 0)"),
    ),
    AdmissionCheck(
        "CPG019",
        "variables.cidrSetsParsed.all(a, a.all(b, b.all(c, c.all(e, e.x.all(i, "
        + _cidr_contains("e.c", "i")
        + ")))))",
    ),
    AdmissionCheck(
        "CPG020",
        _every_port("x.t != '' && !(x.p in ['VRRP', 'IGMP'] && x.v > 0)"),
    ),
    AdmissionCheck(
        "CPG021",
        _every_port(
            "!(x.v >= 0 && ((x.dns && x.e != null && x.e > x.v) || ((x.http || x.dns) && "
            "x.v == 0) || (x.http && x.p != 'TCP')))"
        )
        + " && "
        + " && ".join(_each_rule(_l7_placement(section), (section,)) for section in _SECTIONS),
    ),
    AdmissionCheck(
        "CPG022",
        _each_rule(
            "!has(r.toPorts) || r.toPorts.all(p, !has(p.rules) || !has(p.rules.http) || "
            "p.rules.http.all(h, "
            + " && ".join(f"(!has(h.{k}) || {_compiles(f'h.{k}')})" for k in ("path", "method"))
            + "))"
        ),
    ),
    AdmissionCheck("CPG023", _every_port(f"!{_END_BELOW}")),
    AdmissionCheck(
        "CPG024",
        "!variables.namespaced || ("
        + _every_spec(
            "!has(s.endpointSelector) || !("
            f"(has(s.endpointSelector.matchLabels) && {_INIT} in s.endpointSelector.matchLabels)"
            " || (has(s.endpointSelector.matchExpressions) && "
            f"s.endpointSelector.matchExpressions.exists(e, e.key == {_INIT})))"
        )
        + ")",
    ),
    AdmissionCheck(
        "CPG025",
        _each_rule(
            "!has(r.icmps) || r.icmps.all(i, !has(i.fields) || i.fields.all(f, "
            + _icmp_field_valid()
            + "))"
        ),
    ),
    AdmissionCheck(
        "CPG026",
        _each_rule(
            "!(has(r.fromNodes) && size(r.fromNodes) > 0) && "
            "!(has(r.toNodes) && size(r.toNodes) > 0)"
        ),
    ),
    AdmissionCheck("CPG027", _every_port(f"!{_PORT_OCTAL}")),
    AdmissionCheck(
        "CPG028",
        "!variables.namespaced || [has(object.metadata.namespace) && "
        "object.metadata.namespace != '' ? object.metadata.namespace : 'default'].all(home, "
        + _every_spec(_subject_in_home())
        + ")",
    ),
    AdmissionCheck(
        "CPG029",
        "!variables.namespaced || (" + _every_spec("!has(s.nodeSelector)") + ")",
    ),
    AdmissionCheck(
        "CPG032",
        "!has(object.metadata.annotations) || "
        "!('policy.cilium.io/audit-mode' in object.metadata.annotations)",
    ),
    AdmissionCheck(
        "CPG046",
        "!(has(object.specs) && size(object.specs) == 0 && !has(object.spec))",
    ),
)
"""The rules the guard enforces so far, each as lint judges it on one document."""


def _endpoint_selector_lists() -> str:
    """Of spec ``s``: each rule's endpoint peers (either direction's field), a list per rule."""
    lists = []
    for section in _SECTIONS:
        side = "from" if section.startswith("ingress") else "to"
        lists.append(_rules_lists(section, f"has(r.{side}Endpoints) ? r.{side}Endpoints : []"))
    return " + ".join(lists)


def _names_cluster(selector: str) -> str:
    key = "^([^:]*:)?" + CLUSTER_LABEL.replace(".", "[.]") + "$"
    return (
        f"((has({selector}.matchLabels) && {selector}.matchLabels.exists(k, k.matches('{key}')))"
        f" || (has({selector}.matchExpressions) && {selector}.matchExpressions.exists(e, "
        f"e.key.matches('{key}'))))"
    )


def _names_reserved(selector: str) -> str:
    return (
        f"((has({selector}.matchLabels) && {selector}.matchLabels.exists(k, "
        f"k.startsWith('reserved:'))) || (has({selector}.matchExpressions) && "
        f"{selector}.matchExpressions.exists(e, e.key.startsWith('reserved:'))))"
    )


def version_checks(version: Version, since: dict[str, Version]) -> tuple[AdmissionCheck, ...]:
    """The checks of what Cilium ``version`` reads otherwise than the newest release (its
    deprecations and the features it lacks), ``since`` naming the first release of each:
    ``requires-deprecated``, ``cluster-mesh-entity``, ``multi-label-wildcard``,
    ``kafka-gone``, ``local-cluster-default``."""
    checks: list[AdmissionCheck] = []
    deprecated = []
    if version >= since["requires-deprecated"]:
        deprecated.append(
            _each_rule(f"!{_nonempty('r.fromRequires')} && !{_nonempty('r.toRequires')}")
        )
    if version < since["kafka-gone"]:
        deprecated.append(
            _each_rule(
                "!has(r.toPorts) || r.toPorts.all(p, !(has(p.rules) && "
                f"{_nonempty('p.rules.kafka')}))"
            )
        )
    if deprecated:
        checks.append(AdmissionCheck("CPG030", " && ".join(deprecated)))
    missing = []
    if version < since["cluster-mesh-entity"]:
        missing.append(
            _each_rule(
                "(!has(r.fromEntities) || !('cluster-mesh' in r.fromEntities)) && "
                "(!has(r.toEntities) || !('cluster-mesh' in r.toEntities))"
            )
        )
    if version < since["multi-label-wildcard"]:
        wildcard = "(has(n.matchPattern) && n.matchPattern.startsWith('**.'))"
        missing.append(
            _each_rule("!has(r.toFQDNs) || !r.toFQDNs.exists(n, " + wildcard + ")", ("egress",))
            + " && "
            + _each_rule(
                "!has(r.toPorts) || r.toPorts.all(p, !(has(p.rules) && has(p.rules.dns)) || "
                f"!p.rules.dns.exists(n, {wildcard}))"
            )
        )
    if missing:
        checks.append(AdmissionCheck("CPG031", " && ".join(missing)))
    if version < since["local-cluster-default"]:
        each = f"variables.specs.map(s, {_endpoint_selector_lists()})"
        checks.append(
            AdmissionCheck(
                "CPG033",
                f"[{each}].all(every, !every.exists(spec, spec.exists(l, l.exists(sel, "
                f"{_names_cluster('sel')}))) || every.all(spec, spec.all(l, l.all(sel, "
                f"{_names_cluster('sel')} || {_names_reserved('sel')}))))",
            )
        )
    return tuple(checks)


NOT_AT_ADMISSION = (
    NotAtAdmission(
        "CPG001",
        "YAML that cannot be read never reaches the API server: kubectl refuses to send it",
    ),
    NotAtAdmission(
        "CPG002",
        "the API server validates the document against the CRD's schema itself, before admission",
    ),
    NotAtAdmission(
        "CPG013",
        "the API server prunes a field the CRD does not know before admission sees the "
        "document (kubectl's strict field check refuses it on the way)",
    ),
    NotAtAdmission(
        "CPG014",
        "a top-level description is a field the CRD does not know: pruned before admission",
    ),
    NotAtAdmission(
        "CPG047",
        "the API server refuses an invalid NetworkPolicy itself, before admission",
    ),
    NotAtAdmission("CPG048", "the API server receives JSON: the YAML text is gone"),
    NotAtAdmission("CPG049", "the API server receives JSON: the YAML text is gone"),
    NotAtAdmission("CPG050", "the API server receives JSON: the YAML text is gone"),
    NotAtAdmission("CPG051", "the API server's decoder refuses the number before admission"),
    NotAtAdmission(
        "CPG012",
        "which pods a selector selects is the cluster's state, not the document's",
    ),
    NotAtAdmission(
        "CPG034",
        "Valid=False is what Cilium's operator writes after the policy is stored",
    ),
    NotAtAdmission(
        "CPG040",
        "needs every policy selecting the workload (its DNS may be allowed by another)",
    ),
    NotAtAdmission(
        "CPG041",
        "needs every policy of the callers, across namespaces",
    ),
    NotAtAdmission("CPG042", "needs every policy that admits DNS, across namespaces"),
    NotAtAdmission("CPG043", "needs the cluster's ClusterNetworkPolicies together"),
    NotAtAdmission("CPG044", "needs the cluster's ClusterNetworkPolicies together"),
    NotAtAdmission("CPG045", "needs the cluster's own objects (webhooks, scrapers, caches)"),
)
"""The rules the guard does not enforce, and why."""


def _count(items: object) -> int:
    return len(items) if isinstance(items, (list, dict)) else 0


def _items(items: object) -> list[Any]:
    return [i for i in _seq(items) if isinstance(i, dict)]


def _selector_count(selector: object) -> int:
    if not isinstance(selector, dict):
        return 1
    terms = _items(selector.get("matchExpressions"))
    return (
        1
        + _count(selector.get("matchLabels"))
        + _count(selector.get("matchExpressions"))
        + sum(_count(t.get("values")) for t in terms)
    )


def _rule_entries(rule: dict[str, Any], side: str) -> tuple[int, int]:
    """The entries and the CIDRs of one rule, as the guard's tally counts them."""
    entries = 1 + sum(
        _count(rule.get(side + f)) for f in ("CIDR", "Entities", "Requires", "Groups")
    )
    for field in (side + "Endpoints", side + "Nodes"):
        entries += sum(_selector_count(c) for c in _seq(rule.get(field)))
    sets = _items(rule.get(side + "CIDRSet"))
    excepts = sum(_count(c.get("except")) for c in sets)
    entries += _count(rule.get(side + "CIDRSet")) + excepts
    entries += sum(
        _selector_count(c["cidrGroupSelector"]) for c in sets if "cidrGroupSelector" in c
    )
    if side == "to":
        entries += _count(rule.get("toFQDNs")) + _count(rule.get("toServices"))
        for service in _items(rule.get("toServices")):
            chosen = service.get("k8sServiceSelector")
            if isinstance(chosen, dict) and "selector" in chosen:
                entries += _selector_count(chosen["selector"])
    for port_rule in _items(rule.get("toPorts")):
        l7 = port_rule.get("rules") if isinstance(port_rule.get("rules"), dict) else {}
        entries += _count(port_rule.get("ports")) + sum(
            _count(l7.get(k)) for k in ("http", "dns", "kafka", "l7")
        )
    entries += _count(rule.get("toPorts"))
    entries += _count(rule.get("icmps")) + sum(
        _count(i.get("fields")) for i in _items(rule.get("icmps"))
    )
    return entries, _count(rule.get(side + "CIDR")) + _count(rule.get(side + "CIDRSet")) + excepts


def within_bounds(document: dict[str, Any]) -> tuple[bool, bool]:
    """Whether the guard checks a stored Cilium policy (its size check, in Python): every
    check, and the pairwise ones (CPG008, CPG011)."""
    written = [document.get("spec"), *_seq(document.get("specs"))]
    specs: list[dict[str, Any]] = [s for s in written if isinstance(s, dict)]
    rules = entries = cidrs = 0
    for spec in specs:
        subject = [spec[k] for k in ("endpointSelector", "nodeSelector") if k in spec]
        entries += sum(_selector_count(selector) for selector in subject)
        for section in _SECTIONS:
            side = "from" if section.startswith("ingress") else "to"
            rules += _count(spec.get(section))
            for rule in _items(spec.get(section)):
                counted = _rule_entries(rule, side)
                entries, cidrs = entries + counted[0], cidrs + counted[1]
    checkable = (
        len(specs) <= MAX_SPECS
        and rules <= MAX_RULES
        and entries <= MAX_ENTRIES
        and cidrs <= MAX_CIDRS
    )
    return checkable, rules <= MAX_PAIRED_RULES and entries <= MAX_PAIRED_ENTRIES


SIZE_CHECK = AdmissionCheck(
    "too-large",
    f"!(object.kind in {CILIUM_KINDS}) || (variables.checkable && variables.pairable)",
)
"""The one check that is no lint rule: the policy is within the bounds the guard checks at
admission (true when it is)."""
SIZE_MESSAGE = (
    f"!variables.checkable ? 'too-large: the policy holds more than the guard checks at "
    f"admission ({MAX_SPECS} specs, {MAX_RULES} rules, {MAX_ENTRIES} entries or {MAX_CIDRS} "
    "CIDRs), so none of "
    "its rules was checked. Fix: run cpg lint on it in CI, or split it.' : 'too-large: the "
    f"policy holds more than {MAX_PAIRED_RULES} rules or {MAX_PAIRED_ENTRIES} entries, so "
    "CPG008 and CPG011, which compare its rules pairwise, were not checked. Fix: run cpg lint "
    "on it in CI, or split it.'"
)
"""What :data:`SIZE_CHECK` says when it fails (a CEL expression: which bound was passed)."""


def exempt_namespaces(label: str) -> dict[str, object]:
    """The selector of a binding that leaves the namespaces (or objects) labelled
    ``label=exempt`` alone."""
    return {"matchExpressions": [{"key": label, "operator": "NotIn", "values": ["exempt"]}]}


__all__ = [
    "ADMISSION_CHECKS",
    "ADMISSION_VARIABLES",
    "CILIUM_KINDS",
    "MAX_CIDRS",
    "MAX_ENTRIES",
    "MAX_PAIRED_ENTRIES",
    "MAX_PAIRED_RULES",
    "MAX_RULES",
    "MAX_SPECS",
    "NOT_AT_ADMISSION",
    "SIZE_CHECK",
    "SIZE_MESSAGE",
    "AdmissionCheck",
    "NotAtAdmission",
    "Variable",
    "cluster_network_policy_checks",
    "exempt_namespaces",
    "network_policy_checks",
    "pod_cidr_checks",
    "version_checks",
    "within_bounds",
]
