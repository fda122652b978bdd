"""Would these CiliumNetworkPolicies allow this flow? The one matcher every verdict of cpg
rests on (verify, plan, why, trace, shadow, drift, and merge's "is this entry covered?"), with
Cilium's own semantics (ARCHITECTURE §D38):

- a peer selector is read as the agent reads it: ``k8s:``, ``any:`` (or no source) and
  ``reserved:`` keys; a namespaced policy adds its namespace unless the selector names a
  namespace, a namespace label (``io.cilium.k8s.namespace.labels.…``) or a reserved label;
  a clusterwide policy adds "has a namespace" (so ``{}`` selects pods only, never the host);
  with policy-default-local-cluster a selector that names no cluster selects the local one;
- an empty rule (``ingress: [{}]``) selects no peer: Cilium's default-deny idiom; a rule with
  ports or ICMP types but no peer selects every peer;
- entities: ``cluster`` is the local cluster's pods and Cilium's own identities,
  ``cluster-mesh`` the pods of the other clusters, ``world`` what is outside;
- a CIDR selects only peers outside the cluster, ``0.0.0.0/0`` and ``::/0`` also a world
  peer whose address is unknown; ``except`` removes what it covers;
- a port range whose ``endPort`` is below ``port`` is the single port; ``ANY`` is TCP, UDP
  and SCTP; ICMP types by number or by their name in the family;
- deny rules win; ``enableDefaultDeny: false`` keeps an endpoint out of default-deny.

:func:`judge_flow` gives the verdict under Cilium's default enforcement mode (an endpoint no
policy puts into default-deny allows). :func:`match_flow` answers the narrower question verify
and plan ask of a flow whose endpoint enforces policy: does a rule admit it?
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from cpg_core._base.documents import PolicyDocument
from cpg_core._base.errors import CpgError
from cpg_core._base.flow import ICMP_PROTOCOLS, ICMPV4, Direction, Endpoint, Flow
from cpg_core._base.l7 import url_path
from cpg_core._base.labels import CLUSTER_LABEL, NAMESPACE_LABEL, reserved_names
from cpg_core._base.rules import (
    DNS,
    EGRESS,
    HTTP,
    INGRESS,
    Atom,
    CidrPeer,
    EndpointPeer,
    EntityPeer,
)
from cpg_core._flows.synthesis import cluster_of, endpoint_kind
from cpg_core._policy.agent import CILIUM_DEFAULTS, AgentSettings
from cpg_core._policy.model import (
    DENY_SECTION,
    LOCAL_CLUSTER,
    HttpRule,
    NameMatch,
    Policy,
    PortRule,
    Requirement,
    Rule,
    Selector,
    Spec,
    document_namespace,
    policy_model,
    read_rule,
    selector_model,
)
from cpg_core._policy.policy_set import PolicySet
from cpg_core._policy.tiers import ACCEPT, ADMIN, BASELINE, PASS, TierVerdict, tier_verdict

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_WORLD_ENTITIES = frozenset({"world", "world-ipv4", "world-ipv6"})
_EVERYWHERE = frozenset({"0.0.0.0/0", "::/0"})


@attrs.frozen(slots=True)
class MatchResult:
    allowed: bool
    reason: str
    """Which rule allowed it (``ns/policy ingress[2]``), or why nothing did."""
    policy: str = ""
    rule: int = -1
    denied: bool = False
    """A deny rule matched (``policy`` and ``rule`` name it)."""
    tier: str = ""
    """``Admin`` or ``Baseline`` when a ClusterNetworkPolicy of that tier decided."""


def endpoint_labels(endpoint: Endpoint) -> dict[str, str]:
    """The k8s labels a selector sees, with plain keys (namespace and cluster included).
    Kept per set of labels, not per pod (the pods of a workload share one, and a pod that is
    gone holds nothing: §D56): callers only read it."""
    return _selector_labels(endpoint.labels, endpoint.namespace, endpoint.cluster_name)


@functools.lru_cache(maxsize=1 << 14)
def _selector_labels(labels: tuple[str, ...], namespace: str, cluster: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in labels:
        source, _, rest = text.partition(":")
        if source != "k8s":
            continue
        key, _, value = rest.partition("=")
        out[key] = value
    if namespace:
        out.setdefault(NAMESPACE_LABEL, namespace)
    if cluster:
        out.setdefault(CLUSTER_LABEL, cluster)
    return out


_POD_SOURCES = frozenset({"k8s", "any"})
_RESERVED_SOURCES = frozenset({"reserved", "any"})
_ABSENT = object()


def requirement_holds(
    req: Requirement,
    labels: Mapping[str, str],
    reserved: Iterable[str] = (),
    *,
    complete: bool = True,
) -> bool:
    """One term against an endpoint's labels. With ``complete`` False the endpoint may carry
    labels beyond ``labels`` (an allow entry knows only the selected ones): a term that
    needs a label to be absent does not hold. A reserved name the term's source reaches
    counts as the label, with the empty value."""
    source, key, op, values = req
    value = labels.get(key, _ABSENT) if source in _POD_SOURCES else _ABSENT
    has = value is not _ABSENT
    named = source in _RESERVED_SOURCES and key in reserved
    if op == "In":
        return (has and value in values) or (named and "" in values)
    if op == LOCAL_CLUSTER:
        if has:
            return value == values[0]
        return values[0] == "" if named else NAMESPACE_LABEL in labels
    if op == "NotIn":
        return (
            (not has or value not in values)
            and (not named or "" not in values)
            and (complete or has or named)
        )
    if op == "Exists":
        return has or named
    return not has and not named and complete  # DoesNotExist


def selector_matches(
    selector: object,
    labels: Mapping[str, str],
    default_namespace: str | None,
    *,
    complete: bool = True,
    local_cluster: str | None = None,
    reserved: Iterable[str] = (),
    clusterwide: bool = False,
) -> bool:
    """A peer selector (written, or read) against endpoint labels: of a policy in
    ``default_namespace``, or of a clusterwide policy (``clusterwide``); with neither, the
    selector as written (an endpointSelector)."""
    read = selector if isinstance(selector, Selector) else selector_model(selector)
    reqs = read.peer_terms(default_namespace, clusterwide, local_cluster)
    if reqs is None:
        return False
    names = reserved if isinstance(reserved, frozenset) else frozenset(reserved)
    return all(requirement_holds(r, labels, names, complete=complete) for r in reqs)


def _same_cluster(peer: Endpoint, cluster: str | None) -> bool:
    mine = cluster_of(peer)
    return not mine or not cluster or mine == cluster


def _entities(endpoint: Endpoint, reserved: frozenset[str], cluster: str | None) -> set[str]:
    """The entities that select ``endpoint``, seen from an endpoint of ``cluster``."""
    kind = endpoint_kind(endpoint)
    names = {"all"}
    if kind.world:
        names.add("world")
        names.update(n for n in reserved if n in ("world-ipv4", "world-ipv6"))
        return names
    if kind.entity or reserved - _WORLD_ENTITIES:
        names.add("cluster")  # Cilium's own identities belong to the local cluster
        names.update(reserved - _WORLD_ENTITIES)
        if kind.entity:
            names.add(kind.entity)
        return names
    names.add("cluster" if _same_cluster(endpoint, cluster) else "cluster-mesh")
    return names


LOCALHOST_ADMITS = (
    "admitted by Cilium's allow-localhost: always (the node reaches its own pods whatever "
    "the policy)"
)


def from_own_node(flow: Flow) -> bool:
    """Ingress from ``reserved:host``: the node the pod runs on (a kubelet probe), which
    Cilium admits whatever the policy under its default ``allow-localhost: always``."""
    if flow.direction != Direction.INGRESS:
        return False
    return endpoint_kind(flow.source).entity == "host" or "host" in reserved_names(
        flow.source.labels
    )


def _network(text: str) -> Network | None:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def _cidr_selects(peer: PeerView, cidr: object, excepts: Iterable[object] = ()) -> bool:
    """Whether a CIDR (minus ``excepts``) selects a world peer: every address of the peer's
    inside it, or, with its address unknown, the CIDR is the whole address space of the
    peer's world identity. Cilium reads ``0.0.0.0/0`` as ``reserved:world`` (or
    ``world-ipv4``) and ``::/0`` as ``world-ipv6``: a single-stack agent's world peer is
    selected by the first only."""
    outer = _network(str(cidr))
    if outer is None or not peer.world:
        return False
    network = peer.network
    if network is None:
        family = 6 if "world-ipv6" in peer.entities else 4
        if peer.dual_stack and not {"world-ipv4", "world-ipv6"} & peer.entities:
            return False  # a dual-stack agent's bare world: neither half
        return (
            str(outer) in _EVERYWHERE
            and outer.version == family
            and not any(str(_network(str(e))) in _EVERYWHERE for e in excepts)
        )
    if outer.version != network.version or not network.subnet_of(outer):  # type: ignore[arg-type]
        return False
    for text in excepts:
        inner = _network(str(text))
        if inner is not None and inner.version == network.version and network.overlaps(inner):
            return False
    return True


_DNS_CHARS = "[-a-zA-Z0-9_]"


def fqdn_regex(pattern: str) -> re.Pattern[str]:
    """A matchPattern as Cilium compiles it: ``*`` is any run of DNS characters within one
    label (``*`` alone: every name), a leading ``**.`` one or more labels (Cilium 1.19+)."""
    text = pattern.strip().lower().rstrip(".")
    if text == "*":
        return re.compile(r"(?:[-a-z0-9_]+\.?)+")
    prefix = ""
    if text.startswith("**."):
        prefix, text = f"(?:{_DNS_CHARS}+\\.)+", text[3:]
    body = re.escape(text).replace(r"\*", f"{_DNS_CHARS}*")
    return re.compile(prefix + body, re.IGNORECASE)


def fqdn_matches(names: Iterable[str], matches: Iterable[NameMatch]) -> bool:
    wanted = [n.lower().rstrip(".") for n in names]
    for entry in matches:
        if entry.name and entry.name.lower().rstrip(".") in wanted:
            return True
        if entry.pattern:
            regex = fqdn_regex(entry.pattern)
            if any(regex.fullmatch(n) for n in wanted):
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
    reserved: frozenset[str] = frozenset()
    """Names of the peer's ``reserved:`` labels (host, remote-node, world, …)."""
    dual_stack: bool = False
    """Seen by a dual-stack agent: a world peer without an address carries neither
    ``world-ipv4`` nor ``world-ipv6``, so ``0.0.0.0/0`` and ``::/0`` select it not."""


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


