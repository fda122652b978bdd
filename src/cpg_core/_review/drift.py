"""How the cluster drifts away from the policies applied: policy drops for workloads the
policies select (they need a rule), selectors that now reach pods with labels nobody saw when
the policy was made, and rules no flow has used for a long time. ``cpg drift`` asks it of a
capture or of a live stream; like the plan, it takes flows one at a time (ARCHITECTURE
§D28)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from cpg_core._base.documents import ZERO_TIME, PolicyDocument, PolicyEvidence
from cpg_core._base.dropreasons import reason_name
from cpg_core._base.flow import Endpoint, Flow
from cpg_core._base.names import policy_name as named_policy
from cpg_core._flows.attribution import time_key
from cpg_core._flows.decide import DecideOptions, Decision, decide, looks_like_reply
from cpg_core._flows.synthesis import Resolved, Resolver, is_pod_endpoint, with_known_pod
from cpg_core._policy.agent import CILIUM_DEFAULTS, AgentSettings
from cpg_core._policy.matcher import match_flow, policy_name
from cpg_core._review._rule_keys import rule_key
from cpg_core._review.evidence import subject_labels
from cpg_core._review.plan_documents import Traffic
from cpg_core._review.traffic import (
    WAYS,
    WORKS,
    FlowGroup,
    Kept,
    PolicyIndex,
    Worlds,
    group_key,
    traffic_of,
)
from cpg_core._synthesis.fixes import rule_yaml

MAX_PODS = 5


@attrs.frozen(slots=True)
class NeedsRule:
    """Traffic a policy of the folder polices and drops: the policy needs a rule."""

    policy: str
    traffic: Traffic
    drop_reason: str
    rule_yaml: str
    """The allow rule to add, under ``ingress:``/``egress:`` ("" when none can express it)."""


@attrs.frozen(slots=True)
class UnseenPods:
    """Pods a policy's selector reaches whose labels its evidence never showed."""

    policy: str
    selector: dict[str, str]
    labels: dict[str, str]
    """The pods' labels."""
    unseen: dict[str, str]
    """The labels no pod the policy was made for had (``version: v3``)."""
    pods: tuple[str, ...]
    flows: int


@attrs.frozen(slots=True)
class StaleRule:
    """A rule of the evidence no flow has used for longer than ``--stale-after``."""

    policy: str
    rule: str
    last_seen: str
    idle_days: float


@attrs.frozen(slots=True)
class Drift:
    flows: int
    reference: str
    """The time rules are judged stale against (RFC 3339)."""
    stale_after_days: float
    needs_rule: tuple[NeedsRule, ...]
    unseen_pods: tuple[UnseenPods, ...]
    stale_rules: tuple[StaleRule, ...]
    without_evidence: tuple[str, ...]
    """Policies without evidence: their selectors and rules cannot be judged for drift."""
    unjudged_flows: int = 0
    """Drops of kinds of traffic first seen once a live session's cap on kinds was reached."""
    max_kinds: int = 0
    no_rule_can_fix: tuple[NeedsRule, ...] = ()
    """Drops the folder's policies cause that no allow rule can express (no port, a world
    peer without an IP, a pod without usable labels): what a replay reports as findings. Not
    drift: no change to the folder would admit them."""
    judged_flows: int = 0
    """Flows with a direction, judged against the policies (a capture without
    ``traffic_direction``, an exporter's field mask or an empty one judges none)."""
    future_flows: int = 0
    """Flows stamped after the time of the check, set aside (one such flow once made every
    rule stale)."""
    future_newest: str = ""

    @property
    def drifted(self) -> bool:
        return bool(self.needs_rule or self.unseen_pods or self.stale_rules)

    @property
    def can_judge(self) -> bool:
        """Whether any flow was judged: none means "no drift" would say nothing."""
        return self.judged_flows > 0

    @property
    def verdict(self) -> str:
        if self.drifted:
            return "drifted"
        return "no_drift" if self.can_judge else "cannot_judge"


def _moment(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.rstrip("Z")[:26] + "+00:00")
    except ValueError:
        return None


