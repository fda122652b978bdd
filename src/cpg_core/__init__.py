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
    from cpg_core.base._documents import (
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
    from cpg_core.base._errors import (
        CpgError,
        FlowParseError,
        Message,
        PolicyMergeError,
        SelectorMismatchError,
        Setting,
    )
    from cpg_core.base._flow import PROTOCOLS, Endpoint, Flow, LostEvents, OtherRecord, Verdict
    from cpg_core.base._request_error import RequestError
    from cpg_core.base._rules import Atom
    from cpg_core.flows._decide import DecideOptions, Decision
    from cpg_core.flows._parse import FlowParser, parse_flow, parse_record
    from cpg_core.flows._synthesis import PolicyTarget
    from cpg_core.policy._equivalence import policies_equivalent
    from cpg_core.policy._matcher import match_flow
    from cpg_core.requests._generate import Generated, generate
    from cpg_core.requests._requests import (
        CaptureRequest,
        ExplainRequest,
        LiveRequest,
        TimeWindow,
        check_target,
    )
    from cpg_core.requests._run_request import (
        CheckRequest,
        EngineChoice,
        EvidencePolicy,
        RunRequest,
    )
    from cpg_core.requests._sessions import ReplayIdentity
    from cpg_core.review._evidence import (
        EvidenceError,
        parse_evidence,
        plan_evidence,
        redact_ips,
        render_evidence,
    )
    from cpg_core.review._explain import ExplainFilter, explain_lines, explain_record
    from cpg_core.review._plan import CANNOT_JUDGE, CurrentSource, Plan, plan
    from cpg_core.review._verify import verify_flows
    from cpg_core.review._wire import DocumentError, document_schema, from_data, to_data, to_json
    from cpg_core.synthesis._aggregate import (
        AggregateOptions,
        AggregateState,
        Aggregator,
        HeldBack,
        HeldStats,
        PolicyPlan,
        held_back,
        hold_back,
    )
    from cpg_core.synthesis._bootstrap import render_bootstrap
    from cpg_core.synthesis._lines import ReadStats, feed_lines
    from cpg_core.synthesis._merge import render_or_merge
    from cpg_core.synthesis._render import render_policy

_WHERE = {
    "AggregateOptions": "cpg_core.synthesis._aggregate",
    "AggregateState": "cpg_core.synthesis._aggregate",
    "Aggregator": "cpg_core.synthesis._aggregate",
    "Atom": "cpg_core.base._rules",
    "CANNOT_JUDGE": "cpg_core.review._plan",
    "CaptureRequest": "cpg_core.requests._requests",
    "CheckRequest": "cpg_core.requests._run_request",
    "ClusterHealth": "cpg_core.base._documents",
    "CpgError": "cpg_core.base._errors",
    "CurrentSource": "cpg_core.review._plan",
    "DecideOptions": "cpg_core.flows._decide",
    "Decision": "cpg_core.flows._decide",
    "DocumentError": "cpg_core.review._wire",
    "DropRecord": "cpg_core.base._documents",
    "DroppedFlowCount": "cpg_core.base._documents",
    "DroppedFlowSample": "cpg_core.base._documents",
    "Endpoint": "cpg_core.base._flow",
    "EngineChoice": "cpg_core.requests._run_request",
    "EvidenceError": "cpg_core.review._evidence",
    "EvidencePolicy": "cpg_core.requests._run_request",
    "ExplainFilter": "cpg_core.review._explain",
    "ExplainResult": "cpg_core.base._documents",
    "Finding": "cpg_core.base._documents",
    "Flow": "cpg_core.base._flow",
    "FlowParseError": "cpg_core.base._errors",
    "FlowParser": "cpg_core.flows._parse",
    "Generated": "cpg_core.requests._generate",
    "HeldBack": "cpg_core.synthesis._aggregate",
    "HeldStats": "cpg_core.synthesis._aggregate",
    "InputDigest": "cpg_core.base._documents",
    "LiveRequest": "cpg_core.requests._requests",
    "LostEvents": "cpg_core.base._flow",
    "OtherRecord": "cpg_core.base._flow",
    "PROTOCOLS": "cpg_core.base._flow",
    "Plan": "cpg_core.review._plan",
    "PolicyEvidence": "cpg_core.base._documents",
    "PolicyMergeError": "cpg_core.base._errors",
    "PolicyPlan": "cpg_core.synthesis._aggregate",
    "PolicyTarget": "cpg_core.flows._synthesis",
    "ReadStats": "cpg_core.synthesis._lines",
    "ReplayIdentity": "cpg_core.requests._sessions",
    "RequestError": "cpg_core.base._request_error",
    "RuleEvidence": "cpg_core.base._documents",
    "RunRequest": "cpg_core.requests._run_request",
    "SampleFlow": "cpg_core.base._documents",
    "SelectorMismatchError": "cpg_core.base._errors",
    "SessionInfo": "cpg_core.base._documents",
    "SessionSource": "cpg_core.base._documents",
    "Setting": "cpg_core.base._errors",
    "Message": "cpg_core.base._errors",
    "TimeWindow": "cpg_core.requests._requests",
    "ExplainRequest": "cpg_core.requests._requests",
    "Verdict": "cpg_core.base._flow",
    "VerifyCheck": "cpg_core.base._documents",
    "VerifyReport": "cpg_core.base._documents",
    "check_target": "cpg_core.requests._requests",
    "document_schema": "cpg_core.review._wire",
    "explain_lines": "cpg_core.review._explain",
    "explain_record": "cpg_core.review._explain",
    "feed_lines": "cpg_core.synthesis._lines",
    "from_data": "cpg_core.review._wire",
    "generate": "cpg_core.requests._generate",
    "held_back": "cpg_core.synthesis._aggregate",
    "hold_back": "cpg_core.synthesis._aggregate",
    "match_flow": "cpg_core.policy._matcher",
    "parse_evidence": "cpg_core.review._evidence",
    "parse_flow": "cpg_core.flows._parse",
    "parse_record": "cpg_core.flows._parse",
    "plan": "cpg_core.review._plan",
    "plan_evidence": "cpg_core.review._evidence",
    "policies_equivalent": "cpg_core.policy._equivalence",
    "redact_ips": "cpg_core.review._evidence",
    "render_bootstrap": "cpg_core.synthesis._bootstrap",
    "render_evidence": "cpg_core.review._evidence",
    "render_or_merge": "cpg_core.synthesis._merge",
    "render_policy": "cpg_core.synthesis._render",
    "to_data": "cpg_core.review._wire",
    "to_json": "cpg_core.review._wire",
    "verify_flows": "cpg_core.review._verify",
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
