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

if TYPE_CHECKING:  # each name as itself: an explicit re-export for type checkers
    from cpg_core._base.documents import (
        ClusterHealth as ClusterHealth,
        DroppedFlowCount as DroppedFlowCount,
        DroppedFlowSample as DroppedFlowSample,
        DropRecord as DropRecord,
        ExplainResult as ExplainResult,
        Finding as Finding,
        InputDigest as InputDigest,
        PolicyEvidence as PolicyEvidence,
        RuleEvidence as RuleEvidence,
        SampleFlow as SampleFlow,
        SessionInfo as SessionInfo,
        SessionSource as SessionSource,
        VerifyCheck as VerifyCheck,
        VerifyReport as VerifyReport,
    )
    from cpg_core._base.errors import (
        CpgError as CpgError,
        FlowParseError as FlowParseError,
        Message as Message,
        PolicyMergeError as PolicyMergeError,
        SelectorMismatchError as SelectorMismatchError,
        Setting as Setting,
    )
    from cpg_core._base.flow import (
        PROTOCOLS as PROTOCOLS,
        Endpoint as Endpoint,
        Flow as Flow,
        LostEvents as LostEvents,
        OtherRecord as OtherRecord,
        Verdict as Verdict,
    )
    from cpg_core._base.request_error import RequestError as RequestError
    from cpg_core._base.rules import Atom as Atom
    from cpg_core._flows.decide import DecideOptions as DecideOptions, Decision as Decision
    from cpg_core._flows.parse import (
        FlowParser as FlowParser,
        parse_flow as parse_flow,
        parse_record as parse_record,
    )
    from cpg_core._flows.synthesis import PolicyTarget as PolicyTarget
    from cpg_core._policy.equivalence import policies_equivalent as policies_equivalent
    from cpg_core._policy.matcher import match_flow as match_flow
    from cpg_core._requests.generate import Generated as Generated, generate as generate
    from cpg_core._requests.requests import (
        CaptureRequest as CaptureRequest,
        ExplainRequest as ExplainRequest,
        LiveRequest as LiveRequest,
        TimeWindow as TimeWindow,
        check_target as check_target,
    )
    from cpg_core._requests.run_request import (
        CheckRequest as CheckRequest,
        EngineChoice as EngineChoice,
        EvidencePolicy as EvidencePolicy,
        RunRequest as RunRequest,
    )
    from cpg_core._requests.sessions import ReplayIdentity as ReplayIdentity
    from cpg_core._review.evidence import (
        EvidenceError as EvidenceError,
        parse_evidence as parse_evidence,
        plan_evidence as plan_evidence,
        redact_ips as redact_ips,
        render_evidence as render_evidence,
    )
    from cpg_core._review.explain import (
        ExplainFilter as ExplainFilter,
        explain_lines as explain_lines,
        explain_record as explain_record,
    )
    from cpg_core._review.plan import plan as plan
    from cpg_core._review.plan_documents import (
        CANNOT_JUDGE as CANNOT_JUDGE,
        CurrentSource as CurrentSource,
        Plan as Plan,
    )
    from cpg_core._review.verify import verify_flows as verify_flows
    from cpg_core._review.wire import (
        DocumentError as DocumentError,
        document_schema as document_schema,
        from_data as from_data,
        to_data as to_data,
        to_json as to_json,
    )
    from cpg_core._synthesis.aggregate import (
        AggregateOptions as AggregateOptions,
        AggregateState as AggregateState,
        Aggregator as Aggregator,
        HeldBack as HeldBack,
        HeldStats as HeldStats,
        PolicyPlan as PolicyPlan,
        held_back as held_back,
        hold_back as hold_back,
    )
    from cpg_core._synthesis.bootstrap import render_bootstrap as render_bootstrap
    from cpg_core._synthesis.lines import ReadStats as ReadStats, feed_lines as feed_lines
    from cpg_core._synthesis.merge import render_or_merge as render_or_merge
    from cpg_core._synthesis.render import render_policy as render_policy

_WHERE = {
    "cpg_core._base.documents": (
        "ClusterHealth DroppedFlowCount DroppedFlowSample DropRecord ExplainResult Finding "
        "InputDigest PolicyEvidence RuleEvidence SampleFlow SessionInfo SessionSource VerifyCheck "
        "VerifyReport"
    ),
    "cpg_core._base.errors": (
        "CpgError FlowParseError Message PolicyMergeError SelectorMismatchError Setting"
    ),
    "cpg_core._base.flow": "PROTOCOLS Endpoint Flow LostEvents OtherRecord Verdict",
    "cpg_core._base.request_error": "RequestError",
    "cpg_core._base.rules": "Atom",
    "cpg_core._flows.decide": "DecideOptions Decision",
    "cpg_core._flows.parse": "FlowParser parse_flow parse_record",
    "cpg_core._flows.synthesis": "PolicyTarget",
    "cpg_core._policy.equivalence": "policies_equivalent",
    "cpg_core._policy.matcher": "match_flow",
    "cpg_core._requests.generate": "Generated generate",
    "cpg_core._requests.requests": (
        "CaptureRequest ExplainRequest LiveRequest TimeWindow check_target"
    ),
    "cpg_core._requests.run_request": "CheckRequest EngineChoice EvidencePolicy RunRequest",
    "cpg_core._requests.sessions": "ReplayIdentity",
    "cpg_core._review.evidence": (
        "EvidenceError parse_evidence plan_evidence redact_ips render_evidence"
    ),
    "cpg_core._review.explain": "ExplainFilter explain_lines explain_record",
    "cpg_core._review.plan": "plan",
    "cpg_core._review.plan_documents": "CANNOT_JUDGE CurrentSource Plan",
    "cpg_core._review.verify": "verify_flows",
    "cpg_core._review.wire": "DocumentError document_schema from_data to_data to_json",
    "cpg_core._synthesis.aggregate": (
        "AggregateOptions AggregateState Aggregator HeldBack HeldStats PolicyPlan held_back "
        "hold_back"
    ),
    "cpg_core._synthesis.bootstrap": "render_bootstrap",
    "cpg_core._synthesis.lines": "ReadStats feed_lines",
    "cpg_core._synthesis.merge": "render_or_merge",
    "cpg_core._synthesis.render": "render_policy",
}
__getattr__, __all__ = lazy_face(__name__, _WHERE)