class DriftJudge:
    """Drift of ``policies`` (applied; ``evidence`` by ``namespace/name``) as flows arrive."""

    def __init__(
        self,
        policies: Sequence[PolicyDocument],
        evidence: Mapping[str, PolicyEvidence],
        *,
        options: DecideOptions | None = None,
        max_kinds: int = 0,
        not_after: str = "",
        agent: AgentSettings = CILIUM_DEFAULTS,
    ) -> None:
        self.agent = agent
        """The agents' settings every verdict is judged with (§D61)."""
        self.not_after = time_key(not_after) if not_after else ""
        """Flows stamped later than this (the check's time, with room for clocks that
        disagree a little) are set aside: a flow of 2099 must not make every rule stale."""
        self.judged = 0
        self.future = 0
        self.future_newest = ""
        self.kept = Kept(max_kinds)
        """The cap on what is kept (0: none), and the flows past it."""
        self.policies = list(policies)
        self.evidence = dict(evidence)
        self.options = options or DecideOptions()
        self.default_local_cluster = self.agent.default_local_cluster
        self.allow_localhost = self.agent.allow_localhost
        self.flows = 0
        self.newest = ""
        """The newest flow's time (a time key; "" before any flow had one): a capture's drift
        counts staleness from it, not from the day it is read."""
        self._index = PolicyIndex(self.policies, self.agent.host_firewall)
        self._world = Worlds()
        self._pods: dict[str, Endpoint] = {}
        self._names: dict[str, list[str]] = {}
        self._drops: dict[tuple[Any, ...], FlowGroup] = {}
        self._reached: dict[tuple[str, tuple[tuple[str, str], ...]], list[Any]] = {}
        self._used: set[tuple[str, str]] = set()
        self._resolver = Resolver()

    def add(self, flow: Flow) -> None:
        self.flows += 1
        when = time_key(flow.time)
        if self.not_after and when > self.not_after:
            self.future += 1
            self.future_newest = max(self.future_newest, when)
            return
        if when > self.newest:
            self.newest = when
        kept = self.kept
        kept.note_pod(self._pods, flow.source, flow.source_ip)
        kept.note_pod(self._pods, flow.destination, flow.destination_ip)
        if flow.l7 is not None and flow.l7.dns is not None:
            kept.note_names(self._names, flow)
        for side in (flow.source, flow.destination):
            if is_pod_endpoint(side):
                self._note_reach(side)
        way = WAYS.get(flow.direction)
        if way is None:
            return
        self.judged += 1
        if flow.is_reply is True:
            return
        decision = decide(flow, self.options)
        if decision is Decision.CANDIDATE:
            key = group_key(flow, self._world)
            group = self._drops.get(key)
            if group is None:
                if not kept.room(self._drops):
                    kept.unjudged += 1
                    return
                group = self._drops[key] = FlowGroup(flow)
            group.flows += 1
        elif flow.is_reply is None and looks_like_reply(flow):
            return
        elif flow.verdict in WORKS:  # the rule this traffic uses is alive
            resolved = self._resolver.resolve(flow)
            if isinstance(resolved, Resolved):
                target = resolved.target
                name = f"{target.namespace}/{named_policy(target.workload)}"
                if name in self.evidence:  # only the folder's rules can be stale
                    self._used.add((name, rule_key(resolved.atom)))

    def snapshot(self) -> DriftJudge:
        """A copy of what the flows added so far left, to judge from while :meth:`add` goes
        on (a stream need not wait): what ``add`` changes is copied, the policies, their
        index and the caches are shared."""
        copied = copy.copy(self)
        copied._drops = {k: FlowGroup(g.first, g.flows) for k, g in self._drops.items()}
        copied._pods = dict(self._pods)
        copied._names = {ip: list(names) for ip, names in self._names.items()}
        copied._reached = {
            key: [set(pods), flows, spec] for key, (pods, flows, spec) in self._reached.items()
        }
        copied._used = set(self._used)
        copied.kept = Kept(self.kept.cap)
        copied.kept.unjudged = self.kept.unjudged
        return copied

    def _note_reach(self, endpoint: Endpoint) -> None:
        for policy, spec, _ in self._index.selecting(endpoint):
            name = policy_name(policy)
            if name not in self.evidence or not self.evidence[name].subjects:
                continue
            labels = tuple(sorted(subject_labels(endpoint.labels).items()))
            entry = self._reached.get((name, labels))
            if entry is None:
                if not self.kept.room(self._reached):
                    continue
                entry = self._reached[(name, labels)] = [set(), 0, spec]
            if endpoint.pod_name:
                pods = entry[0]
                pods.add(endpoint.pod_name)
                if len(pods) > MAX_PODS:  # the first few by name are all that is shown
                    pods.discard(max(pods))
            entry[1] += 1

    def drift(self, now: str, stale_after_days: float) -> Drift:
        """What drifted, with rules judged stale against ``now`` (RFC 3339)."""
        dropped = self._needs_rule()
        needs_rule = tuple(item for item in dropped if item.rule_yaml)
        no_rule_can_fix = tuple(item for item in dropped if not item.rule_yaml)
        return Drift(
            flows=self.flows,
            reference=now,
            stale_after_days=stale_after_days,
            needs_rule=needs_rule,
            no_rule_can_fix=no_rule_can_fix,
            unseen_pods=self._unseen(),
            # no flow judged, no rule's use seen: staleness would be every rule's
            stale_rules=self._stale(now, stale_after_days) if self.judged else (),
            without_evidence=tuple(
                sorted(name for p in self.policies if (name := policy_name(p)) not in self.evidence)
            ),
            unjudged_flows=self.kept.unjudged,
            max_kinds=self.kept.cap,
            judged_flows=self.judged,
            future_flows=self.future,
            future_newest=self.future_newest,
        )

    def _needs_rule(self) -> tuple[NeedsRule, ...]:
        found = []
        for group in self._drops.values():
            flow = with_known_pod(group.first, self._pods)
            way = WAYS[flow.direction]
            target = flow.destination if way == "ingress" else flow.source
            policing = self._index.enforcing(target, way)
            if not policing:
                continue  # no policy of the folder polices it: not this folder's drift
            models = {id(p): p for p, _, _ in self._index.selecting(target)}.values()
            selecting = [model.document for model in models]  # match_flow reads documents
            result = match_flow(selecting, flow, self._names, agent=self.agent)
            if result.allowed:
                continue  # the folder admits it: the cluster runs something else
            found.append(
                NeedsRule(
                    policy=policing[0],
                    traffic=traffic_of(flow, group.flows),
                    drop_reason=reason_name(flow.drop_reason),
                    rule_yaml=rule_yaml(flow),
                )
            )
        return tuple(sorted(found, key=lambda n: (-n.traffic.flows, n.traffic.sample)))

    def _unseen(self) -> tuple[UnseenPods, ...]:
        found = []
        for (name, labels), (pods, flows, spec) in self._reached.items():
            known = self.evidence[name].subjects
            mine = dict(labels)
            if not mine or any(dict(subject) == mine for subject in known):
                continue
            unseen = {k: v for k, v in mine.items() if all(s.get(k) != v for s in known)}
            found.append(
                UnseenPods(
                    policy=name,
                    selector=spec.subject.label_map if spec.subject is not None else {},
                    labels=mine,
                    unseen=unseen,
                    pods=tuple(sorted(pods))[:MAX_PODS],
                    flows=flows,
                )
            )
        return tuple(sorted(found, key=lambda u: (u.policy, sorted(u.labels.items()))))

    def _stale(self, now: str, stale_after_days: float) -> tuple[StaleRule, ...]:
        reference = _moment(now)
        if reference is None:
            return ()
        found = []
        for name, doc in sorted(self.evidence.items()):
            for rule in doc.rules:
                if (name, rule.key) in self._used:
                    continue
                if rule.last_seen == ZERO_TIME:
                    continue  # no flow asked for it: written for the cluster (its DNS), not idle
                last = _moment(rule.last_seen)
                if last is None:
                    continue
                idle = (reference - last).total_seconds() / 86400
                if idle > stale_after_days:
                    found.append(StaleRule(name, rule.key, rule.last_seen, round(idle, 1)))
        return tuple(found)
