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
    ExplainResult,
    Plan,
    document_schema,
)
from cpg_core import DroppedFlowSample as SampleDocument
from cpg_core.why import Why


def _field_of(cls: Any, name: str) -> Any:
    """One field of a document in its wire form, described by the document's own schema."""
    return Annotated[Any, WithJsonSchema(document_schema(cls)["properties"][name])]


WhyDocument = Annotated[dict[str, Any], WithJsonSchema(document_schema(Why))]

HealthDocument = Annotated[dict[str, Any], WithJsonSchema(document_schema(ClusterHealth))]
CountRow = Annotated[dict[str, Any], WithJsonSchema(document_schema(DroppedFlowCount))]


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
    cluster_health_path: str
    tmp_dir: str


class PolicyRow(BaseModel):
    namespace: str
    workload: str
    name: str
    directions: list[str]
    ingress_rule_count: int
    egress_rule_count: int
    path: str


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
    path: str
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


class BootstrapResult(BaseModel):
    namespace: str
    yaml: str = Field(description="the full CiliumNetworkPolicy YAML document")
    cluster_version: str | None = Field(
        default=None, description="the oldest Cilium agent version in the cluster"
    )
    version_source: Literal["pod-images", "undetermined"] = "undetermined"
    cilium_versions_seen: dict[str, int] | None = None
    version_warning: str | None = None


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
    would_break: _field_of(Plan, "would_break") = Field(  # type: ignore[valid-type]
        description="this page of the traffic that works today and would break, most flows "
        "first, each with why, the selector that captures the endpoint and a fix"
    )
    newly_enforced: _field_of(Plan, "newly_enforced")  # type: ignore[valid-type]
    diffs: _field_of(Plan, "diffs") = Field(  # type: ignore[valid-type]
        description="per proposed policy, entries added/removed"
    )
    policies: _field_of(Plan, "policies")  # type: ignore[valid-type]
    policy_map: _field_of(Plan, "policy_map") = Field(  # type: ignore[valid-type]
        default_factory=list,
        description="pods whose estimated policy map entries reach 80 % of policy_map_max "
        "(over it: the agent cannot apply the policies), fullest first, with the rules that "
        "add the most entries and what would cut them",
    )
    policy_map_max: int = Field(default=16_384, description="the bpf-policy-map-max judged against")
    so_far: bool | None = Field(
        default=None,
        description="true while a shadow session runs: the plan of the flows received so far; "
        "final after stop_session",
    )
    total_count: int = Field(description="would-break items across all pages")
    has_more: bool
    next_cursor: str | None = None


class ReportResult(BaseModel):
    markdown: str = Field(
        description="the review report as Markdown (summary, Mermaid graph of the allowed "
        "traffic, rules with flows and confidence, findings and infra drops with fixes)"
    )


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
    total_count: int
    has_more: bool
    next_cursor: str | None = None
