"""Verify: do these policies admit every denied flow cpg can express, and no flow an explicit
deny rule dropped? Pure: flows and policy documents in, a :class:`VerifyReport` out."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import attrs

from cpg_core._base.documents import PolicyDocument, VerifyCheck, VerifyReport
from cpg_core._base.flow import Direction, Endpoint, Flow
from cpg_core._base.labels import stable_labels
from cpg_core._base.rules import CidrPeer
from cpg_core._flows.decide import DecideOptions, Decision, decide
from cpg_core._flows.synthesis import (
    PolicyTarget,
    Resolved,
    Resolver,
    note_pod,
    with_known_pod,
)
from cpg_core._policy.agent import CILIUM_DEFAULTS, AgentSettings
from cpg_core._policy.matcher import dns_names, from_own_node, match_flow
from cpg_core._policy.policy_set import PolicySet
from cpg_core._review.behind import EvidenceReader, evidence_behind
from cpg_core._review.traffic import traffic_line
from cpg_core._synthesis.catalogue import BUILTIN, Catalogue
from cpg_core._synthesis.scope import SYSTEM_NAMESPACES


def check_key(flow: Flow) -> tuple[object, ...]:
    """Flows that the matcher cannot tell apart share one check."""
    l7 = flow.l7
    return (
        flow.direction,
        flow.source,
        flow.destination,
        flow.protocol,
        flow.port,
        flow.source_ip if flow.direction == Direction.INGRESS else flow.destination_ip,
        flow.source_names,
        flow.destination_names,
        (l7.http.method, l7.http.url) if l7 is not None and l7.http is not None else None,
        l7.dns.query if l7 is not None and l7.dns is not None else None,
    )


def _pod_as_world(resolved: object, pod_ips: set[str]) -> bool:
    if not isinstance(resolved, Resolved) or not isinstance(resolved.atom.peer, CidrPeer):
        return False
    return resolved.atom.peer.cidr.split("/", 1)[0] in pod_ips


def _behind(evidence: EvidenceReader | None, flow: Flow, resolver: Resolver, admitted: bool) -> str:
    """What the evidence holds for the rule that admits a candidate ("" for the others)."""
    return evidence_behind(flow, evidence, resolver) if evidence is not None and admitted else ""


def _platform(catalogue: Catalogue, target: PolicyTarget, flow: Flow) -> bool:
    """Whether the catalogue leaves ``target`` alone (its rules were not written)."""
    if not catalogue.entries:
        return False
    subject = flow.destination if flow.direction == int(Direction.INGRESS) else flow.source
    seen = [dict(target.selector), stable_labels(subject.labels)]
    entry = catalogue.recognise(target.namespace, seen)
    return entry is not None and entry.treatment == "system"


def _note_pods(flow: Flow, pod_ips: set[str], pods: dict[str, Endpoint]) -> None:
    """The pods a flow names, by IP (a world peer with a pod's IP is judged as the pod)."""
    for endpoint, ip in ((flow.source, flow.source_ip), (flow.destination, flow.destination_ip)):
        if endpoint.pod_name and ip:
            pod_ips.add(ip)
            note_pod(pods, endpoint, ip)


def _kind(decision: Decision) -> Literal["candidate", "explicit_deny"] | None:
    """What verify checks of a flow: a candidate, an explicit deny, or nothing."""
    if decision is Decision.CANDIDATE:
        return "candidate"
    return "explicit_deny" if decision is Decision.EXPLICIT_DENY else None


def verify_flows(
    flows: Iterable[Flow],
    policies: Sequence[PolicyDocument],
    options: DecideOptions | None = None,
    *,
    include_system: bool = False,
    evidence: EvidenceReader | None = None,
    catalogue: Catalogue | None = None,
    agent: AgentSettings = CILIUM_DEFAULTS,
) -> VerifyReport:
    """A check for every distinct candidate that cpg can express and every explicit-deny flow.
    A denied flow from a pod's own node shows the agents police it (allow-localhost: policy),
    so such a capture is checked that way whatever ``agent`` says. A candidate of a
    system-namespace workload the policies do not admit is counted apart, not as a miss,
    unless ``include_system`` (replay leaves those rules to the user by default, §D47).
    The same holds for a platform workload the ``catalogue`` recognises (the built-in one
    when None), as replay leaves its per-peer rules out (§D58).
    With ``evidence``, an admitted candidate says what the evidence holds for its rule."""
    options = options or DecideOptions()
    allow_localhost = agent.allow_localhost
    catalogue = BUILTIN if catalogue is None else catalogue
    policies = PolicySet.of(policies)
    resolver = Resolver()
    seen: dict[tuple[object, ...], tuple[Literal["candidate", "explicit_deny"], Flow, list[int]]]
    seen = {}
    kept: list[Flow] = []
    unexpressible = 0
    system = 0
    left: set[tuple[object, ...]] = set()
    """Checks of system-namespace workloads: not admitted is theirs to decide, not a miss."""
    pod_ips: set[str] = set()
    pods: dict[str, Endpoint] = {}
    for flow in flows:
        _note_pods(flow, pod_ips, pods)
        if flow.l7 is not None and flow.l7.dns is not None:
            kept.append(flow)  # for IP -> name, whatever its verdict
        decision = decide(flow, options)
        kind = _kind(decision)
        if kind is None:
            continue
        if kind == "candidate":
            resolved = resolver.resolve(flow)
            if not isinstance(resolved, Resolved):
                unexpressible += 1
                continue
            if (not include_system and resolved.target.namespace in SYSTEM_NAMESPACES) or _platform(
                catalogue, resolved.target, flow
            ):
                left.add((kind, *check_key(flow)))
        elif flow.direction not in (Direction.INGRESS, Direction.EGRESS):
            unexpressible += 1  # which end denied it is unknown: nothing to check
            continue
        entry = seen.setdefault((kind, *check_key(flow)), (kind, flow, [0]))
        entry[2][0] += 1
    for key, (kind, flow, counter) in list(seen.items()):
        named = with_known_pod(flow, pods)
        if named is not flow:
            seen[key] = (kind, named, counter)  # judged as the pod the capture shows
        elif kind == "candidate" and _pod_as_world(resolver.resolve(flow), pod_ips):
            unexpressible += counter[0]  # a finding of the replay (world_is_pod), no rule
            del seen[key]
    names = dns_names(kept)
    if any(kind == "candidate" and from_own_node(flow) for kind, flow, _ in seen.values()):
        allow_localhost = False
    checks = []
    for key, (kind, flow, counter) in seen.items():
        result = match_flow(
            policies,
            flow,
            names,
            # an explicit deny asks whether the rules allow it: the node's pass is no rule
            agent=attrs.evolve(agent, allow_localhost=allow_localhost and kind == "candidate"),
        )
        if not result.allowed and key in left:
            system += counter[0]
            continue
        behind = _behind(evidence, flow, resolver, result.allowed and kind == "candidate")
        checks.append(
            VerifyCheck(kind, traffic_line(flow), counter[0], result.allowed, result.reason, behind)
        )
    checks.sort(key=lambda c: (c.kind, c.allowed, c.traffic))
    return VerifyReport(checks=tuple(checks), unexpressible=unexpressible, system=system)
