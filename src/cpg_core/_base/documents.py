"""The documents cpg writes and serves, as typed values.

Each class is one JSON object of a file or a reply: evidence (the Go tool's schema v2 plus this
project's documented additions), cluster-health.json (Go schema v1 plus additions), the explain
record, the rows of the dropped-flow view and the verify report. Field order is wire order;
:mod:`cpg_core._review.wire` owns the wire names and which empty fields are left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

PolicyDocument = Mapping[str, Any]
"""A CiliumNetworkPolicy as loaded from YAML or the cluster: raw input whose schema is the
CRD's, read leniently (cpg never writes one through this type; it renders its own YAML)."""

EVIDENCE_SCHEMA_VERSION = 2
HEALTH_SCHEMA_VERSION = 1
ZERO_TIME = "0001-01-01T00:00:00Z"
"""Go's zero time: what the Go tool writes for "never"."""


# --- evidence ------------------------------------------------------------------------------


@attrs.frozen(slots=True)
class SampleSide:
    """One end of a sample flow; empty fields are left out of the JSON."""

    namespace: str = ""
    workload: str = ""
    pod: str = ""
    ip: str = ""


@attrs.frozen(slots=True)
class SampleFlow:
    """One flow kept as an example of a rule or a finding. ``port`` is the destination port
    (or the ICMP type); ``node`` and ``l7`` (``GET /users/17``) are left out when empty."""

    time: str
    src: SampleSide
    dst: SampleSide
    port: int
    protocol: str
    verdict: str
    drop_reason: str
    node: str = ""
    l7: str = ""


@attrs.frozen(slots=True)
class EndpointPeerRecord:
    namespace: str
    labels: dict[str, str] = attrs.field(factory=dict, hash=False)


@attrs.frozen(slots=True)
class EntityPeerRecord:
    entity: str


@attrs.frozen(slots=True)
class CidrPeerRecord:
    cidr: str


@attrs.frozen(slots=True)
class FqdnPeerRecord:
    fqdn: str


PeerRecord = EndpointPeerRecord | EntityPeerRecord | CidrPeerRecord | FqdnPeerRecord
"""On the wire, ``{"type": "endpoint" | "entity" | "cidr" | "fqdn", ...}``."""


@attrs.frozen(slots=True)
class HttpRecord:
    http_method: str
    http_path: str


@attrs.frozen(slots=True)
class DnsRecord:
    dns_matchname: str


L7Record = HttpRecord | DnsRecord
"""On the wire, ``{"protocol": "http" | "dns", ...}``."""


@attrs.frozen(slots=True, order=True)
class DeclaredBy:
    """The cluster object that declares a dependency a rule keeps open: no flow asked for
    the rule, the object says the cluster depends on it (a webhook the API server calls, a
    target a Prometheus scrapes, a DNS cache)."""

    kind: str
    namespace: str
    """"" for an object of the whole cluster (a webhook configuration, an APIService)."""
    name: str
    what: str = ""
    """What it declares, in words (``admission webhook sidecar-injector.istio.io``)."""

    @property
    def ref(self) -> str:
        """``Kind namespace/name`` (``Kind name`` for an object of the whole cluster)."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"

    def text(self) -> str:
        return f"{self.ref} ({self.what})" if self.what else self.ref


@attrs.frozen(slots=True)
class RuleEvidence:
    """Why one allow entry (direction, peer, protocol, port[, L7]) exists."""

    key: str
    direction: str
    peer: PeerRecord
    port: str
    protocol: str
    l7: L7Record | None = None
    flow_count: int = 0
    first_seen: str = ZERO_TIME
    last_seen: str = ZERO_TIME
    contributing_sessions: tuple[str, ...] = ()
    samples: tuple[SampleFlow, ...] = ()
    classes: dict[str, int] = attrs.field(factory=dict, hash=False)
    """Flows by candidate class (``policy``, ``audit``, ``unknown``)."""
    by_session: dict[str, dict[str, int]] = attrs.field(factory=dict, hash=False)
    """What each replay session identified by its inputs added (flows by class), so that
    replaying those inputs again replaces it instead of adding to it. Live sessions and
    unidentified inputs (stdin, URLs) add without an entry here."""
    declared_by: tuple[DeclaredBy, ...] = ()
    """The cluster objects that declare this entry (sorted; empty for traffic only a flow
    asked for): a rule kept open for what the cluster says it depends on."""


@attrs.frozen(slots=True)
class SessionSource:
    """Where a session's flows came from: a replayed file or a live relay."""

    type: str
    """``replay`` or ``live``."""
    file: str = ""
    server: str = ""


