"""Why a flow was denied, and what would admit it: the question Cilium users ask most about
policies. One answer per kind of flow, with the same matcher ``verify`` and ``plan`` use: the
drop as Hubble recorded it, the policies that police the subject, each of their rules that
could have admitted it and exactly why it misses (nearest first), the deny rules that win,
and the rule that would admit it as YAML (ARCHITECTURE §D26)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from cpg_core._base.advice import advice_for
from cpg_core._base.documents import PolicyDocument
from cpg_core._base.dropreasons import classify_reason, reason_name, remediation
from cpg_core._base.flow import Direction, DNSInfo, Endpoint, Flow, HTTPInfo, L7Info, Verdict
from cpg_core._base.labels import CLUSTER_LABEL, NAMESPACE_LABEL, label_problem, stable_labels
from cpg_core._base.request_error import RequestError
from cpg_core._flows.decide import DecideOptions, Decision, decide
from cpg_core._flows.synthesis import endpoint_name, looks_masked
from cpg_core._policy.agent import CILIUM_DEFAULTS, AgentSettings
from cpg_core._policy.matcher import (
    PeerView,
    Request,
    Selected,
    dns_names,
    flow_peer,
    flow_request,
    from_own_node,
    is_host,
    judge_flow,
    match_flow,
    peer_matches,
    ports_match,
    requirement_holds,
    rule_admits,
    selecting_specs,
)
from cpg_core._policy.model import (
    DENY_SECTION,
    LOCAL_CLUSTER,
    Requirement,
    Rule,
    Selector,
    peer_requirements,
)
from cpg_core._review.traffic import traffic_line
from cpg_core._synthesis.fixes import rule_yaml
from cpg_core.text import shown

_UNFIXABLE = {
    Decision.INFRA: "an infrastructure drop: no policy causes or fixes it",
    Decision.TRANSIENT: "a transient drop (an endpoint starting, a stale route): no policy "
    "fixes it; it stops once the endpoint is ready",
    Decision.NOISE: "noise Cilium drops on purpose (unsupported L3/L2 traffic): no policy fixes it",
}
_FINDING_KIND = {
    Decision.EXPLICIT_DENY: "explicit_deny",
    Decision.AUTH_REQUIRED: "auth_required",
    Decision.LB_SOURCE_RANGE: "lb_source_range",
}


@attrs.frozen(slots=True)
class RuleMiss:
    """One rule of a policy that polices the subject, and why it does not admit the flow."""

    policy: str
    section: str
    """``ingress``, ``egress``, ``ingressDeny`` or ``egressDeny``."""
    index: int
    misses: tuple[str, ...]
    """What differs, most telling first: the peer label, namespace or cluster, the port, the
    L7 rule. Empty for a deny rule that matches."""
    distance: int


@attrs.frozen(slots=True, kw_only=True)
class Why:
    """The answer for one kind of flow."""

    traffic: str
    flows: int
    verdict: str
    drop_reason: str
    """Hubble's drop reason name ("" for a flow that was not dropped)."""
    drop_class: str
    """``policy``, ``infra``, ``transient``, ``noise``, ``explicit_deny``, ``auth_required``,
    ``lb_source_range``, or ``forwarded``."""
    direction: str
    subject: str
    """``namespace/workload`` of the endpoint whose policy decides (ingress: the destination)."""
    policed_by: tuple[str, ...] = ()
    """Policies that select the subject with rules for this direction (none: all allowed)."""
    allowed: bool = False
    """Whether the policies judged admit the flow."""
    allowed_by: str = ""
    deny: tuple[RuleMiss, ...] = ()
    near_misses: tuple[RuleMiss, ...] = ()
    admit_yaml: str = ""
    """The allow rule that would admit the flow ("" when no rule can, or none is needed)."""
    answer: str
    """The whole story in one or two sentences."""
    fix: str
    evidence: str = ""
    """For an admitted flow, the evidence behind cpg's rule for it, in words ("" when the
    evidence was not asked for or holds none)."""
    declared_by: tuple[str, ...] = ()
    """The cluster objects that declare this connection (``Kind ns/name (what)``): the
    cluster depends on it whether or not a capture shows it (§D58)."""