def peer_matches(rule: Rule, peer: PeerView, policy_ns: str | None) -> bool:
    """Whether a rule's L3 part selects the peer (``policy_ns`` None: a clusterwide policy).
    A rule with no L3 part selects every peer when it names ports or ICMP types, and no
    peer at all when it is empty (``{}``: Cilium's default-deny idiom)."""
    if not rule.has_l3:
        return rule.has_l4
    if labels_or_entities_match(rule, peer, policy_ns):
        return True
    if any(_cidr_selects(peer, entry.cidr, entry.excepts) for entry in rule.cidrs):
        return True
    return rule.side == "to" and peer.world and fqdn_matches(peer.names, rule.fqdns)


def labels_or_entities_match(rule: Rule, peer: PeerView, policy_ns: str | None) -> bool:
    """Whether an endpoint selector or an entity of the rule selects the peer."""
    for selector in rule.endpoints:
        if selector_matches(
            selector,
            peer.labels,
            policy_ns,
            complete=peer.complete,
            local_cluster=peer.local_cluster,
            reserved=peer.reserved,
            clusterwide=policy_ns is None,
        ):
            return True
    return bool(rule.entities) and not peer.entities.isdisjoint(rule.entities)


def l7_matches(port_rule: PortRule, request: Request) -> bool:
    if not port_rule.has_l7:
        return True
    if port_rule.has_http and request.http_method is not None:
        return any(_http_matches(rule, request) for rule in port_rule.http)
    if port_rule.has_dns and request.dns_name is not None:
        return fqdn_matches([request.dns_name], port_rule.dns)
    return not request.every_request


