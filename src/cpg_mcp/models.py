"""The tools' results as pydantic models: the MCP SDK derives each tool's output schema from
them. Documents inside come from cpg_core's one converter (``cpg_core.to_data``) as they are,
and their schema is the document's own (``cpg_core.document_schema``), so an agent sees what
each one holds."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, WithJsonSchema

from cpg_core import (
    ClusterHealth,
    DroppedFlowCount,
    DroppedFlowSample as SampleDocument,
    ExplainResult,
    Plan,
    document_schema,
)
from cpg_core.reports import Rollout
from cpg_core.why import Why


def _field_of(cls: Any, name: str) -> Any:
    """One field of a document in its wire form, described by the document's own schema."""
    return Annotated[Any, WithJsonSchema(document_schema(cls)["properties"][name])]


WhyDocument = Annotated[dict[str, Any], WithJsonSchema(document_schema(Why))]

HealthDocument = Annotated[dict[str, Any], WithJsonSchema(document_schema(ClusterHealth))]
CountRow = Annotated[dict[str, Any], WithJsonSchema(document_schema(DroppedFlowCount))]


CaptureSoFar = Annotated[
    str | None,
    Field(
        description="how long and how wide the capture is so far: its span and times, flows, "
        "the protocols of its rules, namespaces, nodes and gaps without a flow (a short or "
        "one-protocol capture makes policies that break what it did not hold)"
    ),
]
ReadinessLine = Annotated[
    str | None,
    Field(
        description="'N of M workloads ready to enforce'; get_plan's readiness section says "
        "why each other one should keep learning"
    ),
]
"""What a session's status and stop say of the capture and of readiness (one wording)."""


class StartResult(BaseModel):
    session_id: str
    discarded_session: str | None = None
    server: str | None = Field(
        default=None, description="the Hubble Relay a live session reads (with a port-forward)"
    )
    replay_file: str | None = Field(
        default=None, description="the capture file a replay session reads"
    )


class StatusResult(BaseModel):
    session_id: str
    state: Literal["capturing", "stopped"]
    elapsed: str
    flows_seen: int | None = Field(
        default=None,
        description="flows received so far (live) or read (a finished replay); absent while "
        "a replay is still reading",
    )
    policy_file_count: int
    evidence_file_count: int
    tmp_dir: str
    error: str | None = None
    capture: CaptureSoFar = None
    readiness: ReadinessLine = None


class StopResult(BaseModel):
    session_id: str
    state: Literal["stopped"] = "stopped"
    error: str | None = None
    already_stopped: bool
    duration: str
    flows_seen: int
    policies_written: int
    policies_skipped: int
    policies_failed: int
    lost_events: int
    l7_record_count: int
    audit_verdict_count: int
    infra_drop_total: int
    infra_drops_by_reason: dict[str, int]
    cluster_health_path: str = Field(description="relative to tmp_dir")
    tmp_dir: str = Field(
        description="the session's folder on the server's host (temporary: it goes with the "
        "session); the paths results give are relative to it"
    )
    capture: CaptureSoFar = None
    readiness: ReadinessLine = None


class PolicyRow(BaseModel):
    namespace: str
    workload: str
    name: str
    directions: list[str]
    ingress_rule_count: int
    egress_rule_count: int
    path: str = Field(
        description="the file, relative to the session's folder (tmp_dir): get_policy reads it"
    )


class PolicyList(BaseModel):
    policies: list[PolicyRow]
    total_count: int
    has_more: bool
    next_cursor: str | None = None


class Endpoint(BaseModel):
    namespace: str | None = None
    workload: str | None = None
    pod: str | None = None
    ip: str | None = None


class DroppedFlowSample(BaseModel):
    namespace: str
    workload: str
    direction: str
    peer: _field_of(SampleDocument, "peer")  # type: ignore[valid-type]
    port: str
    protocol: str
    time: str
    src: Endpoint
    dst: Endpoint
    verdict: str
    drop_reason: str | None = None


class Aggregates(BaseModel):
    available_after_stop: bool | None = Field(
        default=None, description="true while a replay runs: no counts until it ends"
    )
    so_far: bool | None = Field(
        default=None,
        description="true while a live capture runs: the rows count the flows received so "
        "far and grow until stop_session",
    )
    message: str | None = None
    rows: list[CountRow] | None = Field(
        default=None,
        description="per-(namespace, workload, reason) infra/transient counts; absent while "
        "a replay runs or when no row on this page matches",
    )


