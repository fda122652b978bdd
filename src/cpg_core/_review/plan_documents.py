"""The documents of a plan: what applying proposed policies would change (what breaks, what
is newly enforced, how each policy changes), as the converter, drift and the reports read them."""

from __future__ import annotations

from typing import Literal

import attrs

from cpg_core._base.documents import (
    DeclaredBy,
)
from cpg_core._base.flow import Flow
from cpg_core._policy.agent import POLICY_MAP_MAX
from cpg_core._review.availability import (
    Availability,
)
from cpg_core._review.owners import AlsoSelected
from cpg_core._review.pressure import EndpointPressure
from cpg_core._review.readiness import (
    WorkloadProfile,
)
from cpg_core._review.rollout import Rollout
from cpg_core._synthesis.profile import CaptureProfile

CurrentSource = Literal["current", "cluster", "flows"]


BLIND_SPOTS: dict[str, str] = {
    "current": "the policy files given; anything applied to the cluster but not in them is "
    "not seen",
    "cluster": "the policies in the cluster now; a policy applied after the capture was taken "
    "may already have changed what the capture shows",
    "flows": "only what the capture shows: an endpoint counts as policed in a direction when a "
    "flow names the policy that allowed it (*_allowed_by) or was denied by policy; endpoints "
    "with no such flow count as not policed, and current rules are unknown, so only the "
    "proposal is checked against their traffic",
}


@attrs.frozen(slots=True)
class Traffic:
    """One kind of traffic in the capture, with how often it was seen and one example."""

    direction: str
    source: str
    destination: str
    protocol: str
    port: int
    flows: int
    sample: str
    """The traffic as ``cpg verify`` prints it, with the time of one flow."""


@attrs.frozen(slots=True)
class WouldBreak:
    traffic: Traffic
    endpoint: str
    """``namespace/workload`` of the endpoint newly put into default-deny."""
    labels: dict[str, str]
    """Its stable labels."""
    policy: str
    """The proposed policy whose selector newly captures the endpoint."""
    selector: dict[str, str]
    why: str
    fix: str
    narrow_yaml: str = ""
    """The proposed policy's endpointSelector narrowed by the label that leaves this endpoint
    out (empty when no label tells the intended pods apart)."""
    rule_yaml: str = ""
    """The allow rule that admits this traffic, under ``ingress:``/``egress:`` (empty when no
    rule can express it)."""
    narrow_policies: tuple[str, ...] = ()
    """The proposed policies (all cpg's) whose selectors the first fix narrows: every one
    that would newly select the endpoint."""
    narrow_label: tuple[str, ...] = ()
    """``(key, value)``: the label they stop selecting (``key NotIn (value)``)."""
    declared_by: tuple[DeclaredBy, ...] = ()
    """The cluster objects that declare this traffic (§D58): no flow of the capture showed
    it; the cluster depends on it all the same."""


@attrs.frozen(slots=True)
class NewlyEnforced:
    namespace: str
    workload: str
    labels: dict[str, str]
    direction: str
    policies: tuple[str, ...]
    forwarded_flows: int
    pods: tuple[str, ...] = ()


@attrs.frozen(slots=True)
class PolicyDiff:
    policy: str
    status: Literal["new", "changed", "unchanged"]
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


@attrs.frozen(slots=True)
class RuleConfidence:
    policy: str
    rule: str
    flows: int
    sources: int
    destinations: int
    sessions: int
    first_seen: str
    last_seen: str


@attrs.frozen(slots=True)
class PolicyPlanSummary:
    policy: str
    fixes: int
    would_break: int
    newly_enforced: int


@attrs.frozen(slots=True)
class Plan:
    """What applying the proposed policies would change: the drops they fix and do not,
    the traffic that works today and would break, the endpoints newly enforced, and how each
    policy changes (``cpg plan``)."""

    current_source: str
    blind_spots: str
    candidates: int
    fixed: int
    not_fixed: tuple[Traffic, ...]
    would_break: tuple[WouldBreak, ...]
    newly_enforced: tuple[NewlyEnforced, ...]
    diffs: tuple[PolicyDiff, ...]
    confidence: tuple[RuleConfidence, ...]
    policies: tuple[PolicyPlanSummary, ...]
    forwarded_flows: int
    fixes: tuple[tuple[Flow, int], ...] = attrs.field(default=(), eq=False, repr=False)
    """One flow of each would-break traffic and its count, in the order of ``would_break``
    (not part of the wire form): what ``cpg plan --write-fixes`` fixes."""
    node_flows: int = 0
    """Forwarded flows from a pod's own node that Cilium admits whatever the policy
    (allow-localhost: always): counted, never would-break."""
    notes: tuple[str, ...] = ()
    """The Cilium semantics the plan was judged under, when they matter to its answer."""
    policy_map: tuple[EndpointPressure, ...] = ()
    """The endpoints whose policy map the proposal would fill to 80 % of ``policy_map_max``
    or more, the fullest first (ARCHITECTURE §D41)."""
    policy_map_max: int = POLICY_MAP_MAX
    also_selected: tuple[AlsoSelected, ...] = ()
    """Proposed policies of cpg's whose pods a person's policies select too (§D48): Cilium
    applies both, and cpg never changes a person's."""
    availability: tuple[Availability, ...] = ()
    """What the proposal would take from traffic the capture does not hold (§D47): DNS for
    pods it puts into egress default-deny, services and clients the whole cluster uses, and
    what a new workload in a new namespace would lose."""
    unjudged_flows: int = 0
    """Flows of kinds of traffic a live session saw first once its cap on kinds was reached:
    not judged, so the plan cannot say they keep working."""
    capture: CaptureProfile | None = None
    """How long and how wide the capture judged is (§D59)."""
    readiness: tuple[WorkloadProfile, ...] = ()
    """The proposed policies' workloads, ready to enforce or to keep learning (from their
    evidence), those to keep learning first."""
    rollout: Rollout | None = None
    """The ready workloads' policies in batches to apply one after another (§D59; the caller
    that knows the files adds it)."""

    @property
    def overflows(self) -> bool:
        """Whether an endpoint's policy map would overflow: the agent fails to apply it."""
        return any(p.over for p in self.policy_map)

    @property
    def breaks(self) -> bool:
        return bool(self.would_break)

    @property
    def can_judge(self) -> bool:
        """Whether the capture had traffic that works today to check (ARCHITECTURE §D25): a
        drops-only capture cannot say that nothing would break."""
        return self.forwarded_flows > 0

    @property
    def verdict(self) -> str:
        """``breaks``, ``cannot_judge`` or ``nothing_breaks`` (never while flows went
        unjudged: what they would do is unknown)."""
        if self.breaks:
            return "breaks"
        return "nothing_breaks" if self.can_judge and not self.unjudged_flows else "cannot_judge"

    @property
    def would_break_flows(self) -> int:
        return sum(item.traffic.flows for item in self.would_break)


CANNOT_JUDGE = (
    "cannot judge what would break: this capture has no forwarded traffic to check; capture "
    "with every verdict (hubble observe without --verdict, or with --verdict FORWARDED "
    "--verdict DROPPED) and plan again"
)