def _http_matches(rule: HttpRule, request: Request) -> bool:
    want_method, want_path = rule.method, rule.path
    method, path = request.http_method or "", request.http_path or "/"
    if request.regex:  # an allow entry: only the same pattern (or none) covers it
        return (not want_method or _fullmatch(want_method, method)) and (
            not want_path or want_path == path
        )
    if want_method and not _fullmatch(want_method, method):
        return False
    return not want_path or _fullmatch(want_path, path)


def _fullmatch(pattern: str, text: str) -> bool:
    try:
        return re.fullmatch(pattern, text) is not None
    except re.error:
        return False  # a pattern Cilium refuses (lint names it) admits nothing


def ports_match(rule: Rule, request: Request) -> bool:
    if not rule.has_l4:
        return True
    if request.protocol in ICMP_PROTOCOLS:
        family = "IPv4" if request.protocol == ICMPV4 else "IPv6"
        return any(field.number == (family, request.port) for field in rule.icmps)
    for port_rule in rule.port_rules:
        for port in port_rule.effective_ports:
            # The CRD spells protocols in capitals; anything else never reaches a cluster.
            if port.protocol not in (request.protocol, "ANY"):
                continue
            span = port.span
            if span is None:
                continue  # a named port: cpg cannot resolve it from a flow
            if span[0] <= request.port <= span[1] and l7_matches(port_rule, request):
                return True
    return False