@attrs.frozen(slots=True)
class InputDigest:
    """One input a replay read, identified by its content: the sha256 of its first ``bytes``
    bytes (the raw file, compressed or not)."""

    name: str
    bytes: int
    sha256: str


@attrs.frozen(slots=True)
class SessionInfo:
    """One run that contributed evidence. Times are passed in: cpg_core reads no clock."""

    id: str
    started_at: str
    ended_at: str
    cpg_version: str
    source: SessionSource
    flows_ingested: int = 0
    flows_unhandled: int = 0
    """Flows of the session that produced no rule (not a drop, replies, infra, unresolvable…)."""
    inputs: tuple[InputDigest, ...] = ()
    """For a replay of local files: what it read. Empty for live sessions and for replays of
    stdin or URLs (their evidence adds on every run)."""


@attrs.frozen(slots=True)
class PolicyIdentity:
    name: str = ""
    namespace: str = ""
    workload: str = ""


@attrs.frozen(slots=True, kw_only=True)
class PolicyEvidence:
    """One policy's evidence file."""

    schema_version: int = EVIDENCE_SCHEMA_VERSION
    policy: PolicyIdentity
    sessions: tuple[SessionInfo, ...] = ()
    rules: tuple[RuleEvidence, ...] = ()
    subjects: tuple[dict[str, str], ...] = attrs.field(default=(), hash=False)
    """The label sets of the pods the rules were made for (from the samples), so ``cpg
    drift`` can tell when the selector reaches pods nobody saw when the policy was made."""


# --- cluster health --------------------------------------------------------------------------


@attrs.frozen(slots=True)
class DropRecord:
    """One infrastructure or transient drop reason: how often, where, to whom."""

    reason: str
    drop_class: str
    """``infra`` or ``transient`` (``class`` on the wire)."""
    count: int
    remediation: str = ""
    by_node: dict[str, int] = attrs.field(factory=dict, hash=False)
    by_workload: dict[str, int] = attrs.field(factory=dict, hash=False)


@attrs.frozen(slots=True)
class Finding:
    """Traffic that got no allow rule, on purpose (explicit deny…) or because none fits."""

    kind: str
    subject: str
    count: int
    policies: tuple[str, ...] = ()
    examples: tuple[SampleFlow, ...] = ()

    def advice(self) -> tuple[str, str, str]:
        """(label, what happened, fix) in plain words, for people."""
        from cpg_core._base.advice import advice_for

        return advice_for(self.kind, self.subject, self.policies)


@attrs.frozen(slots=True)
class HealthSessionRecord:
    started: str
    ended: str
    flows_seen: int
    infra_drops_total: int


@attrs.frozen(slots=True)
class CaptureWindow:
    first_flow: str | None = None
    last_flow: str | None = None


@attrs.frozen(slots=True)
class SkippedFlows:
    replies: int = 0
    not_a_drop: int = 0


@attrs.frozen(slots=True, kw_only=True)
class ClusterHealth:
    """cluster-health.json: the Go tool's schema v1 fields, then this project's additions."""

    schema_version: int = HEALTH_SCHEMA_VERSION
    classifier_version: str
    session: HealthSessionRecord
    drops: tuple[DropRecord, ...] = ()
    noise: dict[str, int] = attrs.field(factory=dict, hash=False)
    findings: tuple[Finding, ...] = ()
    lost_events: int = 0
    window: CaptureWindow = CaptureWindow()
    skipped: SkippedFlows = SkippedFlows()

    @property
    def has_anything_to_report(self) -> bool:
        """Whether the file is worth writing: drops, findings, noise or lost events."""
        return bool(self.drops or self.findings or self.noise or self.lost_events)


