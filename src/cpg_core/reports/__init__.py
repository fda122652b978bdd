"""Every rendering of cpg's documents for people and machines, in one place: the review report
(Markdown for a pull request, one self-contained HTML file), its traffic graph, the dropped-flow
view cpg-mcp pages through, and the triage helpers the run summary uses. Pure: documents in,
text out; the adapters read the files and print."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_core.flows import DECISION_LABELS, capped_breakdowns, severity_order, top_entries
    from cpg_core.reports._admission import admission_objects, admission_yaml, guard_notes
    from cpg_core.reports._checks import (
        PlanView,
        VerifyView,
        plan_text,
        verify_text,
        would_break_text,
    )
    from cpg_core.reports._drift import DriftView
    from cpg_core.reports._dropped import DroppedFlowFilter, aggregate_rows, compose, flow_samples
    from cpg_core.reports._format_names import REVIEW_MAX_SIZE, formats
    from cpg_core.reports._formats import FORMATS, ExplainView, Review, render
    from cpg_core.reports._graph import Node, TrafficGraph, traffic_graph
    from cpg_core.reports._html import html_report
    from cpg_core.reports._inputs import (
        ReviewInputs,
        is_shared_name,
    )
    from cpg_core.reports._lint import LintView
    from cpg_core.reports._markdown import (
        confidence,
        markdown_page,
        markdown_report,
        markdown_sections,
    )
    from cpg_core.reports._merge_safety import (
        MergeSafety,
        MergeWait,
        merge_safety,
    )
    from cpg_core.reports._rollout import (
        plan_rollout,
    )
    from cpg_core.reports._run import (
        DeclaredRead,
        FileOutcome,
        RunReport,
        WaitingPolicy,
        run_data,
        run_json,
        run_text,
    )
    from cpg_core.reports._why import WhyView, why_text
    from cpg_core.review import (
        Rollout,
    )

_WHERE = {
    "admission_objects": "cpg_core.reports._admission",
    "admission_yaml": "cpg_core.reports._admission",
    "guard_notes": "cpg_core.reports._admission",
    "DECISION_LABELS": "cpg_core.flows",
    "REVIEW_MAX_SIZE": "cpg_core.reports._format_names",
    "DriftView": "cpg_core.reports._drift",
    "DroppedFlowFilter": "cpg_core.reports._dropped",
    "ExplainView": "cpg_core.reports._formats",
    "FORMATS": "cpg_core.reports._formats",
    "FileOutcome": "cpg_core.reports._run",
    "LintView": "cpg_core.reports._lint",
    "Node": "cpg_core.reports._graph",
    "PlanView": "cpg_core.reports._checks",
    "Review": "cpg_core.reports._formats",
    "ReviewInputs": "cpg_core.reports._inputs",
    "RunReport": "cpg_core.reports._run",
    "TrafficGraph": "cpg_core.reports._graph",
    "VerifyView": "cpg_core.reports._checks",
    "WaitingPolicy": "cpg_core.reports._run",
    "WhyView": "cpg_core.reports._why",
    "aggregate_rows": "cpg_core.reports._dropped",
    "capped_breakdowns": "cpg_core.flows",
    "compose": "cpg_core.reports._dropped",
    "confidence": "cpg_core.reports._markdown",
    "flow_samples": "cpg_core.reports._dropped",
    "formats": "cpg_core.reports._format_names",
    "html_report": "cpg_core.reports._html",
    "markdown_page": "cpg_core.reports._markdown",
    "markdown_report": "cpg_core.reports._markdown",
    "markdown_sections": "cpg_core.reports._markdown",
    "plan_text": "cpg_core.reports._checks",
    "render": "cpg_core.reports._formats",
    "run_data": "cpg_core.reports._run",
    "run_json": "cpg_core.reports._run",
    "run_text": "cpg_core.reports._run",
    "severity_order": "cpg_core.flows",
    "top_entries": "cpg_core.flows",
    "traffic_graph": "cpg_core.reports._graph",
    "verify_text": "cpg_core.reports._checks",
    "why_text": "cpg_core.reports._why",
    "would_break_text": "cpg_core.reports._checks",
    "DeclaredRead": "cpg_core.reports._run",
    "plan_rollout": "cpg_core.reports._rollout",
    "MergeSafety": "cpg_core.reports._merge_safety",
    "MergeWait": "cpg_core.reports._merge_safety",
    "merge_safety": "cpg_core.reports._merge_safety",
    "is_shared_name": "cpg_core.reports._inputs",
    "Rollout": "cpg_core.review",
}
__getattr__ = lazy_face(__name__, _WHERE)

__all__ = [
    "DECISION_LABELS",
    "FORMATS",
    "REVIEW_MAX_SIZE",
    "DeclaredRead",
    "DriftView",
    "DroppedFlowFilter",
    "ExplainView",
    "FileOutcome",
    "LintView",
    "MergeSafety",
    "MergeWait",
    "Node",
    "PlanView",
    "Review",
    "ReviewInputs",
    "Rollout",
    "RunReport",
    "TrafficGraph",
    "VerifyView",
    "WaitingPolicy",
    "WhyView",
    "admission_objects",
    "admission_yaml",
    "aggregate_rows",
    "capped_breakdowns",
    "compose",
    "confidence",
    "flow_samples",
    "formats",
    "guard_notes",
    "html_report",
    "is_shared_name",
    "markdown_page",
    "markdown_report",
    "markdown_sections",
    "merge_safety",
    "plan_rollout",
    "plan_text",
    "render",
    "run_data",
    "run_json",
    "run_text",
    "severity_order",
    "top_entries",
    "traffic_graph",
    "verify_text",
    "why_text",
    "would_break_text",
]
