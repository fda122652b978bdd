"""Would these CiliumNetworkPolicies allow this flow? A policy matcher for what cpg generates
and what people commonly write, so generated policies can be checked before they are applied.

The endpoint that dropped a flow is taken to enforce policy in that direction (it did). A flow
is allowed when some policy that selects the endpoint in that direction has a rule whose peer
and ports match, and no deny rule matches. The answer names the rule, or says why none did.

The same rule semantics answer merge's question, "does a rule a human wrote already allow this
allow entry?" (:func:`covered_by`): an entry's peer is known only by the labels cpg selected, so
a selector that needs more than those, or excludes a label cpg did not select, does not cover it.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from cpg_core._documents import PolicyDocument
from cpg_core._errors import CpgError
from cpg_core._flow import ICMP_PROTOCOLS, ICMPV4, Direction, Endpoint, Flow
from cpg_core._l7 import url_path
from cpg_core._labels import CLUSTER_LABEL, NAMESPACE_LABEL, reserved_names
from cpg_core._rules import DNS, EGRESS, HTTP, INGRESS, Atom, CidrPeer, EndpointPeer, EntityPeer
from cpg_core._synthesis import endpoint_kind

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_WORLD_ENTITIES = frozenset({"world", "world-ipv4", "world-ipv6"})

_SOURCES = ("k8s:", "any:", "reserved:", "cidr:", "unspec:", "container:")
_POLICY_KINDS = frozenset({"CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy"})


@attrs.frozen(slots=True)
class MatchResult:
    allowed: bool
    reason: str
    """Which rule allowed it (``ns/policy ingress[2]``), or why nothing did."""
    policy: str = ""
    rule: int = -1


def strip_source(key: str) -> str:
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
    if endpoint.cluster_name:
        out.setdefault(CLUSTER_LABEL, endpoint.cluster_name)
    return out


def selector_matches(
    selector: object,
    labels: Mapping[str, str],
    default_namespace: str | None,
    *,
    complete: bool = True,
    local_cluster: str | None = None,
) -> bool:
    """A LabelSelector against endpoint labels. ``default_namespace`` is the implicit namespace
    of a namespaced policy's peer selector (None: no implicit namespace). With ``complete``
    False the endpoint may carry labels beyond ``labels``: a selector that excludes a label
    cpg does not know (NotIn, DoesNotExist) does not match. With ``local_cluster`` (Cilium's
    policy-default-local-cluster), a selector that names no cluster selects only endpoints of
    that cluster (an endpoint whose cluster is unknown counts as local)."""
    if not isinstance(selector, Mapping):
        return False
    raw_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(raw_labels, Mapping) or not isinstance(expressions, list):
        return False  # not a LabelSelector the API server would accept
    match_labels = {strip_source(k): str(v) for k, v in raw_labels.items()}
    if (
        default_namespace is not None
        and NAMESPACE_LABEL not in match_labels
        and not any(
            strip_source(str(e.get("key", ""))) == NAMESPACE_LABEL
            for e in expressions
            if isinstance(e, Mapping)
        )
    ):
        match_labels[NAMESPACE_LABEL] = default_namespace
    if (
        local_cluster is not None
        and CLUSTER_LABEL not in match_labels
        and labels.get(CLUSTER_LABEL, local_cluster) != local_cluster
        and not any(
            strip_source(str(e.get("key", ""))) == CLUSTER_LABEL
            for e in expressions
            if isinstance(e, Mapping)
        )
    ):
        return False
    for key, value in match_labels.items():
        if labels.get(key) != value:
            return False
    for expr in expressions:
        if not isinstance(expr, Mapping):
            return False
        key = strip_source(str(expr.get("key", "")))
        op = expr.get("operator")
        raw_values = expr.get("values") or []
        if not isinstance(raw_values, list):
            return False  # not a LabelSelector the API server would accept
        values = [str(v) for v in raw_values]
        present = key in labels
        if not complete and not present and op in ("NotIn", "DoesNotExist"):
            return False
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


LOCALHOST_ADMITS = (
    "admitted by Cilium's allow-localhost: always (the node reaches its own pods whatever "
    "the policy)"
)


def from_own_node(flow: Flow) -> bool:
    """Ingress from ``reserved:host``: the node the pod runs on (a kubelet probe), which
    Cilium admits whatever the policy under its default ``allow-localhost: always``."""
    return flow.direction == Direction.INGRESS and endpoint_kind(flow.source).entity == "host"


def _network(text: str) -> Network | None:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def _in_cidrs(network: Network | None, cidrs: Iterable[object]) -> bool:
    """Whether every address of ``network`` is inside one of ``cidrs``."""
    if network is None:
        return False
    for cidr in cidrs:
        outer = _network(str(cidr))
        if (
            outer is not None and outer.version == network.version and network.subnet_of(outer)  # type: ignore[arg-type]
        ):
            return True
    return False


def _overlaps(network: Network | None, cidrs: Iterable[object]) -> bool:
    if network is None:
        return False
    for cidr in cidrs:
        outer = _network(str(cidr))
        if outer is not None and outer.version == network.version and network.overlaps(outer):
            return True
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
class PeerView:
    """What a rule needs to know about the peer: of a flow, or of an allow entry."""

    labels: dict[str, str]
    entities: frozenset[str]
    world: bool
    network: Network | None
    names: tuple[str, ...]
    complete: bool = True
    """Whether ``labels`` are all the peer's labels (an entry knows only the selected ones)."""
    local_cluster: str | None = None
    """The cluster selectors default to (policy-default-local-cluster), or None for every
    cluster (the default before Cilium 1.19)."""


