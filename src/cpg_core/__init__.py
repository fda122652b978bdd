"""cpg_core: pure functions and values from Hubble flows to CiliumNetworkPolicy YAML.

No files, sockets, environment, clock, logging or printing: plain values in, plain values out.
The whole pipeline in one call::

    result = cpg_core.generate(capture_lines)   # policies, evidence, cluster health
    result.policies["shop/cart"]                # the YAML text
    cpg_core.to_json(result.evidence["shop/cart"])

Step by step: :class:`CaptureRequest` validates what the user asked for, :class:`FlowParser`
(or :func:`feed_lines`) turns JSON into :class:`Flow` values, an :class:`Aggregator` decides and
counts each flow, its :meth:`~Aggregator.plans` become YAML with :func:`render_or_merge`, and
:func:`plan_evidence` and :meth:`Aggregator.health` give the documents. Every document is a
typed attrs value; :func:`to_data` / :func:`to_json` / :func:`from_data` are its wire form.
cpg's own CLI and MCP server import only from here.
"""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_core._base.documents import (
        ClusterHealth,
        DroppedFlowCount,
        DroppedFlowSample,
        DropRecord,
        ExplainResult,
        Finding,
        InputDigest,
        PolicyEvidence,
        RuleEvidence,
        SampleFlow,
        SessionInfo,
        SessionSource,
        VerifyCheck,
        VerifyReport,
    )
    from cpg_core._base.errors import (
        CpgError,
        FlowParseError,
        Message,
        PolicyMergeError,
        SelectorMismatchError,
        Setting,
    )
    from cpg_core._base.flow import PROTOCOLS, Endpoint, Flow, LostEvents, OtherRecord, Verdict
    from cpg_core._base.request_error import RequestError
    from cpg_core._base.rules import Atom
    from cpg_core._flows.decide import DecideOptions, Decision
    from cpg_core._flows.parse import FlowParser, parse_flow, parse_record
    from cpg_core._flows.synthesis import PolicyTarget
    from cpg_core._policy.equivalence import policies_equivalent
    from cpg_core._policy.matcher import match_flow
    from cpg_core._requests.generate import Generated, generate
    from cpg_core._requests.requests import (
        CaptureRequest,
        ExplainRequest,
        LiveRequest,
        TimeWindow,
        check_target,
    )
    from cpg_core._requests.run_request import (
        CheckRequest,
        EngineChoice,
        EvidencePolicy,
        RunRequest,
    )
    from cpg_core._requests.sessions import ReplayIdentity
    from cpg_core._review.evidence import (
        EvidenceError,
        parse_evidence,
        plan_evidence,
        redact_ips,
        render_evidence,
    )
    from cpg_core._review.explain import ExplainFilter, explain_lines, explain_record
    from cpg_core._review.plan import plan
    from cpg_core._review.plan_documents import CANNOT_JUDGE, CurrentSource, Plan
    from cpg_core._review.verify import verify_flows
    from cpg_core._review.wire import DocumentError, document_schema, from_data, to_data, to_json
    from cpg_core._synthesis.aggregate import (
        AggregateOptions,
        AggregateState,
        Aggregator,
        HeldBack,
        HeldStats,
        PolicyPlan,
        held_back,
        hold_back,
    )
    from cpg_core._synthesis.bootstrap import render_bootstrap
    from cpg_core._synthesis.lines import ReadStats, feed_lines
    from cpg_core._synthesis.merge import render_or_merge
    from cpg_core._synthesis.render import render_policy