def rule_admits(rule: Rule, peer: PeerView, request: Request, policy_ns: str | None) -> bool:
    """Whether one ingress/egress (or deny) rule selects the peer and the request."""
    return peer_matches(rule, peer, policy_ns) and ports_match(rule, request)


def flow_request(flow: Flow) -> Request:
    l7 = flow.l7
    if l7 is not None and l7.http is not None:
        path = url_path(l7.http.url)
        return Request(flow.protocol, flow.port, http_method=l7.http.method.upper(), http_path=path)
    if l7 is not None and l7.dns is not None:
        return Request(flow.protocol, flow.port, dns_name=l7.dns.query)
    return Request(flow.protocol, flow.port)


_PEERS: dict[tuple[Any, ...], PeerView] = {}
_PEERS_MAX = 1 << 14


def peer_side(
    endpoint: Endpoint,
    ip: str,
    names: Sequence[str],
    local_cluster: str | None,
    cluster: str | None = None,
    dual_stack: bool = False,
) -> PeerView:
    """The peer of a flow, seen by an endpoint of ``cluster`` (the agent's own cluster, for
    the ``cluster`` entity; ``local_cluster`` when not given). A peer Hubble gave the world
    identity while naming its pod (an L7 record, a stale ipcache) is a pod whose labels are
    unknown: no CIDR, world or FQDN rule selects it (Cilium's CIDR rules never select a pod it
    manages), and a label selector only if it asks for nothing cpg cannot see. Kept for the
    next flow of the same peer (a view is never changed once made)."""
    key = (endpoint, ip, tuple(names), local_cluster, cluster, dual_stack)
    known = _PEERS.get(key)
    if known is None:
        if len(_PEERS) >= _PEERS_MAX:
            _PEERS.clear()
        known = _PEERS[key] = _peer_side(endpoint, ip, names, local_cluster, cluster, dual_stack)
    return known


def _peer_side(
    endpoint: Endpoint,
    ip: str,
    names: Sequence[str],
    local_cluster: str | None,
    cluster: str | None,
    dual_stack: bool = False,
) -> PeerView:
    address = _network(ip) if ip else None
    network = address if address is not None and address.num_addresses == 1 else None
    reserved = frozenset(reserved_names(endpoint.labels))
    if "kube-apiserver" in reserved:
        reserved |= {"remote-node"}  # Cilium's API server identity carries both names
    if dual_stack and network is not None and endpoint_kind(endpoint).world:
        reserved |= {f"world-ipv{network.version}"}  # each family its own world
    if endpoint.pod_name and endpoint_kind(endpoint).world:
        labels = {NAMESPACE_LABEL: endpoint.namespace} if endpoint.namespace else {}
        return PeerView(
            labels,
            frozenset({"all", "cluster"}),
            False,
            network,
            (),
            complete=False,
            local_cluster=local_cluster,
        )
    return PeerView(
        labels=endpoint_labels(endpoint),
        entities=frozenset(_entities(endpoint, reserved, cluster or local_cluster)),
        world=endpoint_kind(endpoint).world,
        network=network,
        names=tuple(names),
        local_cluster=local_cluster,
        reserved=reserved,
        dual_stack=dual_stack,
    )


def atom_peer(atom: Atom) -> PeerView:
    """The peer of an allow entry, as far as cpg knows it."""
    peer = atom.peer
    if isinstance(peer, EndpointPeer):
        labels = {**dict(peer.labels), NAMESPACE_LABEL: peer.namespace}
        here = "cluster"
        if peer.cluster:  # another cluster's peer: a rule naming no cluster does not cover it
            labels[CLUSTER_LABEL] = peer.cluster
            here = "cluster-mesh"
        return PeerView(
            labels, frozenset({"all", here}), False, None, (), complete=False, local_cluster=""
        )
    if isinstance(peer, EntityPeer):
        world = peer.entity in _WORLD_ENTITIES
        entities = {"all", "world" if world else "cluster", peer.entity}
        reserved = frozenset({peer.entity})
        return PeerView({}, frozenset(entities), world, None, (), reserved=reserved)
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
    """Whether one of ``rules`` (written rules of a policy in ``namespace``, in the atom's
    direction) already allows the allow entry, by the same semantics verify uses for flows."""
    assert atom.direction in (INGRESS, EGRESS)
    peer, request = atom_peer(atom), atom_request(atom)
    for written in rules:
        rule = read_rule(written, atom.direction)
        if rule is not None and rule_admits(rule, peer, request, namespace):
            return True
    return False