def _labels_diff(
    selector: Selector, peer: PeerView, namespace: str | None
) -> tuple[list[str], int]:
    """What a peer selector wants that the peer lacks, term by term as Cilium reads the
    selector (with the namespace and cluster it adds): ``key=want (peer: have)``."""
    if selector.terms is None:
        return ["a selector Cilium would refuse (an unknown operator, In without values)"], 9
    reqs = peer_requirements(list(selector.terms), namespace, peer.local_cluster)
    misses = [
        _term_miss(req, peer)
        for req in sorted(reqs, key=lambda r: (r[1] in (NAMESPACE_LABEL, CLUSTER_LABEL), r[1]))
        if not requirement_holds(req, peer.labels, peer.reserved, complete=peer.complete)
    ]
    return misses, len(misses)


def _term_miss(req: Requirement, peer: PeerView) -> str:
    source, key, op, values = req
    have = peer.labels.get(key)
    has = f"{key}={have}" if have is not None else f"no {key}"
    if op == LOCAL_CLUSTER:
        return (
            f"the local cluster {values[0]} (the peer is in {have}; a selector without a "
            "cluster label selects the local one)"
        )
    if key == NAMESPACE_LABEL and op == "Exists":
        what = ", ".join(sorted(peer.reserved)) or "not a pod"
        return f"a pod (a clusterwide policy's peer selector selects pods only; the peer: {what})"
    single = op == "In" and len(values) == 1
    if key == NAMESPACE_LABEL and single:
        return f"namespace {values[0]} (the peer is in {have or 'no namespace'})"
    if key == CLUSTER_LABEL and single:
        return f"cluster {values[0]} (the peer is in {have or 'an unknown cluster'})"
    if source == "reserved":
        return f"reserved:{key} (the peer: {', '.join(sorted(peer.reserved)) or 'a pod'})"
    if single:
        return f"{key}={values[0]} (the peer has {has})"
    listed = f" {list(values)}" if values else ""
    return f"{key} {op}{listed} (the peer has {has})"


def _peer_miss(rule: Rule, peer: PeerView, ns: str | None) -> list[str]:
    """Why the rule's L3 part does not select the peer (the nearest selector's differences)."""
    if rule.empty:
        return ["nothing: an empty rule selects no peer (Cilium's default-deny idiom)"]
    best: tuple[int, list[str]] | None = None
    for selector in rule.endpoints:
        reqs = selector.terms or ()
        if peer.world and not any(source == "reserved" for source, *_ in reqs):
            candidate = (5, ["endpoint selectors, but the peer is outside the cluster (world)"])
        else:
            misses, distance = _labels_diff(selector, peer, ns)
            candidate = (distance, misses)
        if best is None or candidate[0] < best[0]:
            best = candidate
    if rule.entities:
        shown = ", ".join(sorted(peer.entities - {"all"})) or "none"
        candidate = (4, [f"entities {', '.join(rule.entities)} (the peer is {shown})"])
        best = candidate if best is None or candidate[0] < best[0] else best
    cidrs = [str(entry.cidr) for entry in rule.cidrs]
    if cidrs:
        where = str(peer.network) if peer.network is not None else "no IP"
        text = f"CIDRs {', '.join(cidrs)} (the peer is {where}" + (
            ", a pod: CIDR rules never select pods Cilium manages)" if not peer.world else ")"
        )
        candidate = (4, [text])
        best = candidate if best is None or candidate[0] < best[0] else best
    if rule.fqdns:
        names = ", ".join(peer.names) or "no DNS name seen for its IP"
        candidate = (4, [f"FQDNs {rule.fqdns_written} (the peer: {names})"])
        best = candidate if best is None or candidate[0] < best[0] else best
    return best[1] if best is not None else ["a peer of another kind"]


def _port_text(rule: Rule) -> str:
    shown = []
    for port_rule in rule.port_rules:
        for port in port_rule.ports:
            end = f"-{port.end_written}" if port.end_written else ""
            protocol = "ANY" if "protocol" not in port.written else port.protocol_written
            number = "any" if "port" not in port.written else port.port_written
            shown.append(f"{protocol}/{number}{end}")
    for field in rule.icmps:
        shown.append(f"ICMP type {field.type_written}")
    return ", ".join(shown) or "no port"