# --- query results -----------------------------------------------------------------------------


@attrs.frozen(slots=True)
class ExplainResult:
    """``cpg explain --json`` and the MCP ``get_evidence`` record."""

    policy: PolicyIdentity
    sessions: tuple[SessionInfo, ...]
    matched_rules: tuple[RuleEvidence, ...]


@attrs.frozen(slots=True)
class DroppedFlowSample:
    """A sampled flow behind a rule (a drop a policy can fix)."""

    namespace: str
    workload: str
    direction: str
    peer: PeerRecord
    port: str
    protocol: str
    time: str
    src: SampleSide
    dst: SampleSide
    verdict: str
    drop_reason: str = ""


@attrs.frozen(slots=True)
class DroppedFlowCount:
    """Infrastructure or transient drops of one workload and reason (no policy fixes them)."""

    namespace: str
    workload: str
    reason: str
    drop_class: str
    count: int


DroppedFlowRow = DroppedFlowSample | DroppedFlowCount


@attrs.frozen(slots=True)
class VerifyCheck:
    """One distinct kind of flow, how often it occurred, and whether the policies admit it."""

    kind: Literal["candidate", "explicit_deny"]
    traffic: str
    flows: int
    allowed: bool
    reason: str
    evidence: str = ""
    """For an admitted candidate, what cpg's evidence holds for the rule that admits it."""


@attrs.frozen(slots=True)
class AdmittedCount:
    total: int = 0
    admitted: int = 0


@attrs.frozen(slots=True)
class VerifyReport:
    """Do these policies admit every candidate flow, and no explicitly denied one?"""

    checks: tuple[VerifyCheck, ...] = ()
    unexpressible: int = 0
    """Candidates no rule can express (unselectable…): reported by replay, not checked."""
    system: int = 0
    """Candidates of workloads in the system namespaces the policies do not admit: replay
    leaves those rules to the user by default (§D47), so they are reported, not misses."""
    declared: tuple[str, ...] = ()
    """Dependencies the cluster's objects declare that the policies deny (CPG045, with the
    declaring object): a verify given the objects fails on each (§D58)."""

    def _count(self, kind: str) -> AdmittedCount:
        picked = [c for c in self.checks if c.kind == kind]
        return AdmittedCount(
            sum(c.flows for c in picked), sum(c.flows for c in picked if c.allowed)
        )

    @property
    def candidates(self) -> AdmittedCount:
        return self._count("candidate")

    @property
    def explicit_deny(self) -> AdmittedCount:
        return self._count("explicit_deny")

    @property
    def can_judge(self) -> bool:
        """Whether any flow (or declared dependency) was checked: with none, "passed" would
        say nothing (an empty capture, or one whose flows have no direction)."""
        return bool(self.checks or self.declared or self.system)

    @property
    def passed(self) -> bool:
        candidates = self.candidates
        admitted = candidates.admitted == candidates.total
        clean = admitted and self.explicit_deny.admitted == 0 and not self.declared
        return clean and self.can_judge

    @property
    def verdict(self) -> str:
        if self.passed:
            return "passed"
        return "failed" if self.can_judge else "cannot_judge"

    def summary(self) -> str:
        candidates, denied = self.candidates, self.explicit_deny
        line = (
            f"{candidates.admitted}/{candidates.total} candidate flows admitted, "
            f"{denied.admitted}/{denied.total} explicit-deny flows admitted"
        )
        if self.unexpressible:
            line += f" ({self.unexpressible} candidates no rule can express were not checked)"
        if self.declared:
            line += f", {len(self.declared)} declared dependencies denied"
        if self.system:
            line += (
                f" ({self.system} candidates of system-namespace workloads not admitted: left to "
                "you, as replay leaves their per-peer rules unless told to include them)"
            )
        return line