def _policy_name(policy: PolicyDocument | Policy) -> str:
    return (policy if isinstance(policy, Policy) else policy_model(policy)).label


class PolicyShapeError(CpgError):
    """A policy document has a field of a shape the CRD does not allow."""


Selected = tuple[Policy, Spec, str | None]
"""A policy, one of its specs that selects an endpoint, and its namespace (None: clusterwide)."""


policy_namespace = document_namespace


def selecting_specs(
    policies: Iterable[PolicyDocument] | PolicySet,
    endpoint: Endpoint,
    *,
    host_firewall: bool = False,
) -> list[Selected]:
    """Every spec of ``policies`` that selects ``endpoint``: a pod by its endpointSelector;
    the node (``reserved:host``) by a clusterwide policy's nodeSelector, and only with the
    host firewall (an endpointSelector never selects the node; without the host firewall,
    Cilium ignores host policies). Of a PolicySet: looked up in its index, and kept; the
    caller does not change the list."""
    if is_host(endpoint):
        if not host_firewall:
            return []
        models = (p if isinstance(p, Policy) else policy_model(p) for p in _documents(policies))
        return _host_specs(_specs_of(models, ""), endpoint)
    if isinstance(policies, PolicySet):
        # What selection reads of an endpoint: pods of one workload share the answer.
        key = ("selecting", endpoint.namespace, endpoint.labels, endpoint.cluster_name)
        return policies.remembered(key, lambda: _indexed_selecting(policies, endpoint))
    models = (policy_model(p) for p in policies)
    return _selecting_specs(_specs_of(models, endpoint.namespace), endpoint)


def is_host(endpoint: Endpoint) -> bool:
    """Whether ``endpoint`` is the node itself (``reserved:host``)."""
    return endpoint_kind(endpoint).entity == "host" or "host" in reserved_names(endpoint.labels)


def _documents(policies: Iterable[PolicyDocument] | PolicySet) -> Iterable[Any]:
    return policies.models_near("") if isinstance(policies, PolicySet) else policies


def _host_specs(candidates: Iterable[Selected], node: Endpoint) -> list[Selected]:
    """The host policies whose nodeSelector selects the node (its labels as written: no
    namespace is added, no reserved label counts)."""
    labels = endpoint_labels(node)
    return [
        (policy, spec, namespace)
        for policy, spec, namespace in candidates
        if spec.node_subject is not None and selector_matches(spec.node_subject, labels, None)
    ]


def _selecting_specs(candidates: Iterable[Selected], endpoint: Endpoint) -> list[Selected]:
    labels = endpoint_labels(endpoint)
    reserved = frozenset(reserved_names(endpoint.labels))
    return [
        (policy, spec, namespace)
        for policy, spec, namespace in candidates
        if spec.subject is not None
        and selector_matches(spec.subject, labels, None, reserved=reserved)
    ]


def _specs_of(policies: Iterable[Policy], namespace: str) -> Iterator[Selected]:
    """Every spec of ``policies`` that may select an endpoint of ``namespace``: the specs of
    the clusterwide policies and of that namespace's, in order."""
    for policy in policies:
        if not policy.cilium:
            continue
        own = policy.namespace
        if own is not None and own != namespace:
            continue
        for spec in policy.specs:
            yield policy, spec, own


SpecIndex = tuple[list[tuple[int, Selected]], dict[tuple[str, str], list[tuple[int, Selected]]]]
"""The specs of one namespace by a label their subject selector requires (``app=web``), and
those that require none: an endpoint needs to test only the specs of its own labels."""