class DroppedFlows(BaseModel):
    samples: list[DroppedFlowSample]
    aggregates: Aggregates
    total_count: int = Field(
        description="items (samples + aggregate rows) in this filtered view across all pages; "
        "not a flow total (see stop_session flows_seen)"
    )
    has_more: bool
    next_cursor: str | None = None


class PolicyResult(BaseModel):
    namespace: str
    workload: str
    name: str
    yaml: str
    path: str = Field(description="the file, relative to the session's folder (tmp_dir)")
    ingress_rule_count: int
    egress_rule_count: int


class EvidenceResult(BaseModel):
    policy: _field_of(ExplainResult, "policy")  # type: ignore[valid-type]
    sessions: _field_of(ExplainResult, "sessions")  # type: ignore[valid-type]
    matched_rules: _field_of(ExplainResult, "matched_rules")  # type: ignore[valid-type]
    total_count: int
    has_more: bool
    next_cursor: str | None = None


class HealthResult(BaseModel):
    available_after_stop: bool | None = Field(
        default=None, description="true while a replay runs: the report comes when it ends"
    )
    so_far: bool | None = Field(
        default=None,
        description="true while a live capture runs: the report covers the flows received so "
        "far; final after stop_session",
    )
    message: str | None = None
    no_drops: bool | None = None
    report: HealthDocument | None = None
    truncated: bool | None = Field(
        default=None,
        description="true when a by_node/by_workload breakdown was capped at 100 entries "
        "(highest counts kept; each count stays the true total)",
    )
    total_count: int | None = Field(
        default=None, description="findings across all pages (report.findings is this page)"
    )
    has_more: bool | None = None
    next_cursor: str | None = None


class BootstrapResult(BaseModel):
    namespace: str
    yaml: str = Field(description="the full CiliumNetworkPolicy YAML document")
    cluster_version: str | None = Field(
        default=None, description="the oldest Cilium agent version in the cluster"
    )
    version_source: Literal["pod-images", "undetermined"] = "undetermined"
    cilium_versions_seen: dict[str, int] | None = None
    version_warning: str | None = None


PlanSection = Literal[
    "would_break",
    "newly_enforced",
    "availability",
    "not_fixed",
    "diffs",
    "policies",
    "policy_map",
    "also_selected",
    "confidence",
    "readiness",
    "rollout",
    "rollout_waiting",
]
"""The plan's lists, each paged on its own (get_plan's ``section``): the first is what a
reviewer acts on first."""