def _l7_text(rule: Rule) -> str:
    shown = []
    for port_rule in rule.port_rules:
        for http in port_rule.http:
            shown.append(f"{http.written.get('method', '*')} {http.written.get('path', '*')}")
        for dns in port_rule.dns:
            shown.append(f"DNS {dns.text or None}")
    return ", ".join(shown)


def _request_text(flow: Flow, request: Request) -> str:
    if request.http_method is not None:
        return f"HTTP {request.http_method} {request.http_path}"
    if request.dns_name is not None:
        return f"DNS {request.dns_name}"
    return f"{flow.protocol}/{flow.port}" if flow.protocol else "this traffic"


def _rule_miss(
    policy: str,
    section: str,
    index: int,
    rule: Rule,
    peer: PeerView,
    request: Request,
    flow: Flow,
    ns: str | None,
) -> RuleMiss | None:
    misses: list[str] = []
    distance = 0
    if not peer_matches(rule, peer, ns):
        peer_misses = _peer_miss(rule, peer, ns)
        misses += [f"peer: wants {m}" for m in peer_misses]
        distance += 2 * max(1, len(peer_misses))
    if not ports_match(rule.without_l7(), request):
        want = _port_text(rule)
        misses.append(f"port: {flow.protocol}/{flow.port} is not in {want}")
        distance += 1
    elif not ports_match(rule, request):
        misses.append(
            f"L7: {_request_text(flow, request)} does not match {_l7_text(rule) or 'its rules'}"
        )
        distance += 1
    if not misses:
        return None  # it admits the flow
    return RuleMiss(policy, section, index, tuple(misses), distance)