def _spec_index(specs: Iterable[Selected]) -> SpecIndex:
    always: list[tuple[int, Selected]] = []
    anchored: dict[tuple[str, str], list[tuple[int, Selected]]] = {}
    for position, selected in enumerate(specs):
        subject = selected[1].subject
        terms = None if subject is None else subject.terms
        if terms is None:
            continue  # selects nothing
        anchor = next(
            (
                (key, values[0])
                for source, key, op, values in terms
                if op == "In" and len(values) == 1 and values[0] and source in ("k8s", "any")
            ),
            None,
        )
        if anchor is None:
            always.append((position, selected))
        else:
            anchored.setdefault(anchor, []).append((position, selected))
    return always, anchored


def _indexed_selecting(policies: PolicySet, endpoint: Endpoint) -> list[Selected]:
    """:func:`selecting_specs` through the set's index: only the specs whose required label
    the endpoint has are tested (a non-empty value of a label cannot come from a reserved
    name, so an endpoint without the label is never selected by them)."""
    always, anchored = policies.remembered(
        ("spec-index", endpoint.namespace),
        lambda: _spec_index(
            _specs_of(policies.models_near(endpoint.namespace), endpoint.namespace)
        ),
    )
    candidates = list(always)
    for item in endpoint_labels(endpoint).items():
        candidates += anchored.get(item, ())
    candidates.sort(key=lambda pair: pair[0])
    return _selecting_specs((selected for _, selected in candidates), endpoint)


def policy_name(policy: PolicyDocument | Policy) -> str:
    """``namespace/name`` (or ``name`` for a clusterwide policy)."""
    return _policy_name(policy).lstrip("/")


@attrs.frozen(slots=True)
class Judgement:
    """Cilium's verdict on one flow in its traffic direction."""

    result: MatchResult
    """What the rules say: a deny rule, an allow rule (or allow-localhost), or neither."""
    policed_by: tuple[str, ...]
    """The policies that select the subject with rules for this direction."""
    default_deny: bool
    """Whether one of them puts the subject into default-deny (``enableDefaultDeny``)."""

    @property
    def allowed(self) -> bool:
        """The verdict under Cilium's default enforcement mode."""
        if self.result.denied:
            return False
        return self.result.allowed or not self.default_deny

    @property
    def allowed_enforced(self) -> bool:
        """The verdict under ``policy-enforcement-mode: always`` (every endpoint default-deny)."""
        return self.result.allowed


def judge_flow(
    policies: Sequence[PolicyDocument],
    flow: Flow,
    ip_names: Mapping[str, Sequence[str]] | None = None,
    *,
    agent: AgentSettings = CILIUM_DEFAULTS,
) -> Judgement:
    """Whether Cilium would allow ``flow`` under ``policies`` (see :func:`match_flow`)."""
    result = match_flow(policies, flow, ip_names, agent=agent)
    if flow.direction not in (Direction.INGRESS, Direction.EGRESS):
        return Judgement(result, (), False)
    direction = "ingress" if flow.direction == Direction.INGRESS else "egress"
    target = flow.destination if direction == "ingress" else flow.source
    selected = selecting_specs(policies, target, host_firewall=agent.host_firewall)
    policed = sorted({p.display_name for p, spec, _ in selected if spec.polices(direction)})
    default_deny = any(spec.enforces(direction) for _, spec, _ in selected)
    return Judgement(result, tuple(policed), default_deny)


def match_flow(
    policies: Sequence[PolicyDocument],
    flow: Flow,
    ip_names: Mapping[str, Sequence[str]] | None = None,
    *,
    agent: AgentSettings = CILIUM_DEFAULTS,
) -> MatchResult:
    """Whether a rule of ``policies`` admits ``flow`` in its traffic direction, the endpoint
    being taken to enforce policy there (it dropped the flow, or will once policed), and by
    which rule. A policy with a field of the wrong shape raises PolicyShapeError naming it.
    ``agent`` is how the agents are configured (Cilium's defaults unless said): with
    ``allow-localhost: always`` the node reaches its own pods whatever the allow rules (a
    deny rule that matches still wins here, so a plan errs towards a warning); with
    ``policy-default-local-cluster`` a peer selector that names no cluster selects the
    enforcing endpoint's cluster only."""
    try:
        return _match_flow(policies, flow, ip_names, agent)
    except (TypeError, AttributeError, ValueError) as exc:
        for policy in policies:  # find the culprit to name it
            try:
                _match_flow([policy], flow, ip_names, agent)
            except (TypeError, AttributeError, ValueError):
                name = _policy_name(policy) if isinstance(policy, Mapping) else repr(policy)[:80]
                raise PolicyShapeError(
                    f"policy {name} is not a valid CiliumNetworkPolicy ({exc}); "
                    "check it with kubectl apply --dry-run=server"
                ) from None
        raise