_WHERE = {
    "AggregateOptions": "cpg_core._synthesis.aggregate",
    "AggregateState": "cpg_core._synthesis.aggregate",
    "Aggregator": "cpg_core._synthesis.aggregate",
    "Atom": "cpg_core._base.rules",
    "CANNOT_JUDGE": "cpg_core._review.plan_documents",
    "CaptureRequest": "cpg_core._requests.requests",
    "CheckRequest": "cpg_core._requests.run_request",
    "ClusterHealth": "cpg_core._base.documents",
    "CpgError": "cpg_core._base.errors",
    "CurrentSource": "cpg_core._review.plan_documents",
    "DecideOptions": "cpg_core._flows.decide",
    "Decision": "cpg_core._flows.decide",
    "DocumentError": "cpg_core._review.wire",
    "DropRecord": "cpg_core._base.documents",
    "DroppedFlowCount": "cpg_core._base.documents",
    "DroppedFlowSample": "cpg_core._base.documents",
    "Endpoint": "cpg_core._base.flow",
    "EngineChoice": "cpg_core._requests.run_request",
    "EvidenceError": "cpg_core._review.evidence",
    "EvidencePolicy": "cpg_core._requests.run_request",
    "ExplainFilter": "cpg_core._review.explain",
    "ExplainResult": "cpg_core._base.documents",
    "Finding": "cpg_core._base.documents",
    "Flow": "cpg_core._base.flow",
    "FlowParseError": "cpg_core._base.errors",
    "FlowParser": "cpg_core._flows.parse",
    "Generated": "cpg_core._requests.generate",
    "HeldBack": "cpg_core._synthesis.aggregate",
    "HeldStats": "cpg_core._synthesis.aggregate",
    "InputDigest": "cpg_core._base.documents",
    "LiveRequest": "cpg_core._requests.requests",
    "LostEvents": "cpg_core._base.flow",
    "OtherRecord": "cpg_core._base.flow",
    "PROTOCOLS": "cpg_core._base.flow",
    "Plan": "cpg_core._review.plan_documents",
    "PolicyEvidence": "cpg_core._base.documents",
    "PolicyMergeError": "cpg_core._base.errors",
    "PolicyPlan": "cpg_core._synthesis.aggregate",
    "PolicyTarget": "cpg_core._flows.synthesis",
    "ReadStats": "cpg_core._synthesis.lines",
    "ReplayIdentity": "cpg_core._requests.sessions",
    "RequestError": "cpg_core._base.request_error",
    "RuleEvidence": "cpg_core._base.documents",
    "RunRequest": "cpg_core._requests.run_request",
    "SampleFlow": "cpg_core._base.documents",
    "SelectorMismatchError": "cpg_core._base.errors",
    "SessionInfo": "cpg_core._base.documents",
    "SessionSource": "cpg_core._base.documents",
    "Setting": "cpg_core._base.errors",
    "Message": "cpg_core._base.errors",
    "TimeWindow": "cpg_core._requests.requests",
    "ExplainRequest": "cpg_core._requests.requests",
    "Verdict": "cpg_core._base.flow",
    "VerifyCheck": "cpg_core._base.documents",
    "VerifyReport": "cpg_core._base.documents",
    "check_target": "cpg_core._requests.requests",
    "document_schema": "cpg_core._review.wire",
    "explain_lines": "cpg_core._review.explain",
    "explain_record": "cpg_core._review.explain",
    "feed_lines": "cpg_core._synthesis.lines",
    "from_data": "cpg_core._review.wire",
    "generate": "cpg_core._requests.generate",
    "held_back": "cpg_core._synthesis.aggregate",
    "hold_back": "cpg_core._synthesis.aggregate",
    "match_flow": "cpg_core._policy.matcher",
    "parse_evidence": "cpg_core._review.evidence",
    "parse_flow": "cpg_core._flows.parse",
    "parse_record": "cpg_core._flows.parse",
    "plan": "cpg_core._review.plan",
    "plan_evidence": "cpg_core._review.evidence",
    "policies_equivalent": "cpg_core._policy.equivalence",
    "redact_ips": "cpg_core._review.evidence",
    "render_bootstrap": "cpg_core._synthesis.bootstrap",
    "render_evidence": "cpg_core._review.evidence",
    "render_or_merge": "cpg_core._synthesis.merge",
    "render_policy": "cpg_core._synthesis.render",
    "to_data": "cpg_core._review.wire",
    "to_json": "cpg_core._review.wire",
    "verify_flows": "cpg_core._review.verify",
}
__getattr__ = lazy_face(__name__, _WHERE)

__all__ = [
    "CANNOT_JUDGE",
    "PROTOCOLS",
    "AggregateOptions",
    "AggregateState",
    "Aggregator",
    "Atom",
    "CaptureRequest",
    "CheckRequest",
    "ClusterHealth",
    "CpgError",
    "CurrentSource",
    "DecideOptions",
    "Decision",
    "DocumentError",
    "DropRecord",
    "DroppedFlowCount",
    "DroppedFlowSample",
    "Endpoint",
    "EngineChoice",
    "EvidenceError",
    "EvidencePolicy",
    "ExplainFilter",
    "ExplainRequest",
    "ExplainResult",
    "Finding",
    "Flow",
    "FlowParseError",
    "FlowParser",
    "Generated",
    "HeldBack",
    "HeldStats",
    "InputDigest",
    "LiveRequest",
    "LostEvents",
    "Message",
    "OtherRecord",
    "Plan",
    "PolicyEvidence",
    "PolicyMergeError",
    "PolicyPlan",
    "PolicyTarget",
    "ReadStats",
    "ReplayIdentity",
    "RequestError",
    "RuleEvidence",
    "RunRequest",
    "SampleFlow",
    "SelectorMismatchError",
    "SessionInfo",
    "SessionSource",
    "Setting",
    "TimeWindow",
    "Verdict",
    "VerifyCheck",
    "VerifyReport",
    "check_target",
    "document_schema",
    "explain_lines",
    "explain_record",
    "feed_lines",
    "from_data",
    "generate",
    "held_back",
    "hold_back",
    "match_flow",
    "parse_evidence",
    "parse_flow",
    "parse_record",
    "plan",
    "plan_evidence",
    "policies_equivalent",
    "redact_ips",
    "render_bootstrap",
    "render_evidence",
    "render_or_merge",
    "render_policy",
    "to_data",
    "to_json",
    "verify_flows",
]
