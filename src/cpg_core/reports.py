"""Every rendering of cpg's documents for people and machines, in one place: the review report
(Markdown for a pull request, one self-contained HTML file), its traffic graph, the dropped-flow
view cpg-mcp pages through, and the triage helpers the run summary uses. Pure: documents in,
text out; the adapters read the files and print."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:
    from cpg_core._flows.decide import DECISION_LABELS
    from cpg_core._flows.triage import capped_breakdowns, severity_order, top_entries
    from cpg_core._reports.admission import admission_objects, admission_yaml, guard_notes
    from cpg_core._reports.checks import (
        PlanView,
        VerifyView,
        plan_text,
        verify_text,
        would_break_text,
    )
    from cpg_core._reports.drift import DriftView
    from cpg_core._reports.dropped import DroppedFlowFilter, aggregate_rows, compose, flow_samples
    from cpg_core._reports.format_names import REVIEW_MAX_SIZE, formats
    from cpg_core._reports.formats import FORMATS, ExplainView, Review, render
    from cpg_core._reports.graph import Node, TrafficGraph, traffic_graph
    from cpg_core._reports.html import html_report
    from cpg_core._reports.inputs import (
        ReviewInputs,
        is_shared_name,
    )
    from cpg_core._reports.lint import LintView
    from cpg_core._reports.markdown import (
        confidence,
        markdown_page,
        markdown_report,
        markdown_sections,
    )
    from cpg_core._reports.merge_safety import (
        MergeSafety,
        MergeWait,
        merge_safety,
    )
    from cpg_core._reports.rollout import (
        plan_rollout,
    )
    from cpg_core._reports.run import (
        DeclaredRead,
        FileOutcome,
        RunReport,
        WaitingPolicy,
        run_data,
        run_json,
        run_text,
    )
    from cpg_core._reports.why import WhyView, why_text
    from cpg_core._review.rollout import Rollout

_WHERE = {
    "admission_objects": "cpg_core._reports.admission",
    "admission_yaml": "cpg_core._reports.admission",
    "guard_notes": "cpg_core._reports.admission",
    "DECISION_LABELS": "cpg_core._flows.decide",
    "REVIEW_MAX_SIZE": "cpg_core._reports.format_names",
    "DriftView": "cpg_core._reports.drift",
    "DroppedFlowFilter": "cpg_core._reports.dropped",
    "ExplainView": "cpg_core._reports.formats",
    "FORMATS": "cpg_core._reports.formats",
    "FileOutcome": "cpg_core._reports.run",
    "LintView": "cpg_core._reports.lint",
    "Node": "cpg_core._reports.graph",
    "PlanView": "cpg_core._reports.checks",
    "Review": "cpg_core._reports.formats",
    "ReviewInputs": "cpg_core._reports.inputs",
    "RunReport": "cpg_core._reports.run",
    "TrafficGraph": "cpg_core._reports.graph",
    "VerifyView": "cpg_core._reports.checks",
    "WaitingPolicy": "cpg_core._reports.run",
    "WhyView": "cpg_core._reports.why",
    "aggregate_rows": "cpg_core._reports.dropped",
    "capped_breakdowns": "cpg_core._flows.triage",
    "compose": "cpg_core._reports.dropped",
    "confidence": "cpg_core._reports.markdown",
    "flow_samples": "cpg_core._reports.dropped",
    "formats": "cpg_core._reports.format_names",
    "html_report": "cpg_core._reports.html",
    "markdown_page": "cpg_core._reports.markdown",
    "markdown_report": "cpg_core._reports.markdown",
    "markdown_sections": "cpg_core._reports.markdown",
    "plan_text": "cpg_core._reports.checks",
    "render": "cpg_core._reports.formats",
    "run_data": "cpg_core._reports.run",
    "run_json": "cpg_core._reports.run",
    "run_text": "cpg_core._reports.run",
    "severity_order": "cpg_core._flows.triage",
    "top_entries": "cpg_core._flows.triage",
    "traffic_graph": "cpg_core._reports.graph",
    "verify_text": "cpg_core._reports.checks",
    "why_text": "cpg_core._reports.why",
    "would_break_text": "cpg_core._reports.checks",
    "DeclaredRead": "cpg_core._reports.run",
    "plan_rollout": "cpg_core._reports.rollout",
    "MergeSafety": "cpg_core._reports.merge_safety",
    "MergeWait": "cpg_core._reports.merge_safety",
    "merge_safety": "cpg_core._reports.merge_safety",
    "is_shared_name": "cpg_core._reports.inputs",
    "Rollout": "cpg_core._review.rollout",
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