def flow_peer(
    flow: Flow,
    ip_names: Mapping[str, Sequence[str]] | None,
    default_local_cluster: bool,
    dual_stack: bool = False,
) -> PeerView:
    """The peer a flow's subject sees (the source at ingress, the destination at egress)."""
    ingress = flow.direction == Direction.INGRESS
    target = flow.destination if ingress else flow.source
    peer_ep, peer_ip = (
        (flow.source, flow.source_ip) if ingress else (flow.destination, flow.destination_ip)
    )
    names = list(flow.source_names if ingress else flow.destination_names)
    names += list((ip_names or {}).get(peer_ip, ()))
    cluster = cluster_of(target) or None
    local = cluster if default_local_cluster else None
    return peer_side(peer_ep, peer_ip, names, local, cluster, dual_stack)


def _match_flow(
    policies: Sequence[PolicyDocument],
    flow: Flow,
    ip_names: Mapping[str, Sequence[str]] | None,
    agent: AgentSettings,
) -> MatchResult:
    if flow.direction == Direction.INGRESS:
        direction, target, target_ip = ("ingress", flow.destination, flow.destination_ip)
    elif flow.direction == Direction.EGRESS:
        direction, target, target_ip = ("egress", flow.source, flow.source_ip)
    else:
        return MatchResult(False, "the flow has no traffic direction")
    allow_localhost = agent.allow_localhost
    peer = flow_peer(flow, ip_names, agent.default_local_cluster, agent.dual_stack)
    admin = tier_verdict(policies, ADMIN, flow, peer.names)
    if admin is not None and admin.action != PASS:  # the Admin tier decides first (§D42)
        return _tier_result(admin)
    selecting = selecting_specs(policies, target, host_firewall=agent.host_firewall)
    request = flow_request(flow)
    for policy, spec, namespace in selecting:  # deny rules win over any allow
        for rule in spec.rules(DENY_SECTION[direction]):
            if rule_admits(rule, peer, request, namespace):
                return MatchResult(
                    False,
                    f"denied by {policy.display_name} {rule.where}",
                    policy.display_name,
                    rule.index,
                    denied=True,
                )
    if allow_localhost and from_own_node(flow):
        return MatchResult(True, LOCALHOST_ADMITS)
    # The ports first: they are cheap to compare and rule most rules out, while selecting
    # the peer reads label selectors.
    for policy, spec, namespace in selecting:
        for rule in spec.rules(direction):
            if ports_match(rule, request) and peer_matches(rule, peer, namespace):
                return MatchResult(
                    True,
                    f"allowed by {policy.display_name} {rule.where}",
                    policy.display_name,
                    rule.index,
                )
    who = f"{target.namespace}/{target.pod_name or ','.join(target.labels) or target_ip}"
    if not any(spec.polices(direction) for _, spec, _ in selecting):
        # Only a pod no namespaced policy selects for this direction reaches the Baseline
        # tier; without a rule there, Kubernetes' default (allow) is left to the caller.
        baseline = tier_verdict(policies, BASELINE, flow, peer.names)
        if baseline is not None and baseline.action != PASS:
            return _tier_result(baseline)
    if not selecting:
        return MatchResult(False, f"no policy selects {who} for {direction}")
    traffic = f"{flow.protocol}/{flow.port}" if flow.protocol else "this traffic"
    peer_hit = _first_peer_hit(selecting, direction, peer)
    if peer_hit:
        return MatchResult(False, f"{peer_hit} selects the peer but not {traffic}")
    return MatchResult(False, f"no {direction} rule selects the peer ({direction} {traffic})")


def _first_peer_hit(selecting: Sequence[Selected], direction: str, peer: PeerView) -> str:
    """The first allow rule that selects the peer (its ports do not admit the traffic), for
    the reason a flow is refused."""
    for policy, spec, namespace in selecting:
        for rule in spec.rules(direction):
            if peer_matches(rule, peer, namespace):
                return f"{policy.display_name} {rule.where}"
    return ""


def _tier_result(verdict: TierVerdict) -> MatchResult:
    accepted = verdict.action == ACCEPT
    return MatchResult(
        accepted,
        verdict.reason,
        verdict.policy,
        verdict.rule,
        denied=not accepted,
        tier=verdict.tier,
    )


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