@attrs.frozen(slots=True)
class Request:
    """What the traffic asks for: protocol and port (ICMP type), and its L7 request if known.
    ``http_path`` is a concrete path, or with ``regex`` cpg's own anchored path regex."""

    protocol: str
    port: int
    http_method: str | None = None
    http_path: str | None = None
    dns_name: str | None = None
    regex: bool = False
    every_request: bool = False
    """An allow entry without L7 asks for every request on the port, which a port with L7
    rules does not grant; a flow without an L7 record is a connection, which it admits (and
    hands to the proxy)."""


def peer_matches(
    rule: Mapping[str, Any], prefix: str, peer: PeerView, policy_ns: str | None
) -> bool:
    """Whether a rule's L3 part selects the peer. A rule with no L3 part selects every peer."""
    keys = [prefix + "Endpoints", prefix + "Entities", prefix + "CIDR", prefix + "CIDRSet"]
    if prefix == "to":
        keys += ["toFQDNs", "toServices"]
    present = [k for k in keys if k in rule]
    if not present:
        return True
    for selector in rule.get(prefix + "Endpoints") or []:
        if not peer.world and selector_matches(
            selector,
            peer.labels,
            policy_ns,
            complete=peer.complete,
            local_cluster=peer.local_cluster,
        ):
            return True
    if peer.entities & {str(e) for e in rule.get(prefix + "Entities") or []}:
        return True
    if peer.world and _in_cidrs(peer.network, rule.get(prefix + "CIDR") or []):
        return True
    for entry in rule.get(prefix + "CIDRSet") or []:
        if not isinstance(entry, Mapping) or not peer.world:
            continue
        if _in_cidrs(peer.network, [entry.get("cidr")]) and not _overlaps(
            peer.network, entry.get("except") or []
        ):
            return True
    return prefix == "to" and peer.world and _fqdn_matches(peer.names, rule.get("toFQDNs") or [])


def l7_matches(port_rule: Mapping[str, Any], request: Request) -> bool:
    rules = port_rule.get("rules")
    if not isinstance(rules, Mapping) or not rules:
        return True
    http_rules = rules.get("http")
    if http_rules and request.http_method is not None:
        for rule in http_rules:
            if isinstance(rule, Mapping) and _http_matches(rule, request):
                return True
        return False
    dns_rules = rules.get("dns")
    if dns_rules and request.dns_name is not None:
        return _fqdn_matches([request.dns_name], dns_rules)
    return not request.every_request


def _http_matches(rule: Mapping[str, Any], request: Request) -> bool:
    want_method, want_path = rule.get("method"), rule.get("path")
    method, path = request.http_method or "", request.http_path or "/"
    if request.regex:  # an allow entry: only the same pattern (or none) covers it
        return (not want_method or re.fullmatch(str(want_method), method) is not None) and (
            not want_path or str(want_path) == path
        )
    if want_method and not re.fullmatch(str(want_method), method):
        return False
    return not want_path or re.fullmatch(str(want_path), path) is not None