def explain_denial(
    flow: Flow,
    policies: Sequence[PolicyDocument],
    *,
    flows: int = 1,
    ip_names: Mapping[str, Sequence[str]] | None = None,
    options: DecideOptions | None = None,
    max_misses: int = 5,
    proposed: Sequence[PolicyDocument] = (),
    proposed_from: str = "",
    agent: AgentSettings = CILIUM_DEFAULTS,
) -> Why:
    """The answer for one flow against ``policies`` (the ones applied, or proposed). When the
    flow is denied and one of ``proposed`` (cpg's folder ``proposed_from``, with ``policies``
    the ones applied) already admits it, the fix is to apply that policy, not a rule.
    ``agent`` is how the agents are configured (Cilium's defaults unless said)."""
    allow_localhost = agent.allow_localhost
    traced = flow.verdict == int(Verdict.VERDICT_UNKNOWN) and not flow.time
    decision = decide(flow, options or DecideOptions())
    dropped = flow.verdict in (int(Verdict.DROPPED), int(Verdict.AUDIT))
    verdict = "TRACED" if traced else _verdict_name(flow.verdict)
    reason = reason_name(flow.drop_reason) if dropped else ""
    drop_class = _FINDING_KIND.get(decision) or (
        str(classify_reason(flow.drop_reason).value) if dropped else "forwarded"
    )
    if traced:
        drop_class = "traced"
    if flow.direction == Direction.INGRESS:
        direction, subject_ep = "ingress", flow.destination
    elif flow.direction == Direction.EGRESS:
        direction, subject_ep = "egress", flow.source
    else:
        direction, subject_ep = "unknown", flow.destination
    subject = endpoint_name(subject_ep)
    traffic = traffic_line(flow)

    def plain(answer: str, fix: str) -> Why:  # a drop no rule decides: no policy is named
        return Why(
            traffic=traffic,
            flows=flows,
            verdict=verdict,
            drop_reason=reason,
            drop_class=drop_class,
            direction=direction,
            subject=subject,
            answer=answer,
            fix=fix,
        )

    if decision in _UNFIXABLE:
        return plain(
            f"{traffic} was dropped with {reason}: {_UNFIXABLE[decision]}.",
            remediation(flow.drop_reason)
            or "see the drop reason in Cilium's troubleshooting guide",
        )
    if decision in (Decision.AUTH_REQUIRED, Decision.LB_SOURCE_RANGE):
        label, what, fix = advice_for(_FINDING_KIND[decision], traffic)
        return plain(f"{what} ({reason}): a {label} drop, which no allow rule fixes.", fix)
    if direction == "unknown":
        missing = "masked_direction" if looks_masked(flow) else "unknown_direction"
        return plain(
            f"{traffic}: Hubble did not record the traffic direction, so no policy can be named.",
            advice_for(missing, traffic)[2],
        )
    peer = flow_peer(flow, ip_names, agent.default_local_cluster, agent.dual_stack)
    request = flow_request(flow)
    selected = selecting_specs(policies, subject_ep, host_firewall=agent.host_firewall)
    judged = judge_flow(policies, flow, ip_names, agent=agent)
    result, policed = judged.result, list(judged.policed_by)
    if result.tier and result.denied:  # a ClusterNetworkPolicy decided: no Cilium rule can
        return plain(
            f"{traffic}: {result.reason}; the {result.tier} tier decides "
            + ("before" if result.tier == "Admin" else "after")
            + " the namespaced policies.",
            f"change that rule of ClusterNetworkPolicy {result.policy} (or Pass this traffic "
            "to the namespaced policies) if it should pass",
        )
    deny = _deny_read(selected, direction, peer, request)
    # No policy puts the subject into default-deny for this direction: Cilium allows; a deny
    # rule still wins. What admits an allowed flow is said; the rules that do not are noise,
    # and reading them was most of the time of a why over a whole capture.
    allowed = judged.allowed
    misses = [] if allowed else _misses_read(selected, direction, peer, request, flow)
    recorded_deny = decision is Decision.EXPLICIT_DENY
    admit = "" if allowed or deny or recorded_deny else rule_yaml(flow)
    kind = _FINDING_KIND.get(decision)
    fix = ""
    if kind is not None:
        fix = advice_for(kind, traffic, tuple(m.policy for m in deny))[2]
    answer = _answer(
        recorded_deny,
        traffic,
        verdict,
        reason,
        direction,
        subject,
        policed,
        result.allowed,
        result.reason,
        deny,
        misses,
        from_own_node(flow) and allow_localhost,
        judged.default_deny,
        _ignored_host_policies(policies, subject_ep, agent),
    )
    if not fix:
        fix = _plain_fix(bool(deny), allowed, dropped and bool(policed), admit, subject, direction)
    if proposed and not allowed and drop_class in ("policy", "traced", "unknown"):
        ready = match_flow(proposed, flow, ip_names, agent=agent)
        if ready.allowed:  # the fix is a policy cpg already proposed, not a rule
            fix = (
                f"apply {ready.policy} from {proposed_from}: it already admits this flow "
                f"({ready.reason}); no rule to write"
            )
            admit = ""
    return Why(
        traffic=traffic,
        flows=flows,
        verdict=verdict,
        drop_reason=reason,
        drop_class=drop_class,
        direction=direction,
        subject=subject,
        policed_by=tuple(policed),
        allowed=allowed,
        allowed_by=result.reason if result.allowed else ("" if not allowed else "default allow"),
        deny=tuple(deny),
        near_misses=tuple(misses[:max_misses]),
        admit_yaml=admit,
        answer=answer,
        fix=fix,
    )


def _ignored_host_policies(
    policies: Sequence[PolicyDocument], subject: Endpoint, agent: AgentSettings
) -> list[str] | None:
    """For the node judged without the host firewall: the host policies that would select
    it (Cilium ignores them); None for any other subject, or with the host firewall."""
    if agent.host_firewall or not is_host(subject):
        return None
    selected = selecting_specs(policies, subject, host_firewall=True)
    return sorted({policy.display_name for policy, _spec, _ns in selected})


def _plain_fix(
    deny: bool, allowed: bool, policed_drop: bool, admit: str, subject: str, direction: str
) -> str:
    """The fix when no finding gives one: the deny rule, the policies that already admit a
    policed drop, or the rule to add."""
    if deny:
        return "change the deny rule if the traffic should pass: no allow rule overrides it"
    if allowed:
        return "apply these policies: they admit it" if policed_drop else ""
    if admit:
        return f"add the rule below to a policy that selects {subject} for {direction}"
    return ""


