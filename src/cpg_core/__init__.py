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

from cpg_core._aggregate import (
    AggregateOptions,
    AggregateState,
    Aggregator,
    HeldBack,
    HeldStats,
    PolicyPlan,
    held_back,
    hold_back,
)
from cpg_core._bootstrap import render_bootstrap
from cpg_core._decide import DecideOptions, Decision
from cpg_core._documents import (
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
from cpg_core._equivalence import policies_equivalent
from cpg_core._errors import (
    CpgError,
    FlowParseError,
    PolicyMergeError,
    SelectorMismatchError,
    Setting,
)
from cpg_core._evidence import (
    EvidenceError,
    parse_evidence,
    plan_evidence,
    redact_ips,
    render_evidence,
)
from cpg_core._explain import ExplainFilter, explain_lines, explain_record
from cpg_core._flow import Endpoint, Flow, LostEvents, OtherRecord, Verdict
from cpg_core._generate import Generated, generate
from cpg_core._lines import ReadStats, feed_lines
from cpg_core._matcher import match_flow
from cpg_core._merge import render_or_merge
from cpg_core._parse import FlowParser, parse_flow, parse_record
from cpg_core._plan import CANNOT_JUDGE, CurrentSource, Plan, plan
from cpg_core._render import render_policy
from cpg_core._request_error import RequestError
from cpg_core._requests import (
    PROTOCOLS,
    CaptureRequest,
    LiveRequest,
    TimeWindow,
    check_target,
    duration_seconds,
    explain_filter,
)
from cpg_core._rules import Atom
from cpg_core._run_request import CheckRequest, EngineChoice, EvidencePolicy, RunRequest
from cpg_core._sessions import ReplayIdentity
from cpg_core._synthesis import PolicyTarget
from cpg_core._verify import verify_flows
from cpg_core._wire import DocumentError, document_schema, from_data, to_data, to_json

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
    "duration_seconds",
    "explain_filter",
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