def ports_match(rule: Mapping[str, Any], request: Request) -> bool:
    to_ports = rule.get("toPorts")
    icmps = rule.get("icmps")
    if not to_ports and not icmps:
        return True
    if request.protocol in ICMP_PROTOCOLS:
        family = "IPv4" if request.protocol == ICMPV4 else "IPv6"
        for icmp in icmps or []:
            for field in (icmp or {}).get("fields") or []:
                if field.get("family", "IPv4") == family and str(field.get("type")) == str(
                    request.port
                ):
                    return True
        return False
    for port_rule in to_ports or []:
        if not isinstance(port_rule, Mapping):
            continue
        for port in port_rule.get("ports") or [{}]:
            # The CRD spells protocols in capitals; anything else never reaches a cluster.
            proto = str(port.get("protocol") or "ANY")
            if proto not in (request.protocol, "ANY"):
                continue
            try:
                low = int(port.get("port") or 0)
                high = int(port.get("endPort") or low)
            except (TypeError, ValueError):
                continue  # a named port: cpg cannot resolve it from a flow
            if (low == 0 or low <= request.port <= high) and l7_matches(port_rule, request):
                return True
    return False


def rule_admits(
    rule: object, prefix: str, peer: PeerView, request: Request, policy_ns: str | None
) -> bool:
    """Whether one ingress/egress (or deny) rule selects the peer and the request."""
    return (
        isinstance(rule, Mapping)
        and peer_matches(rule, prefix, peer, policy_ns)
        and ports_match(rule, request)
    )


def flow_request(flow: Flow) -> Request:
    l7 = flow.l7
    if l7 is not None and l7.http is not None:
        path = url_path(l7.http.url)
        return Request(flow.protocol, flow.port, http_method=l7.http.method.upper(), http_path=path)
    if l7 is not None and l7.dns is not None:
        return Request(flow.protocol, flow.port, dns_name=l7.dns.query)
    return Request(flow.protocol, flow.port)


def peer_side(
    endpoint: Endpoint, ip: str, names: Sequence[str], local_cluster: str | None
) -> PeerView:
    address = _network(ip) if ip else None
    return PeerView(
        labels=endpoint_labels(endpoint),
        entities=frozenset(_entities(endpoint)),
        world=endpoint_kind(endpoint).world,
        network=address if address is not None and address.num_addresses == 1 else None,
        names=tuple(names),
        local_cluster=local_cluster,
    )


def atom_peer(atom: Atom) -> PeerView:
    """The peer of an allow entry, as far as cpg knows it."""
    peer = atom.peer
    if isinstance(peer, EndpointPeer):
        labels = {**dict(peer.labels), NAMESPACE_LABEL: peer.namespace}
        if peer.cluster:  # another cluster's peer: a rule naming no cluster does not cover it
            labels[CLUSTER_LABEL] = peer.cluster
        return PeerView(
            labels, frozenset({"all", "cluster"}), False, None, (), complete=False, local_cluster=""
        )
    if isinstance(peer, EntityPeer):
        if peer.entity in _WORLD_ENTITIES:
            return PeerView({}, frozenset({"all", "world", peer.entity}), True, None, ())
        return PeerView({}, frozenset({"all", "cluster", peer.entity}), False, None, ())
    if isinstance(peer, CidrPeer):
        return PeerView({}, frozenset({"all", "world"}), True, _network(peer.cidr), ())
    return PeerView({}, frozenset({"all", "world"}), True, None, (peer.name,))


def atom_request(atom: Atom) -> Request:
    if atom.l7 and atom.l7[0] == HTTP:
        return Request(atom.protocol, atom.port, atom.l7[1], atom.l7[2], regex=True)
    if atom.l7 and atom.l7[0] == DNS:
        return Request(atom.protocol, atom.port, dns_name=atom.l7[1])
    return Request(atom.protocol, atom.port, every_request=True)


def covered_by(atom: Atom, rules: Iterable[object], namespace: str) -> bool:
    """Whether one of ``rules`` (of a policy in ``namespace``, in the atom's direction)
    already allows the allow entry, by the same semantics verify uses for flows."""
    prefix = "from" if atom.direction == INGRESS else "to"
    assert atom.direction in (INGRESS, EGRESS)
    peer, request = atom_peer(atom), atom_request(atom)
    return any(rule_admits(rule, prefix, peer, request, namespace) for rule in rules)


def _policy_name(policy: PolicyDocument) -> str:
    meta = policy.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '?')}"


class PolicyShapeError(CpgError):
    """A policy document has a field of a shape the CRD does not allow."""


Selected = tuple[PolicyDocument, Mapping[str, Any], str | None]
"""A policy, one of its specs that selects an endpoint, and its namespace (None: clusterwide)."""