def _deny_read(
    selected: Sequence[Selected], direction: str, peer: PeerView, request: Request
) -> list[RuleMiss]:
    """The deny rules of the policies selecting the subject that match the flow."""
    deny: list[RuleMiss] = []
    for policy, spec, namespace in selected:
        for rule in spec.rules(DENY_SECTION[direction]):
            if rule_admits(rule, peer, request, namespace):
                deny.append(RuleMiss(policy.display_name, rule.section, rule.index, (), 0))
    return deny


def _misses_read(
    selected: Sequence[Selected],
    direction: str,
    peer: PeerView,
    request: Request,
    flow: Flow,
) -> list[RuleMiss]:
    """The allow rules of the policies selecting the subject that miss the flow, nearest
    first."""
    misses: list[RuleMiss] = []
    for policy, spec, namespace in selected:
        name = policy.display_name
        for rule in spec.rules(direction):
            miss = _rule_miss(name, direction, rule.index, rule, peer, request, flow, namespace)
            if miss is not None:
                misses.append(miss)
    misses.sort(key=lambda m: (m.distance, m.policy, m.index))
    return misses


def _verdict_name(code: int) -> str:
    try:
        return Verdict(code).name
    except ValueError:
        return f"VERDICT_{code}"


def _answer(
    recorded_deny: bool,
    traffic: str,
    verdict: str,
    reason: str,
    direction: str,
    subject: str,
    policed: Sequence[str],
    allowed: bool,
    allowed_by: str,
    deny: Sequence[RuleMiss],
    misses: Sequence[RuleMiss],
    localhost: bool,
    default_deny: bool = True,
    host_ignored: Sequence[str] | None = None,
) -> str:
    seen = f"{traffic} ({verdict.lower() if verdict == 'TRACED' else verdict}{' ' + reason if reason else ''})"
    if deny:
        first = deny[0]
        return (
            f"{seen}: denied by {first.policy} {first.section}[{first.index}], a deny rule, "
            "which wins over any allow."
        )
    if recorded_deny:
        return (
            f"{seen}: Hubble recorded a deny rule dropping it, and no deny rule of the "
            f"policies judged matches; the deny lives elsewhere (judge the policies applied, from "
            "files or the cluster, to find it). cpg never writes an allow rule for it: it would "
            "not win."
        )
    if host_ignored is not None:
        text = (
            f"{seen}: the node is not policed: without the host firewall "
            "(enable-host-firewall) Cilium ignores host policies, so it allows it"
        )
        if host_ignored:
            text += f"; with it, {', '.join(host_ignored)} would police the node for {direction}"
        return text + "."
    if localhost and allowed:
        return f"{seen}: admitted by Cilium's allow-localhost: the node reaches its own pods."
    if allowed and policed:
        return f"{seen}: the policies judged admit it ({allowed_by})."
    if policed and not default_deny:
        return (
            f"{seen}: {subject} is policed for {direction} by {', '.join(policed)} with "
            "enableDefaultDeny off, so what no rule denies is allowed."
        )
    if not policed:
        text = (
            f"{seen}: no policy selects {subject} for {direction} in the policies judged, so "
            "they allow it"
        )
        if verdict in ("DROPPED", "AUDIT"):
            text += (
                "; the drop came from policies not given here (judge the ones applied to see them)"
            )
        return text + "."
    nearest = (
        f" The nearest: {misses[0].policy} {misses[0].section}[{misses[0].index}] "
        f"({'; '.join(misses[0].misses)})."
        if misses
        else f" No {direction} rule of them selects this peer."
    )
    return (
        f"{seen}: {subject} is policed for {direction} by {', '.join(policed)} and no rule "
        f"admits it.{nearest}"
    )


def merged_answers(answered: Sequence[tuple[Flow, Why]]) -> tuple[Why, ...]:
    """One answer per kind of flow as people read it: answers that say the same thing (flows
    of different pods of one workload, say) are one, their flows added up; answers that
    differ under the same traffic line name what differs (the labels, else the pods)."""
    merged: dict[Why, list[Any]] = {}
    for flow, why in answered:
        key = attrs.evolve(why, flows=0)
        entry = merged.get(key)
        if entry is None:
            merged[key] = [why, flow]
        else:
            entry[0] = attrs.evolve(entry[0], flows=entry[0].flows + why.flows)
    by_line: dict[str, list[list[Any]]] = {}
    for entry in merged.values():
        by_line.setdefault(entry[0].traffic, []).append(entry)
    out = []
    for entry in merged.values():
        why, flow = entry
        same = by_line[why.traffic]
        if len(same) > 1:
            note = _what_differs(flow, [other[1] for other in same])
            if not note:
                reasons = {other[0].drop_reason for other in same}
                if len(reasons) > 1:
                    note = f"dropped with {why.drop_reason or 'no reason'}"
                elif entry is not same[0]:
                    note = "another recording of the same traffic"
            if note:
                why = attrs.evolve(why, traffic=f"{why.traffic} [{note}]")
        out.append(why)
    return tuple(out)