class PlanResult(BaseModel):
    current_source: str = Field(
        description="where the current policies came from: 'cluster' or 'flows' (inferred)"
    )
    blind_spots: str = Field(description="what that source cannot see")
    candidates: int = Field(description="denied flows cpg can express")
    fixed: int = Field(description="of those, flows the proposed policies admit")
    forwarded_flows: int
    node_flows: int = Field(
        default=0,
        description="forwarded flows from a pod's own node, admitted by Cilium's "
        "allow-localhost: always whatever the policy (never would-break)",
    )
    notes: list[str] = Field(
        default_factory=list, description="the Cilium semantics the plan was judged under"
    )
    verdict: Literal["breaks", "nothing_breaks", "cannot_judge"] = Field(
        description="cannot_judge when the capture has no forwarded traffic to check: then "
        "an empty would_break says nothing (replay a capture with every verdict)"
    )
    message: str | None = Field(default=None, description="why the plan cannot judge")
    would_break_flows: int = Field(description="forwarded flows the proposal would drop")
    section: str = Field(description="the list this page is of (the section argument)")
    totals: dict[str, int] = Field(
        description="how many items each list holds (get_plan with section=NAME pages it)"
    )
    would_break: _field_of(Plan, "would_break") = Field(  # type: ignore[valid-type]
        default=None,
        description="section would_break: traffic that works today and would break, most "
        "flows first, each with why, the selector that captures the endpoint and a fix",
    )
    newly_enforced: _field_of(Plan, "newly_enforced") = Field(  # type: ignore[valid-type]
        default=None, description="section newly_enforced: endpoints policed for the first time"
    )
    availability: _field_of(Plan, "availability") = Field(  # type: ignore[valid-type]
        default=None,
        description="section availability: what the proposal would take from traffic the "
        "capture does not hold (DNS, shared services, new workloads)",
    )
    not_fixed: _field_of(Plan, "not_fixed") = Field(  # type: ignore[valid-type]
        default=None, description="section not_fixed: denied traffic the proposal leaves denied"
    )
    diffs: _field_of(Plan, "diffs") = Field(  # type: ignore[valid-type]
        default=None, description="section diffs: per proposed policy, entries added/removed"
    )
    policies: _field_of(Plan, "policies") = Field(  # type: ignore[valid-type]
        default=None, description="section policies: per proposed policy, what it fixes/breaks"
    )
    policy_map: _field_of(Plan, "policy_map") = Field(  # type: ignore[valid-type]
        default=None,
        description="section policy_map: pods whose estimated policy map entries reach 80 % "
        "of policy_map_max (over it: the agent cannot apply the policies), fullest first",
    )
    also_selected: _field_of(Plan, "also_selected") = Field(  # type: ignore[valid-type]
        default=None,
        description="section also_selected: proposed policies whose pods a person's policy "
        "selects too",
    )
    confidence: _field_of(Plan, "confidence") = Field(  # type: ignore[valid-type]
        default=None, description="section confidence: the traffic behind each proposed rule"
    )
    readiness: _field_of(Plan, "readiness") = Field(  # type: ignore[valid-type]
        default=None,
        description="section readiness: each proposed policy's workload, ready to enforce or "
        "to keep learning (with the reasons: observed too briefly, too few flows, rules still "
        "appearing), those to keep learning first",
    )
    rollout: _field_of(Rollout, "batches") = Field(  # type: ignore[valid-type]
        default=None,
        description="section rollout: the ready workloads' policies in batches to apply one "
        "after another, those nothing else depends on first; each with the shadow run that "
        "checks it and the kubectl command that applies it (cpg applies nothing)",
    )
    rollout_waiting: _field_of(Rollout, "waiting") = Field(  # type: ignore[valid-type]
        default=None,
        description="section rollout_waiting: the workloads left out of the rollout, each with "
        "why (keep learning, would break, tied by a shared policy to one that waits)",
    )
    capture: _field_of(Plan, "capture") = Field(  # type: ignore[valid-type]
        default=None,
        description="how long and how wide the capture judged is: its first and last flow, "
        "span in seconds, flows and protocols",
    )
    policy_map_max: int = Field(default=16_384, description="the bpf-policy-map-max judged against")
    so_far: bool | None = Field(
        default=None,
        description="true while a shadow session runs: the plan of the flows received so far; "
        "final after stop_session",
    )
    total_count: int = Field(description="items of this section across all pages")
    has_more: bool
    next_cursor: str | None = None


class ReportSection(BaseModel):
    name: str = Field(description="get_report's section argument for it")
    blocks: int = Field(description="its whole rows, graphs and headings")
    characters: int


class ReportResult(BaseModel):
    markdown: str = Field(
        description="this page of the review report as Markdown, whole rows and graphs only: "
        "the summary, would-break, newly enforced, findings and infra drops with fixes first, "
        "then coverage, each policy's rules with flows and confidence, and Mermaid graphs"
    )
    section: str | None = Field(
        default=None, description="the section paged (none: the whole report in order)"
    )
    sections: list[ReportSection] = Field(description="every section, and how big it is")
    total_count: int = Field(description="blocks of the section (or report) across all pages")
    has_more: bool
    next_cursor: str | None = None


class WhyResult(BaseModel):
    origin: str = Field(description="where the policies judged came from, and how many")
    selected_flows: int = Field(
        default=0, description="flows of the capture the filters selected (0 for a trace)"
    )
    answers: list[WhyDocument] = Field(
        description="this page of answers, one per kind of flow, most flows first: the drop "
        "as recorded, the policies that police the subject, each near miss with what differs, "
        "deny rules that match, and admit_yaml, the rule that would admit it"
    )
    unanswered_flows: int | None = Field(
        default=None,
        description="distinct flows not answered before the deadline (the most frequent "
        "were answered first): narrow the filters to have them answered",
    )
    message: str | None = None
    total_count: int
    has_more: bool
    next_cursor: str | None = None