def selecting_specs(policies: Iterable[PolicyDocument], endpoint: Endpoint) -> list[Selected]:
    """Every spec of ``policies`` whose endpointSelector selects ``endpoint``."""
    labels = endpoint_labels(endpoint)
    selecting = []
    for policy in policies:
        if not isinstance(policy, Mapping) or policy.get("kind") not in _POLICY_KINDS:
            continue
        meta = policy.get("metadata") or {}
        namespace = meta.get("namespace") if policy.get("kind") == "CiliumNetworkPolicy" else None
        if namespace and namespace != endpoint.namespace:
            continue
        specs = [policy.get("spec")] if policy.get("spec") else []
        specs += list(policy.get("specs") or [])
        for spec in specs:
            if isinstance(spec, Mapping) and selector_matches(
                spec.get("endpointSelector"), labels, None
            ):
                selecting.append((policy, spec, namespace))
    return selecting


def enforces(spec: Mapping[str, Any], direction: str) -> bool:
    """Whether a spec that selects an endpoint puts it into default-deny for ``direction``
    (``ingress`` or ``egress``): it has rules for that direction (allow or deny) and does not
    turn default-deny off with ``enableDefaultDeny``."""
    if not (spec.get(direction) or spec.get(direction + "Deny")):
        return False
    default_deny = spec.get("enableDefaultDeny")
    return not (isinstance(default_deny, Mapping) and default_deny.get(direction) is False)


def policy_name(policy: PolicyDocument) -> str:
    """``namespace/name`` (or ``name`` for a clusterwide policy)."""
    return _policy_name(policy).lstrip("/")


def match_flow(
    policies: Sequence[PolicyDocument],
    flow: Flow,
    ip_names: Mapping[str, Sequence[str]] | None = None,
    *,
    default_local_cluster: bool = True,
    allow_localhost: bool = True,
) -> MatchResult:
    """Whether ``policies`` allow ``flow`` in its traffic direction, and by which rule. A
    policy with a field of the wrong shape raises PolicyShapeError naming it.
    ``default_local_cluster`` is Cilium's policy-default-local-cluster (on since 1.19): a
    peer selector that names no cluster selects the enforcing endpoint's cluster only.
    ``allow_localhost`` is its ``allow-localhost: always`` (the default): the node reaches
    its own pods whatever the allow rules (a deny rule that matches still wins here, so a
    plan errs towards a warning)."""
    try:
        return _match_flow(policies, flow, ip_names, default_local_cluster, allow_localhost)
    except (TypeError, AttributeError, ValueError) as exc:
        for policy in policies:  # find the culprit to name it
            try:
                _match_flow([policy], flow, ip_names, default_local_cluster, allow_localhost)
            except (TypeError, AttributeError, ValueError):
                name = _policy_name(policy) if isinstance(policy, Mapping) else repr(policy)[:80]
                raise PolicyShapeError(
                    f"policy {name} is not a valid CiliumNetworkPolicy ({exc}); "
                    "check it with kubectl apply --dry-run=server"
                ) from None
        raise


def _match_flow(
    policies: Sequence[PolicyDocument],
    flow: Flow,
    ip_names: Mapping[str, Sequence[str]] | None,
    default_local_cluster: bool,
    allow_localhost: bool = True,
) -> MatchResult:
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
    local = (target.cluster_name or None) if default_local_cluster else None
    peer = peer_side(peer_ep, peer_ip, names, local)
    selecting = selecting_specs(policies, target)
    request = flow_request(flow)
    for policy, spec, namespace in selecting:  # deny rules win over any allow
        for index, rule in enumerate(spec.get(direction + "Deny") or []):
            if rule_admits(rule, prefix, peer, request, namespace):
                return MatchResult(
                    False,
                    f"denied by {_policy_name(policy)} {direction}Deny[{index}]",
                    _policy_name(policy),
                    index,
                )
    if allow_localhost and from_own_node(flow):
        return MatchResult(True, LOCALHOST_ADMITS)
    peer_hit = None
    for policy, spec, namespace in selecting:
        for index, rule in enumerate(spec.get(direction) or []):
            if not isinstance(rule, Mapping) or not peer_matches(rule, prefix, peer, namespace):
                continue
            if ports_match(rule, request):
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
        note_dns_names(out, flow)
    return out


def note_dns_names(names: dict[str, list[str]], flow: Flow) -> None:
    """Add what one DNS response says (IP → names) to ``names``."""
    dns = flow.l7.dns if flow.l7 is not None else None
    if dns is None or not dns.query:
        return
    name = dns.query.rstrip(".")
    for ip in dns.ips:
        known = names.setdefault(ip, [])
        if name not in known:
            known.append(name)
