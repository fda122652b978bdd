"""What applying proposed policies would change, before anyone applies them.

Cilium enforces per endpoint and per direction: an endpoint no policy selects allows
everything; once a policy with rules for a direction selects it, that direction is
default-deny. A proposal whose selector reaches pods that were never policed puts them into
default-deny, and their traffic that works today stops unless a rule admits it. The plan
replays a capture with every verdict against the current and the proposed policies, with the
one matcher ``cpg verify`` uses, and lists what would be fixed, what would break, which
endpoints would be policed for the first time, and how each policy changes.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence, Set as AbstractSet
from typing import Any, Literal

import attrs

from cpg_core._base.documents import DeclaredBy, PolicyDocument, PolicyEvidence
from cpg_core._base.flow import Direction, Endpoint, Flow, Verdict
from cpg_core._base.labels import NAMESPACE_LABEL, select_labels, stable_labels
from cpg_core._base.names import policy_name as name_for
from cpg_core._flows.decide import DecideOptions, Decision, decide, looks_like_reply
from cpg_core._flows.synthesis import (
    endpoint_name,
    endpoint_order,
    is_pod_endpoint,
    with_known_pod,
)
from cpg_core._policy.agent import CILIUM_DEFAULTS, AgentSettings
from cpg_core._policy.matcher import (
    from_own_node,
    judge_flow,
    match_flow,
    policy_name,
)
from cpg_core._policy.model import NAMESPACED_KIND, SECTIONS, Rule, Selector, policy_model
from cpg_core._policy.tiers import is_cluster_network_policy, tier_policy
from cpg_core._policy.write import excluding
from cpg_core._review.availability import (
    BASELINE_GAPS,
    BASELINE_NOTE,
    Availability,
    Policies,
    availability,
    dependency_ends,
    has_baseline,
    new_workload_losses,
)
from cpg_core._review.owners import also_selected, is_cpgs
from cpg_core._review.plan_documents import (
    BLIND_SPOTS,
    CurrentSource,
    NewlyEnforced,
    Plan,
    PolicyDiff,
    PolicyPlanSummary,
    RuleConfidence,
    Traffic,
    WouldBreak,
)
from cpg_core._review.pressure import EndpointPressure, policy_map_pressure
from cpg_core._review.readiness import (
    ReadinessRules,
    WorkloadProfile,
    not_ready_first,
    workload_profile,
)
from cpg_core._review.traffic import (
    WAYS,
    WORKS,
    FlowGroup,
    Kept,
    PolicyIndex,
    Worlds,
    group_key,
    traffic_line,
    traffic_of,
    who,
)
from cpg_core._synthesis.declarations import Declarations
from cpg_core._synthesis.fixes import (
    discriminator,
    exclusion,
    narrowed_yaml,
    narrowing_yaml,
    rule_yaml,
    unknown_pod_peer,
)
from cpg_core._synthesis.profile import CaptureProfile, at_second, seconds_of
from cpg_core._synthesis.render import is_shared
from cpg_core._synthesis.scope import DEFAULT_SERVICE_NAMESPACES


def _key(policy: PolicyDocument) -> tuple[str, str, str]:
    meta = policy.get("metadata") or {}
    return (str(policy.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name", "")))


def plan(
    flows: Iterable[Flow],
    proposal: Sequence[PolicyDocument],
    current: Sequence[PolicyDocument] | None,
    *,
    current_source: CurrentSource = "current",
    options: DecideOptions | None = None,
    evidence: Mapping[str, PolicyEvidence] | None = None,
    declarations: Declarations | None = None,
    readiness: ReadinessRules | None = None,
    agent: AgentSettings = CILIUM_DEFAULTS,
) -> Plan:
    """The plan of applying ``proposal`` on top of ``current`` (None: infer what is policed
    from the flows), judged on ``flows`` (a capture with every verdict), and on what the
    cluster's objects declare it depends on (``declarations``). ``evidence`` maps
    ``namespace/name`` of a proposed policy to its evidence, for the confidence of its rules.
    ``agent`` is how the agents are configured (§D23, §D61; Cilium's defaults unless said):
    a capture where the node's own traffic to a pod was denied by policy shows the agents
    run ``allow-localhost: policy``, and the plan judges so."""
    judge = PlanJudge(
        proposal,
        current,
        current_source=current_source,
        options=options,
        evidence=evidence,
        declarations=declarations,
        readiness=readiness,
        agent=agent,
    )
    for flow in flows:
        judge.add(flow)
    return judge.plan()


@attrs.define(slots=True)
class _Stream:
    """What :meth:`PlanJudge.add` changes as flows arrive, and nothing else does: the one
    value :meth:`PlanJudge.snapshot` copies."""

    kept: Kept
    """The cap on what is kept (0: none), and the flows past it."""
    flows: int = 0
    first: str = ""
    last: str = ""
    protocols: Counter[str] = attrs.Factory(Counter)
    pods: dict[str, Endpoint] = attrs.Factory(dict)
    names: dict[str, list[str]] = attrs.Factory(dict)
    policed: set[tuple[Endpoint, str]] = attrs.Factory(set)
    groups: dict[tuple[Any, ...], FlowGroup] = attrs.Factory(dict)
    mirrored: dict[tuple[Any, ...], FlowGroup] = attrs.Factory(dict)
    """Traffic judged at its other end too (see :func:`_other_end`)."""
    undirected: dict[str, FlowGroup] = attrs.Factory(dict)
    """Candidates Hubble gave no direction: counted with the others (replay and verify
    count them), and never fixed (no rule is written for them)."""

    def copy(self) -> _Stream:
        """A copy :meth:`PlanJudge.add` can go on without (a few ms for tens of thousands of
        kinds of traffic): the flows it keeps are shared, never changed."""
        kept = Kept(self.kept.cap)
        kept.unjudged = self.kept.unjudged
        return _Stream(
            kept=kept,
            flows=self.flows,
            first=self.first,
            last=self.last,
            protocols=Counter(self.protocols),
            pods=dict(self.pods),
            names={ip: list(names) for ip, names in self.names.items()},
            policed=set(self.policed),
            groups={k: FlowGroup(g.first, g.flows) for k, g in self.groups.items()},
            mirrored={k: FlowGroup(g.first, g.flows) for k, g in self.mirrored.items()},
            undirected={k: FlowGroup(g.first, g.flows) for k, g in self.undirected.items()},
        )


@attrs.define(slots=True)
class _Memos:
    """What planning works out once and keeps from one plan to the next (only planning
    changes it; :meth:`PlanJudge.keep_memos` takes back what planning a snapshot learned)."""

    pressure_memo: tuple[tuple[int, int, int], dict[object, int]] = ((-1, -1, -1), {})
    pressure_found: tuple[tuple[int, ...], tuple[EndpointPressure, ...]] = ((), ())
    """The last answer, and what it was computed over (sizes: the sets only grow)."""
    diffs_found: list[PolicyDiff] | None = None
    """The proposal against the current policies: both fixed for the judge's life."""
    verdicts: dict[tuple[int, int, bool], tuple[Flow, tuple[bool, str]]] = attrs.Factory(dict)
    verdicts_context: tuple[int, bool] = (-1, False)
    """Each rule's identity count, kept while the identities seen do not change."""
    availability_found: list[Availability] | None = None


class PlanJudge:
    """A plan judged as flows arrive (``cpg shadow``): :meth:`add` each flow, ask :meth:`plan`
    at any moment. The answer is exactly :func:`plan` over the flows added so far, and what
    is kept grows with the kinds of traffic, not with the flows (ARCHITECTURE §D28)."""

    def __init__(
        self,
        proposal: Sequence[PolicyDocument],
        current: Sequence[PolicyDocument] | None,
        *,
        current_source: CurrentSource = "current",
        options: DecideOptions | None = None,
        evidence: Mapping[str, PolicyEvidence] | None = None,
        max_kinds: int = 0,
        declarations: Declarations | None = None,
        readiness: ReadinessRules | None = None,
        agent: AgentSettings = CILIUM_DEFAULTS,
    ) -> None:
        self.agent = agent
        """The agents' settings every verdict is judged with (§D61)."""
        default_local_cluster = self.agent.default_local_cluster
        allow_localhost = self.agent.allow_localhost
        self.readiness_rules = readiness or ReadinessRules()
        self.declarations = declarations
        """What the cluster's objects declare it depends on: each dependency the policies
        after the proposal deny would break (§D58)."""
        self.proposal = list(proposal)
        self.current = None if current is None else list(current)
        self.current_source: CurrentSource = current_source
        self.options = options or DecideOptions()
        self.evidence = evidence or {}
        self.default_local_cluster = default_local_cluster
        self.allow_localhost = allow_localhost
        self.stream = _Stream(Kept(max_kinds))
        """What the flows added so far left (only :meth:`add` changes it)."""
        self.memos = _Memos()
        """What planning worked out once (only planning changes it)."""
        self._world = Worlds()
        firewall = self.agent.host_firewall
        self._proposed = PolicyIndex(self.proposal, firewall)
        self._shared_names = frozenset(policy_name(p) for p in self.proposal if is_shared(p))
        self._also_selected = also_selected(self.proposal, self.current or [])
        self._replaced = {_key(p) for p in self.proposal}
        self._today = PolicyIndex(self.current or [], firewall)
        self._after = PolicyIndex(
            [p for p in (self.current or []) if _key(p) not in self._replaced] + self.proposal,
            firewall,
        )
        self._after_set = Policies(self._after.all)
        self._today_set = Policies(self.current or [])

    def add(self, flow: Flow) -> None:
        self.stream.flows += 1
        self._measure(flow)
        kept = self.stream.kept
        kept.note_pod(self.stream.pods, flow.source, flow.source_ip)
        kept.note_pod(self.stream.pods, flow.destination, flow.destination_ip)
        way = WAYS.get(flow.direction)
        if way is None:
            if decide(flow, self.options) is Decision.CANDIDATE:
                line = traffic_line(flow)
                group = self.stream.undirected.get(line)
                if group is None:
                    if not kept.room(self.stream.undirected):
                        return
                    group = self.stream.undirected[line] = FlowGroup(flow)
                group.flows += 1
            return
        target = flow.destination if way == "ingress" else flow.source
        allowed_by = flow.ingress_allowed_by if way == "ingress" else flow.egress_allowed_by
        decision = decide(flow, self.options)
        policed = allowed_by or decision in (Decision.CANDIDATE, Decision.EXPLICIT_DENY)
        if policed and kept.room(self.stream.policed):
            self.stream.policed.add((target, way))
        if flow.l7 is not None and flow.l7.dns is not None:
            kept.note_names(self.stream.names, flow)  # names for toFQDNs
        works = flow.verdict in WORKS and flow.is_reply is not True
        if works and flow.is_reply is None and looks_like_reply(flow):
            works = False  # a reply conntrack lets through: it needs no rule (§D27)
        if decision is Decision.CANDIDATE or works:
            key = (decision is Decision.CANDIDATE, *group_key(flow, self._world))
            group = self.stream.groups.get(key)
            if group is None:
                if not kept.room(self.stream.groups):
                    kept.unjudged += 1
                    return
                group = self.stream.groups[key] = FlowGroup(flow)
            group.flows += 1
            mirror = _other_end(flow, way, works, self._world) if works else None
            if mirror is not None:
                key = (False, *group_key(mirror, self._world))
                group = self.stream.mirrored.get(key)
                if group is None:
                    if not kept.room(self.stream.mirrored):
                        return  # this end was judged; the other end's kinds are full
                    group = self.stream.mirrored[key] = FlowGroup(mirror)
                group.flows += 1

    def _measure(self, flow: Flow) -> None:
        """The capture's span and protocols (how long and how wide it is: §D59)."""
        when = flow.time
        if when:
            if not self.stream.first or when < self.stream.first:
                self.stream.first = when
            if when > self.stream.last:
                self.stream.last = when
        protocol = flow.protocol
        self.stream.protocols["ICMP" if protocol.startswith("ICMP") else protocol] += 1

    def snapshot(self) -> PlanJudge:
        """A copy of what the flows added so far left, to plan from while :meth:`add` goes
        on (a stream need not wait for a plan): the stream is copied; the policies, their
        indexes and the caches are shared. :meth:`keep_memos` takes back what planning the
        copy learned."""
        copied = copy.copy(self)
        copied.stream = self.stream.copy()
        copied.memos = attrs.evolve(self.memos)
        return copied

    def keep_memos(self, planned: PlanJudge) -> None:
        """Keep what planning ``planned`` (a :meth:`snapshot`) worked out once for all."""
        self.memos = planned.memos

    @property
    def kept(self) -> Kept:
        """The cap on what is kept (0: none), and the flows past it."""
        return self.stream.kept

    @property
    def flows(self) -> int:
        """Flows added so far."""
        return self.stream.flows

    def plan(self) -> Plan:
        """The plan of every flow added so far."""
        notes: list[str] = []
        allow_localhost = self.allow_localhost
        if allow_localhost and any(
            key[0] and from_own_node(g.first) for key, g in self.stream.groups.items()
        ):
            allow_localhost = False
            notes.append(
                "the capture shows the node's own traffic to a pod denied by policy, so the "
                "agents run allow-localhost: policy; judged that way"
            )
        ask = _Questions(self, allow_localhost)
        tally = _Tally()
        observed = {key[1:] for key in self.stream.groups}
        judged = list(self.stream.groups.items())
        judged += [(k, g) for k, g in self.stream.mirrored.items() if k[1:] not in observed]
        for group in self.stream.undirected.values():
            tally.candidates += group.flows
            tally.not_fixed.append(traffic_of(group.first, group.flows))
        for (is_candidate, *_), group in judged:
            # a pod Hubble called world: judged as the pod
            flow = with_known_pod(group.first, self.stream.pods)
            if is_candidate:
                self._judge_drop(ask, tally, flow, group.flows)
            else:
                mirrored = group.first.verdict == _MIRRORED
                self._judge_working(ask, tally, flow, group.flows, mirrored)
        if self.declarations is not None:
            self._judge_declared(ask, tally)
        tier_names = {policy_name(p) for p in self._proposed.tiered}
        breaks = [
            item if item.policy in tier_names else self._with_fix(item, flow, tally)
            for item, (flow, _) in zip(tally.breaks, tally.break_flows, strict=True)
        ]
        ordered = sorted(
            zip(breaks, tally.break_flows, strict=True),
            key=lambda pair: (-pair[0].traffic.flows, pair[0].traffic.sample),
        )
        if self.memos.diffs_found is None:
            self.memos.diffs_found = _diffs(self.proposal, self.current or [])
        diffs = self.memos.diffs_found
        newly_enforced = _newly_enforced(tally.newly)
        touched = {d.policy for d in diffs if d.status != "unchanged"}
        if self.kept.unjudged:
            notes.append(
                f"{self.kept.unjudged} flows of kinds of traffic first seen once this session "
                f"kept {self.kept.cap} kinds were not judged: whether they keep working is "
                "unknown"
            )
        return Plan(
            current_source=self.current_source,
            blind_spots=BLIND_SPOTS[self.current_source],
            candidates=tally.candidates,
            fixed=tally.fixed,
            not_fixed=tuple(sorted(tally.not_fixed, key=lambda t: (-t.flows, t.sample))),
            would_break=tuple(item for item, _ in ordered),
            newly_enforced=newly_enforced,
            diffs=tuple(diffs),
            confidence=tuple(_confidence(self.evidence, touched)),
            policies=_summaries(self.proposal, tally.fixes_by_policy, breaks, newly_enforced),
            forwarded_flows=tally.forwarded,
            fixes=tuple(flow for _, flow in ordered),
            node_flows=tally.node_flows,
            notes=tuple(notes)
            + _semantics(tally.node_flows, self.default_local_cluster)
            + ((BASELINE_NOTE, BASELINE_GAPS) if has_baseline(self.proposal) else ()),
            policy_map=self._pressure(),
            policy_map_max=self.agent.policy_map_max,
            also_selected=self._also_selected,
            availability=self._availability(),
            unjudged_flows=self.kept.unjudged,
            capture=self._capture(),
            readiness=self._readiness(),
        )

    def _capture(self) -> CaptureProfile:
        """How long and how wide the capture judged is: its span, flows and protocols."""
        start, end = seconds_of(self.stream.first), seconds_of(self.stream.last)
        return CaptureProfile(
            first=at_second(self.stream.first),
            last=at_second(self.stream.last),
            span_seconds=round(end - start, 3) if start is not None and end is not None else 0.0,
            flows=self.flows,
            protocols=dict(sorted((p, n) for p, n in self.stream.protocols.items() if p)),
        )

    def _readiness(self) -> tuple[WorkloadProfile, ...]:
        """The proposed policies' workloads as their evidence shows them."""
        found = []
        for name in sorted({policy_name(p) for p in self.proposal} - self._shared_names):
            doc = self.evidence.get(name)
            if doc is None:
                continue
            found.append(
                workload_profile(
                    doc.policy.namespace, doc.policy.workload, doc.rules, self.readiness_rules
                )
            )
        return tuple(not_ready_first(found))

    def _availability(self) -> tuple[Availability, ...]:
        """The availability findings the proposal brings: those of the proposed policies
        judged with everything after it, and what a new workload in a new namespace would
        lose under it (and not today) of what the capture shows many namespaces use."""
        if self.memos.availability_found is None:
            names = {policy_name(p) for p in self.proposal}
            self.memos.availability_found = availability(
                self._after_set, only=names, baseline=False
            )
        services, clients = self._used_by_many()
        lost = new_workload_losses(self._after_set, services, clients)
        today = {
            (a.code, a.message) for a in new_workload_losses(self._today_set, services, clients)
        }
        named = {(a.code, a.policy) for a in self.memos.availability_found if a.policy}
        return tuple(self.memos.availability_found) + tuple(
            a for a in lost if (a.code, a.message) not in today and (a.code, a.policy) not in named
        )

    def _used_by_many(
        self,
    ) -> tuple[list[tuple[Endpoint, str, int, int]], list[tuple[Endpoint, str, int, int]]]:
        """The servers pods of many namespaces reach, and the clients that reach pods of
        many namespaces, on one port each, in the traffic added so far."""
        callers: dict[tuple[Any, ...], tuple[Endpoint, set[str]]] = {}
        reached: dict[tuple[Any, ...], tuple[Endpoint, set[str]]] = {}
        for group in self.stream.groups.values():
            flow = group.first
            src, dst = flow.source, flow.destination
            if flow.protocol not in ("TCP", "UDP", "SCTP"):
                continue
            if not (is_pod_endpoint(src) and is_pod_endpoint(dst)):
                continue
            for held, me, other in ((callers, dst, src), (reached, src, dst)):
                key = (
                    me.namespace,
                    tuple(sorted(stable_labels(me.labels).items())),
                    flow.protocol,
                    flow.port,
                )
                entry = held.setdefault(key, (me, set()))
                entry[1].add(other.namespace)
        threshold = DEFAULT_SERVICE_NAMESPACES

        def wide(
            held: dict[tuple[Any, ...], tuple[Endpoint, set[str]]],
        ) -> list[tuple[Endpoint, str, int, int]]:
            return [
                (pod, key[2], key[3], len(spaces))
                for key, (pod, spaces) in sorted(held.items(), key=lambda kv: kv[0])
                if len(spaces) >= threshold
            ]

        return wide(callers), wide(reached)

    def _judge_declared(self, ask: _Questions, tally: _Tally) -> None:
        """Each declared dependency, at each end a policy after the proposal polices: a
        rule there must admit it, or it would break (§D58)."""
        assert self.declarations is not None
        for dependency in self.declarations.dependencies:
            by = dependency.declared_by
            for source in dependency_ends(dependency.source):
                for destination in dependency_ends(dependency.destination):
                    for direction in (Direction.INGRESS, Direction.EGRESS):
                        flow = Flow(
                            direction=int(direction),
                            source=source,
                            destination=destination,
                            protocol=dependency.protocol,
                            port=dependency.port,
                            verdict=int(Verdict.FORWARDED),
                        )
                        self._declared_at(ask, tally, flow, by)

    def _declared_at(self, ask: _Questions, tally: _Tally, flow: Flow, by: DeclaredBy) -> None:
        way = WAYS[flow.direction]
        target = flow.destination if way == "ingress" else flow.source
        if not is_pod_endpoint(target):
            return
        enforcing = self._after.enforcing(target, way)
        if not enforcing or ask.admitted(self._after, flow, target)[0]:
            return
        own = _own_policy(self._shared_names, enforcing)
        today = ""
        if self.current is not None and not ask.admitted(self._today, flow, target)[0]:
            today = " (the current policies deny it too)"
        tally.broken(
            flow,
            0,
            attrs.evolve(
                _would_break(
                    flow,
                    target,
                    policy=own,
                    selector=_selector(self._after, own, target) if own else {},
                    why=f"declared by {by.text()}, not seen in the capture; "
                    f"{', '.join(enforcing)} {'polices' if len(enforcing) == 1 else 'police'} "
                    f"{who(target)} for {way} and no rule admits it{today}",
                ),
                declared_by=(by,),
            ),
        )

    def _with_fix(self, item: WouldBreak, flow: Flow, tally: _Tally) -> WouldBreak:
        """The fixes of traffic that would break: first the narrower selectors of the
        proposed policies that would newly select the endpoint, when a label tells it from
        the pods they were made for; else, or as the alternative, the rule to add, in a
        policy that selects no pod beyond the endpoint's workload (a new one of its own when
        the policy that holds its traffic is a person's, a shared one, or wider)."""
        target = flow.destination if item.traffic.direction == "ingress" else flow.source
        if item.policy and self._wider(item.policy, target):
            own = self._own_fit(target, item.traffic.direction)
            item = attrs.evolve(
                item,
                policy=own,
                selector=_selector(self._after, own, target) if own else {},
                why=f"{item.why} ({item.policy} selects more pods)",
            )
        narrowable = self._narrowable(target) if not item.narrow_policies else None
        names = [name for name, _, _ in narrowable or []]
        intended = [pod for name in dict.fromkeys(names) for pod in tally.intended.get(name, [])]
        if not names:
            intended = tally.intended.get(item.policy, [])
        seen = frozenset().union(*(tally.labels_of(name) for name in dict.fromkeys(names)))
        return _with_fix(item, flow, intended, narrowable or [], seen if intended else None)

    def _wider(self, name: str, target: Endpoint) -> bool:
        """Whether a rule in policy ``name`` would reach pods beyond ``target``'s workload:
        a person's policy, a shared one, or one whose selector is not the workload's."""
        mine = dict(select_labels(target.labels))
        for policy, spec, _ in self._after.selecting(target):
            if policy.display_name != name:
                continue
            if is_shared(policy.document):
                return True  # its members' pods, by definition
            written = spec.subject.label_map if spec.subject is not None else {}
            clusterwide = policy.document.get("kind") != NAMESPACED_KIND
            if clusterwide and written.get(NAMESPACE_LABEL) != target.namespace:
                return True  # the same labels in every namespace
            return not mine or any(written.get(k) != v for k, v in mine.items())
        return False

    def _own_fit(self, target: Endpoint, way: str) -> str:
        """The policy of ``target``'s workload's own that selects no pod beyond it and
        polices ``way`` ("" when none does: the fix names a new one)."""
        for name in self._after.enforcing(target, way):
            if not self._wider(name, target):
                return name
        return ""

    def _narrowable(self, target: Endpoint) -> list[tuple[str, str, Selector | None]] | None:
        """(policy, where in it, endpointSelector) of every proposed spec that selects
        ``target`` and polices a direction; None when one of them is a person's (cpg does
        not change it, so narrowing cpg's own would not take)."""
        found = []
        for policy, spec, _ in self._proposed.selecting(target):
            if not (spec.enforces("ingress") or spec.enforces("egress")):
                continue
            if not is_cpgs(policy.document):
                return None
            name = policy.display_name
            where = f"{name} specs[{spec.path[1]}]" if spec.in_specs else name
            found.append((name, where, spec.subject))
        return found

    def _judge_drop(self, ask: _Questions, tally: _Tally, flow: Flow, flows: int) -> None:
        """A drop the proposal is for: fixed when the policies after it admit it at this end
        and, where the proposal newly polices the other end, there too."""
        way = WAYS[flow.direction]
        target = flow.destination if way == "ingress" else flow.source
        tally.candidates += flows
        ok, by = ask.admitted(self._after, flow, target)
        by = by.lstrip("/")
        if ok and not ask.blocked_at_other_end(flow, way):
            tally.fixed += flows
            tally.fixes_by_policy[by] += flows
            tally.intended.setdefault(by, []).append(target)
        else:
            tally.not_fixed.append(traffic_of(flow, flows))

    def _judge_working(
        self, ask: _Questions, tally: _Tally, flow: Flow, flows: int, mirrored: bool
    ) -> None:
        """Traffic that works today: would it still? A tier's deny, a pod the proposal newly
        puts into default-deny without a rule for it, or a replaced policy that admitted it
        and whose replacement does not, each breaks it."""
        way = WAYS[flow.direction]
        target = flow.destination if way == "ingress" else flow.source
        if not mirrored:
            tally.forwarded += flows
        if ask.allow_localhost and from_own_node(flow):
            tally.node_flows += flows
            return
        tiered = ask.tier_denial(flow, target)
        if tiered is not None:
            tally.broken(flow, flows, tiered)
            return
        policed_now = ask.policed_today(target, way)
        newly_by = self._proposed.enforcing(target, way)
        if not policed_now and newly_by:
            labels = tuple(sorted(stable_labels(target.labels).items()))
            entry = tally.newly.setdefault(
                (target.namespace, labels, way), [set(), 0, set(), endpoint_name(target)]
            )
            entry[0].update(newly_by)
            entry[1] += flows
            if target.pod_name:
                entry[2].add(target.pod_name)
            ok, _ = ask.admitted(self._after, flow, target)
            if not ok:
                own = _own_policy(self._shared_names, newly_by)
                tally.broken(
                    flow,
                    flows,
                    _would_break(
                        flow,
                        target,
                        policy=own,
                        selector=_selector(self._proposed, own, target),
                        why=f"{who(target)} was not policed for {way}; "
                        f"{', '.join(newly_by)} would put it in default-deny"
                        + (_OTHER_END[way] if mirrored else ""),
                    ),
                )
        elif policed_now and self.current is not None and self._replaced:
            was, _ = ask.admitted(self._today, flow, target)
            now, _ = ask.admitted(self._after, flow, target)
            if was and not now:
                enforcing = self._today.enforcing(target, way)
                tally.broken(
                    flow,
                    flows,
                    _would_break(
                        flow,
                        target,
                        policy=enforcing[0] if enforcing else "",
                        why="allowed by the current policies, not by the proposed ones",
                    ),
                )

    def _pressure(self) -> tuple[EndpointPressure, ...]:
        """The policy map pressure of every pod the capture shows that the proposal selects,
        under the policies after the proposal is applied, over the identities it shows."""
        seen: set[Endpoint] = set(self.stream.pods.values())
        for group in self.stream.groups.values():
            seen.update((group.first.source, group.first.destination))
        pods = [e for e in seen if is_pod_endpoint(e)]
        selected = [
            (endpoint_name(e), e)
            for e in sorted(pods, key=endpoint_order)
            if self._proposed.selecting(e)
        ]
        addresses = sorted(
            {
                g.first.destination_ip
                for g in self.stream.groups.values()
                if self._world[g.first.destination]
            }
            - {""}
        )
        # The identities, addresses and names only grow: the same sizes are the same sets,
        # and each rule's count from the last flush still holds.
        size = (len(seen), len(addresses), sum(len(v) for v in self.stream.names.values()))
        over = (*size, len(self.stream.groups), len(self.stream.pods))
        if self.memos.pressure_found[0] == over:
            return self.memos.pressure_found[1]  # nothing new: the same answer
        if self.memos.pressure_memo[0] != size:
            self.memos.pressure_memo = (size, {})
        found = policy_map_pressure(
            selected,
            self._after.selecting,
            seen,
            addresses=addresses,
            names=self.stream.names,
            limit=self.agent.policy_map_max,
            counted=self.memos.pressure_memo[1],
        )
        worst: dict[str, EndpointPressure] = {}
        for item in found:  # one line per workload: its fullest identity
            if item.endpoint not in worst or item.entries > worst[item.endpoint].entries:
                worst[item.endpoint] = item
        answer = tuple(sorted(worst.values(), key=lambda p: (-p.entries, p.endpoint)))
        self.memos.pressure_found = (over, answer)
        return answer


_OTHER_END = {
    "egress": " (the capture shows this traffic arriving at its destination only)",
    "ingress": " (the capture shows this traffic leaving its source only)",
}
_MIRRORED = int(Verdict.VERDICT_UNKNOWN)
"""The verdict of a flow as its other end saw it: not recorded by Hubble, inferred."""


def _other_end(flow: Flow, way: str, works: bool, world: Worlds) -> Flow | None:
    """The same traffic where its other end polices it, when that end is a pod: a packet
    Hubble saw arrive (ingress) left its source's egress, and one that left a pod (egress,
    forwarded) reaches the destination's ingress. A capture often shows only one end (one
    node's Hubble, a filtered observe); a proposal that puts the other end into default-deny
    breaks the traffic there too. Judged only where the capture has no flow of that
    direction itself."""
    if flow.is_reply is not None and flow.is_reply:
        return None
    if way == "egress" and not works:
        return None  # dropped on its way out: the destination never saw it
    other = flow.source if way == "ingress" else flow.destination
    if not other.namespace or world[other]:
        return None  # the world, or one of Cilium's own identities (no namespace)
    direction = Direction.EGRESS if way == "ingress" else Direction.INGRESS
    return attrs.evolve(
        flow,
        direction=int(direction),
        verdict=_MIRRORED,
        drop_reason=0,
        ingress_allowed_by=(),
        egress_allowed_by=(),
    )


def _semantics(node_flows: int, default_local_cluster: bool) -> tuple[str, ...]:
    notes = []
    if node_flows:
        notes.append(
            f"{node_flows} forwarded flow{'s' if node_flows != 1 else ''} from pods' own nodes "
            "(kubelet probes) are admitted by Cilium's allow-localhost: always whatever the "
            "policy, so none can break (judge with allow-localhost: policy if your agents set it)"
        )
    if not default_local_cluster:
        notes.append(
            "judged with policy-default-local-cluster off (Cilium before 1.19, or set so): a "
            "peer selector without a cluster label selects that app in every cluster"
        )
    return tuple(notes)


def _own_policy(shared: frozenset[str], names: Sequence[str]) -> str:
    """The first of ``names`` that is a workload's own policy ("" when they are all shared:
    a fix in one of those would allow the traffic for every workload it selects)."""
    return next((name for name in names if name not in shared), "")


def _selector(index: PolicyIndex, name: str, target: Endpoint) -> dict[str, str]:
    for policy, spec, _ in index.selecting(target):
        if policy.display_name == name:
            return spec.subject.label_map if spec.subject is not None else {}
    return {}


@attrs.define
class _Tally:
    """What one :meth:`PlanJudge.plan` counts and collects as it goes through the traffic."""

    candidates: int = 0
    fixed: int = 0
    forwarded: int = 0
    node_flows: int = 0
    not_fixed: list[Traffic] = attrs.Factory(list)
    fixes_by_policy: Counter[str] = attrs.Factory(Counter)
    breaks: list[WouldBreak] = attrs.Factory(list)
    break_flows: list[tuple[Flow, int]] = attrs.Factory(list)
    newly: dict[tuple[str, tuple[tuple[str, str], ...], str], list[Any]] = attrs.Factory(dict)
    """(namespace, labels, direction) newly policed -> [policies, flows, pods, workload]."""
    intended: dict[str, list[Endpoint]] = attrs.Factory(dict)
    _labels: dict[str, frozenset[str]] = attrs.Factory(dict)

    def labels_of(self, policy: str) -> frozenset[str]:
        """Every label of the pods ``policy`` was made for (kept: asked once judging is
        done, when ``intended`` no longer grows)."""
        found = self._labels.get(policy)
        if found is None:
            found = self._labels[policy] = frozenset(
                label for pod in self.intended.get(policy, ()) for label in pod.labels
            )
        return found

    """A proposed policy -> the pods its fixes are for."""

    def broken(self, flow: Flow, flows: int, item: WouldBreak) -> None:
        """``flows`` flows like ``flow`` that would break, as ``item`` says."""
        self.break_flows.append((flow, flows))
        self.breaks.append(attrs.evolve(item, traffic=traffic_of(flow, flows)))


def _would_break(
    flow: Flow,
    target: Endpoint,
    *,
    policy: str,
    why: str,
    selector: dict[str, str] | None = None,
    fix: str = "",
) -> WouldBreak:
    """Traffic like ``flow`` to or from ``target`` that would break (counted by the tally)."""
    return WouldBreak(
        traffic=traffic_of(flow, 1),
        endpoint=endpoint_name(target),
        labels=stable_labels(target.labels),
        policy=policy,
        selector={} if selector is None else selector,
        why=why,
        fix=fix,
    )


class _Questions:
    """What one :meth:`PlanJudge.plan` asks of the policies about a flow, in the agents'
    settings it judges with. A verdict depends on the flow, the policies (fixed), the DNS
    names seen (they only grow) and how localhost is judged: the judge keeps verdicts from
    one plan to the next while those hold, so a flush judges only the traffic new since the
    last one."""

    def __init__(self, judge: PlanJudge, allow_localhost: bool) -> None:
        self.judge = judge
        self.allow_localhost = allow_localhost
        self.agent = attrs.evolve(judge.agent, allow_localhost=allow_localhost)
        names = judge.stream.names
        context = (sum(len(v) for v in names.values()), allow_localhost)
        if judge.memos.verdicts_context != context:
            judge.memos.verdicts_context, judge.memos.verdicts = context, {}
        self._verdicts = judge.memos.verdicts

    def admitted(self, index: PolicyIndex, flow: Flow, target: Endpoint) -> tuple[bool, str]:
        """Whether the policies of ``index`` admit ``flow`` at ``target``, and which did."""
        key = (id(index), id(flow), target is flow.destination)
        known = self._verdicts.get(key)
        if known is not None and known[0] is flow:  # the same flow object: not an id reused
            return known[1]
        # Only the policies that select the target can admit or deny its traffic (and the
        # tiers of ClusterNetworkPolicies, whose subjects the matcher checks): the index
        # knows them when the target is the end the flow's direction polices.
        ingress = flow.direction == Direction.INGRESS
        policies: Sequence[PolicyDocument] = index
        if target is not (flow.destination if ingress else flow.source):
            policies = list({id(p): p.document for p, _, _ in index.selecting(target)}.values())
            policies += index.tiered
        result = match_flow(policies, flow, self.judge.stream.names, agent=self.agent)
        answer = (result.allowed, result.policy)
        self._verdicts[key] = (flow, answer)
        return answer

    def policed_today(self, target: Endpoint, way: str) -> bool:
        judge = self.judge
        if judge.current is not None:
            return bool(judge._today.enforcing(target, way))
        return (target, way) in judge.stream.policed

    def tier_denial(self, flow: Flow, target: Endpoint) -> WouldBreak | None:
        """Traffic that works today and a ClusterNetworkPolicy of the proposal would deny
        (an Admin Deny, or a Baseline Deny for a pod no other policy selects)."""
        proposed, after = self.judge._proposed, self.judge._after
        if not proposed.tiered:
            return None
        judged = judge_flow(
            [*after.near(target.namespace), *after.tiered],
            flow,
            self.judge.stream.names,
            agent=self.agent,
        )
        proposed_names = {policy_name(p) for p in proposed.tiered}
        if judged.allowed or judged.result.policy not in proposed_names:
            return None
        return _would_break(
            flow,
            target,
            policy=judged.result.policy,
            why=judged.result.reason,
            fix=f"the proposal's ClusterNetworkPolicy {judged.result.policy} decides this "
            "traffic: accept it in a rule before that one (or in a policy of a lower "
            "priority number), or narrow that rule",
        )

    def blocked_at_other_end(self, flow: Flow, way: str) -> bool:
        """A drop the proposal admits, whose source the proposal newly puts into egress
        default-deny without a rule for it: the fix does not take."""
        mirror = _other_end(flow, way, False, self.judge._world)
        if mirror is None:
            return False
        other = mirror.source
        if self.policed_today(other, "egress") or not self.judge._proposed.enforcing(
            other, "egress"
        ):
            return False
        return not self.admitted(self.judge._after, mirror, other)[0]


def _newly_enforced(
    newly: Mapping[tuple[str, tuple[tuple[str, str], ...], str], list[Any]],
) -> tuple[NewlyEnforced, ...]:
    return tuple(
        sorted(
            (
                NewlyEnforced(
                    namespace=namespace,
                    workload=entry[3].partition("/")[2] or entry[3],
                    labels=dict(labels),
                    direction=way,
                    policies=tuple(sorted(entry[0])),
                    forwarded_flows=entry[1],
                    pods=tuple(sorted(entry[2])),
                )
                for (namespace, labels, way), entry in newly.items()
            ),
            key=lambda n: (n.namespace, n.workload, n.direction),
        )
    )


def _summaries(
    proposal: Sequence[PolicyDocument],
    fixes_by_policy: Mapping[str, int],
    breaks: Sequence[WouldBreak],
    newly_enforced: Sequence[NewlyEnforced],
) -> tuple[PolicyPlanSummary, ...]:
    """Each proposed policy: the drops it fixes, the flows it would break, the workloads it
    newly polices."""
    per_policy = []
    for policy in proposal:
        name = policy_name(policy)
        per_policy.append(
            PolicyPlanSummary(
                policy=name,
                fixes=fixes_by_policy.get(name, 0),
                would_break=sum(b.traffic.flows for b in breaks if b.policy == name),
                newly_enforced=sum(1 for n in newly_enforced if name in n.policies),
            )
        )
    return tuple(sorted(per_policy, key=lambda p: p.policy))


def _with_fix(
    item: WouldBreak,
    flow: Flow,
    intended: list[Endpoint],
    narrowable: Sequence[tuple[str, str, Selector | None]] = (),
    seen: AbstractSet[str] | None = None,
) -> WouldBreak:
    """The fixes, best first: the selectors of every proposed policy that would newly select
    the endpoint narrowed by the label that tells it from the pods they were made for (it
    stays as it is today), else the one policy's selector narrowed by the label its pods
    share; and the rule to add, named with the policy it goes into."""
    traffic = item.traffic
    if unknown_pod_peer(flow):
        fix = (
            "cannot judge: identity unknown (Hubble reported this pod as the world, without "
            "its labels); no rule can name it and a toCIDR rule never selects a pod; give the "
            "pod's CiliumEndpoint (or the cluster) as identities, or capture again once Cilium "
            "knows its identity"
        )
        return attrs.evolve(item, fix=fix)
    rule_text = rule_yaml(flow)
    own = item.policy
    if not own:  # a rule in the policies that hold it would admit pods beyond the endpoint
        namespace, _, workload = item.endpoint.partition("/")
        own = f"{namespace}/{name_for(workload or namespace)}"
        target = f"{own} (a new policy of {item.endpoint}'s own: the policies that select it select more pods)"
    else:
        target = own
    rule = (
        f"add a rule to {target} allowing {traffic.source} → {traffic.destination} "
        f"{traffic.protocol}/{traffic.port}"
        if rule_text
        else ""
    )
    keys = {key for _, _, selector in narrowable if selector for key in selector.label_map}
    excluded = (
        exclusion(intended, item.labels, keys | set(item.selector), seen) if narrowable else None
    )
    if excluded is not None:
        key, value = excluded
        policies = tuple(dict.fromkeys(name for name, _, _ in narrowable))
        fix = (
            f"narrow {', '.join(policies)}: add {key} NotIn ({value}) to the endpointSelector "
            f"of each (the pods they were made for have no {key}={value}; {item.endpoint} "
            f"with {key}={value} stays as it is today)" + (f"; or {rule}" if rule else "")
        )
        return attrs.evolve(
            item,
            policy=own,
            fix=fix,
            narrow_yaml=narrowing_yaml(
                [
                    (where, excluding(selector.written if selector else None, key, value))
                    for _, where, selector in narrowable
                ]
            ),
            narrow_policies=policies,
            narrow_label=(key, value),
            rule_yaml=rule_text,
        )
    label = discriminator(intended, item.labels, item.selector) if item.selector else None
    if label is None:
        return attrs.evolve(
            item, policy=own, fix=rule or "no rule can express it", rule_yaml=rule_text
        )
    key, value = label
    fix = (
        f"narrow {item.policy}: add {key}: {value} to spec.endpointSelector.matchLabels (the "
        f"pods it was made for have it, {item.endpoint} with {key}="
        f"{item.labels.get(key, '(none)')} does not)" + (f"; or {rule}" if rule else "")
    )
    return attrs.evolve(
        item, fix=fix, narrow_yaml=narrowed_yaml(item.selector, key, value), rule_yaml=rule_text
    )


# --- semantic diff ---------------------------------------------------------------------------


def _peers(rule: Rule) -> list[str]:
    peers: list[str] = []
    for selector in rule.endpoints:
        labels = selector.label_map
        shown = ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "all endpoints"
        if selector.expressions:
            shown += " (+expressions)"
        peers.append(f"endpoints {shown}")
    peers += [f"entity {e}" for e in rule.entities]
    for entry in rule.cidrs:
        excepted = [str(e) for e in entry.excepts]
        peers.append(f"cidr {entry.cidr}" + (f" except {', '.join(excepted)}" if excepted else ""))
    for fqdn in rule.fqdns:
        peers.append(f"fqdn {fqdn.name}{fqdn.pattern}".rstrip())
    for service in rule.services:
        peers.append(f"service {service}")
    return peers or ["any peer"]


def _ports(rule: Rule) -> list[str]:
    out: list[str] = []
    for port_rule in rule.port_rules:
        extras = [
            f"HTTP {h.written.get('method', '*')} {h.written.get('path', '/*')}"
            for h in port_rule.http
        ]
        extras += [f"DNS {d.text or None}" for d in port_rule.dns]
        for port in port_rule.effective_ports:
            protocol = port.protocol_written if "protocol" in port.written else "ANY"
            number = port.port_written if "port" in port.written else "any"
            base = f"{protocol}/{number}"
            if port.end_written:
                base += f"-{port.end_written}"
            out += [f"{base} {extra}" for extra in extras] or [base]
    for icmp in rule.icmps:
        family = str(icmp.family_written or "IPv4") if icmp.family_written is not None else "IPv4"
        out.append(f"ICMP{family[2:]} type {icmp.type_written}")
    return out or ["any port"]


def policy_entries(policy: PolicyDocument) -> set[str]:
    """Every (direction, peer, port/L7) a policy allows or denies, in Cilium terms (a
    ClusterNetworkPolicy: each rule with its tier, priority and action)."""
    entries: set[str] = set()
    if is_cluster_network_policy(policy):
        tiered = tier_policy(policy)
        where = f"{tiered.tier_written} tier, priority {tiered.priority_written}"
        for section, side in (("ingress", "from"), ("egress", "to")):
            for tier_rule in tiered.rules(section):
                entries.add(
                    f"{section}[{tier_rule.index}] {tier_rule.action_written} {side} "
                    f"{_compact(tier_rule.peers_written)} "
                    f"{_compact(tier_rule.protocols_written or 'any port')} ({where})"
                )
        return entries
    for spec in policy_model(policy).specs:
        for section in SECTIONS:
            for rule in spec.rules(section):
                if rule.empty:
                    entries.add(f"{section} nothing (an empty rule selects no peer: default-deny)")
                    continue
                for peer in _peers(rule):
                    for port in _ports(rule):
                        entries.add(f"{section} {rule.side} {peer} {port}")
    return entries


def _compact(value: object) -> str:
    """A rule's part on one line, keys sorted (the same rule, the same words)."""
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _diffs(
    proposal: Sequence[PolicyDocument], current: Sequence[PolicyDocument]
) -> list[PolicyDiff]:
    existing = {_key(p): p for p in current}
    out = []
    for policy in proposal:
        name = policy_name(policy)
        new = policy_entries(policy)
        old_policy = existing.get(_key(policy))
        if old_policy is None:
            out.append(PolicyDiff(name, "new", tuple(sorted(new))))
            continue
        old = policy_entries(old_policy)
        status: Literal["changed", "unchanged"] = "changed" if new != old else "unchanged"
        out.append(PolicyDiff(name, status, tuple(sorted(new - old)), tuple(sorted(old - new))))
    return sorted(out, key=lambda d: d.policy)


def _confidence(evidence: Mapping[str, PolicyEvidence], policies: set[str]) -> list[RuleConfidence]:
    out = []
    for name in sorted(policies):
        doc = evidence.get(name)
        if doc is None:
            continue
        for rule in doc.rules:
            out.append(
                RuleConfidence(
                    policy=name,
                    rule=rule.key,
                    flows=rule.flow_count,
                    sources=len({_pod(s.src) for s in rule.samples}),
                    destinations=len({_pod(s.dst) for s in rule.samples}),
                    sessions=len(rule.contributing_sessions),
                    first_seen=rule.first_seen,
                    last_seen=rule.last_seen,
                )
            )
    return out


def _pod(side: Any) -> str:
    return f"{getattr(side, 'namespace', '')}/{getattr(side, 'pod', '') or getattr(side, 'ip', '')}"