def _what_differs(flow: Flow, flows: Sequence[Flow]) -> str:
    """What sets ``flow`` apart from the other ``flows`` of its traffic line."""
    parts = []
    for side in ("source", "destination"):
        mine = stable_labels(getattr(flow, side).labels)
        theirs = [stable_labels(getattr(other, side).labels) for other in flows]
        keys = sorted({k for labels in theirs for k in labels if labels.get(k) != mine.get(k)})
        shown = [f"{k}={mine[k]}" if k in mine else f"no {k}" for k in keys]
        if shown:
            parts.append(f"{side} {', '.join(shown)}")
    if not parts:
        for side in ("source", "destination"):
            pod = getattr(flow, side).pod_name
            if pod and any(getattr(other, side).pod_name != pod for other in flows):
                parts.append(f"{side} pod {pod}")
    if not parts and flow.verdict != flows[0].verdict:
        parts.append(f"verdict {_verdict_name(flow.verdict)}")
    return "; ".join(parts)


def why_names(flows: Iterable[Flow]) -> dict[str, list[str]]:
    """IP -> DNS names from a capture's DNS records, for toFQDNs rules."""
    return dns_names(flows)


_ENTITIES = {
    "world": (2, "reserved:world"),
    "world-ipv4": (9, "reserved:world-ipv4"),
    "world-ipv6": (10, "reserved:world-ipv6"),
    "host": (1, "reserved:host"),
    "remote-node": (6, "reserved:remote-node"),
    "kube-apiserver": (7, "reserved:kube-apiserver"),
    "health": (4, "reserved:health"),
    "ingress": (8, "reserved:ingress"),
    "init": (5, "reserved:init"),
    "unmanaged": (3, "reserved:unmanaged"),
}
"""Cilium's reserved identities ``trace`` spells by name (their numbers and labels)."""


def traced_endpoint(text: str, field: str) -> tuple[Endpoint, str]:
    """An endpoint described by hand, and its IP: ``NS/WORKLOAD`` (app=WORKLOAD in NS),
    ``NS:key=value,key=value`` (those labels in NS), either with ``@CLUSTER``, an entity
    (``world``, ``host``, ``remote-node``, ``kube-apiserver``…), or an IP (the world)."""
    spec = text.strip()
    cluster = ""
    if "@" in spec:
        spec, _, cluster = spec.rpartition("@")
    if spec in _ENTITIES:
        identity, label = _ENTITIES[spec]
        return Endpoint(labels=(label,), identity=identity), ""
    try:
        address = ipaddress.ip_address(spec)
    except ValueError:
        address = None
    if address is not None:
        return Endpoint(labels=("reserved:world",), identity=2), str(address)
    namespace, colon, rest = spec.partition(":")
    if colon and "=" in rest:
        pairs = [p.strip() for p in rest.split(",") if p.strip()]
        if not namespace or not all("=" in p and p.split("=", 1)[0] for p in pairs):
            raise RequestError(field, f"{shown(text)}: give NS:key=value[,key=value]")
        labels = tuple(f"k8s:{p}" for p in pairs)
    else:
        namespace, slash, workload = spec.partition("/")
        if not slash or not namespace or not workload:
            raise RequestError(
                field,
                f"{shown(text)} is not NS/WORKLOAD, NS:key=value, an entity ("
                f"{', '.join(_ENTITIES)}) or an IP",
            )
        labels = (f"k8s:app={workload}",)
    labels = (*labels, f"k8s:io.kubernetes.pod.namespace={namespace}")
    if cluster:
        labels = (*labels, f"k8s:{CLUSTER_LABEL}={cluster}")
    return Endpoint(namespace=namespace, labels=labels, cluster_name=cluster), ""


