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

from cpg_core.aggregate import AggregateOptions, AggregateState, Aggregator, PolicyPlan
from cpg_core.bootstrap import render_bootstrap
from cpg_core.decide import DecideOptions, Decision
from cpg_core.documents import (
    ClusterHealth,
    DroppedFlowCount,
    DroppedFlowSample,
    DropRecord,
    ExplainResult,
    Finding,
    PolicyEvidence,
    RuleEvidence,
    SampleFlow,
    SessionInfo,
    SessionSource,
    VerifyCheck,
    VerifyReport,
)
from cpg_core.equivalence import policies_equivalent
from cpg_core.errors import (
    CpgError,
    FlowParseError,
    PolicyMergeError,
    SelectorMismatchError,
    Setting,
)
from cpg_core.evidence import EvidenceError, parse_evidence, plan_evidence, render_evidence
from cpg_core.explain import ExplainFilter, explain_lines, explain_record, render_explain_json
from cpg_core.flow import Endpoint, Flow, LostEvents, OtherRecord, Verdict
from cpg_core.generate import Generated, generate
from cpg_core.lines import ReadStats, feed_lines
from cpg_core.matcher import match_flow
from cpg_core.merge import render_or_merge
from cpg_core.parse import FlowParser, parse_flow, parse_record
from cpg_core.render import render_policy
from cpg_core.requests import (
    PROTOCOLS,
    CaptureRequest,
    LiveRequest,
    RequestError,
    check_target,
    explain_filter,
)
from cpg_core.verify import verify_flows
from cpg_core.wire import DocumentError, from_data, to_data, to_json

__all__ = [
    "PROTOCOLS",
    "AggregateOptions",
    "AggregateState",
    "Aggregator",
    "CaptureRequest",
    "ClusterHealth",
    "CpgError",
    "DecideOptions",
    "Decision",
    "DocumentError",
    "DropRecord",
    "DroppedFlowCount",
    "DroppedFlowSample",
    "Endpoint",
    "EvidenceError",
    "ExplainFilter",
    "ExplainResult",
    "Finding",
    "Flow",
    "FlowParseError",
    "FlowParser",
    "Generated",
    "LiveRequest",
    "LostEvents",
    "OtherRecord",
    "PolicyEvidence",
    "PolicyMergeError",
    "PolicyPlan",
    "ReadStats",
    "RequestError",
    "RuleEvidence",
    "SampleFlow",
    "SelectorMismatchError",
    "SessionInfo",
    "SessionSource",
    "Setting",
    "Verdict",
    "VerifyCheck",
    "VerifyReport",
    "check_target",
    "explain_filter",
    "explain_lines",
    "explain_record",
    "feed_lines",
    "from_data",
    "generate",
    "match_flow",
    "parse_evidence",
    "parse_flow",
    "parse_record",
    "plan_evidence",
    "policies_equivalent",
    "render_bootstrap",
    "render_evidence",
    "render_explain_json",
    "render_or_merge",
    "render_policy",
    "to_data",
    "to_json",
    "verify_flows",
]