def traced_flows(
    source: str,
    destination: str,
    port: str,
    *,
    method: str = "",
    path: str = "",
    dns: str = "",
    node_labels: Sequence[str] = (),
) -> list[Flow]:
    """The flow described by hand, once per side that policy can police: egress at a
    source pod or node, ingress at a destination pod or node (a node is policed by host
    policies, with the host firewall). ``port`` is ``8080/TCP`` (TCP when left out),
    ``8/ICMP`` (ICMP is IPv4, as policies spell it) or ``icmp/8``. ``node_labels``
    (``KEY=VALUE``) are the node's labels, which a host policy's nodeSelector reads."""
    src, src_ip = _with_node_labels(traced_endpoint(source, "from"), node_labels)
    dst, dst_ip = _with_node_labels(traced_endpoint(destination, "to"), node_labels)
    protocol, value = _traced_port(port)
    l7 = None
    if method or path:
        l7 = L7Info(
            type="REQUEST", http=HTTPInfo(method=(method or "GET").upper(), url=path or "/")
        )
    elif dns:
        l7 = L7Info(type="REQUEST", dns=DNSInfo(query=dns))
    flows = []
    for direction, policed in ((Direction.EGRESS, src), (Direction.INGRESS, dst)):
        if not policed.namespace and not is_host(policed):
            continue  # an entity or the world: no policy polices it
        flows.append(
            Flow(
                direction=int(direction),
                source=src,
                destination=dst,
                source_ip=src_ip,
                destination_ip=dst_ip,
                protocol=protocol,
                port=value,
                l7=l7,
            )
        )
    if not flows:
        raise RequestError(
            "from",
            "neither end is a pod or the node: policies police pods, and host policies the "
            "node (host)",
        )
    return flows


def _traced_port(port: str) -> tuple[str, int]:
    """The protocol and port (or ICMP type) of ``8080/TCP``, ``53/UDP``, ``8/ICMP``,
    ``128/ICMPv6`` or ``icmp/8``."""
    number, _, proto = port.strip().partition("/")
    protocol = (proto or "TCP").upper().replace("ICMPV", "ICMPv")
    if protocol == "ICMP":
        protocol = "ICMPv4"  # how a policy's toPorts and icmps spell IPv4's ICMP
    if number.lower().startswith("icmp"):
        protocol, number = ("ICMPv6" if number.lower() == "icmpv6" else "ICMPv4", proto or "8")
    if protocol not in ("TCP", "UDP", "SCTP", "ICMPv4", "ICMPv6"):
        raise RequestError(
            "port", f"{shown(port)}: the protocol is TCP, UDP, SCTP, ICMP (IPv4) or ICMPv6"
        )
    try:
        value = int(number)
    except ValueError:
        value = -1
    if protocol in ("ICMPv4", "ICMPv6"):
        if not 0 <= value <= 255:
            raise RequestError("port", f"{shown(port)}: an ICMP type is 0 to 255 (8/ICMP)")
    elif not 0 < value <= 65535:
        raise RequestError("port", f"{shown(port)} is not PORT/PROTOCOL (e.g. 8080/TCP)")
    return protocol, value


def _with_node_labels(
    traced: tuple[Endpoint, str], node_labels: Sequence[str]
) -> tuple[Endpoint, str]:
    """The node given its labels (``KEY=VALUE``, a host policy's nodeSelector reads them);
    any other end as it is."""
    endpoint, ip = traced
    if not node_labels or not is_host(endpoint):
        return traced
    labels = list(endpoint.labels)
    for given in node_labels:
        key, equals, value = given.partition("=")
        problem = label_problem(key.strip(), value.strip()) if equals else "give KEY=VALUE"
        if problem:
            raise RequestError("node_label", f"{shown(given)}: {problem}")
        labels.append(f"k8s:{key.strip()}={value.strip()}")
    return attrs.evolve(endpoint, labels=tuple(labels)), ip


__all__ = [
    "RuleMiss",
    "Why",
    "explain_denial",
    "merged_answers",
    "traced_endpoint",
    "traced_flows",
    "why_names",
]
