"""Every rendering of cpg's documents for people and machines, in one place: the review report
(Markdown for a pull request, one self-contained HTML file), its traffic graph, the dropped-flow
view cpg-mcp pages through, and the triage helpers the run summary uses. Pure: documents in,
text out; the adapters read the files and print."""

from typing import TYPE_CHECKING

from cpg_core.lazy import lazy_face

if TYPE_CHECKING:  # each name as itself: an explicit re-export for type checkers
    from cpg_core._flows.decide import DECISION_LABELS as DECISION_LABELS
    from cpg_core._flows.triage import (
        capped_breakdowns as capped_breakdowns,
        severity_order as severity_order,
        top_entries as top_entries,
    )
    from cpg_core._reports.admission import (
        admission_objects as admission_objects,
        admission_yaml as admission_yaml,
        guard_notes as guard_notes,
    )
    from cpg_core._reports.checks import (
        PlanView as PlanView,
        VerifyView as VerifyView,
        plan_text as plan_text,
        verify_text as verify_text,
        would_break_text as would_break_text,
    )
    from cpg_core._reports.drift import DriftView as DriftView
    from cpg_core._reports.dropped import (
        DroppedFlowFilter as DroppedFlowFilter,
        aggregate_rows as aggregate_rows,
        compose as compose,
        flow_samples as flow_samples,
    )
    from cpg_core._reports.format_names import (
        REVIEW_MAX_SIZE as REVIEW_MAX_SIZE,
        formats as formats,
    )
    from cpg_core._reports.formats import (
        FORMATS as FORMATS,
        ExplainView as ExplainView,
        Review as Review,
        render as render,
    )
    from cpg_core._reports.graph import (
        Node as Node,
        TrafficGraph as TrafficGraph,
        traffic_graph as traffic_graph,
    )
    from cpg_core._reports.html import html_report as html_report
    from cpg_core._reports.inputs import (
        ReviewInputs as ReviewInputs,
        is_shared_name as is_shared_name,
    )
    from cpg_core._reports.lint import LintView as LintView
    from cpg_core._reports.markdown import (
        confidence as confidence,
        markdown_page as markdown_page,
        markdown_report as markdown_report,
        markdown_sections as markdown_sections,
    )
    from cpg_core._reports.merge_safety import (
        MergeSafety as MergeSafety,
        MergeWait as MergeWait,
        merge_safety as merge_safety,
    )
    from cpg_core._reports.rollout import plan_rollout as plan_rollout
    from cpg_core._reports.run import (
        DeclaredRead as DeclaredRead,
        FileOutcome as FileOutcome,
        RunReport as RunReport,
        WaitingPolicy as WaitingPolicy,
        run_data as run_data,
        run_json as run_json,
        run_text as run_text,
    )
    from cpg_core._reports.why import WhyView as WhyView, why_text as why_text
    from cpg_core._review.rollout import Rollout as Rollout

_WHERE = {
    "cpg_core._flows.decide": "DECISION_LABELS",
    "cpg_core._flows.triage": "capped_breakdowns severity_order top_entries",
    "cpg_core._reports.admission": "admission_objects admission_yaml guard_notes",
    "cpg_core._reports.checks": "PlanView VerifyView plan_text verify_text would_break_text",
    "cpg_core._reports.drift": "DriftView",
    "cpg_core._reports.dropped": "DroppedFlowFilter aggregate_rows compose flow_samples",
    "cpg_core._reports.format_names": "REVIEW_MAX_SIZE formats",
    "cpg_core._reports.formats": "FORMATS ExplainView Review render",
    "cpg_core._reports.graph": "Node TrafficGraph traffic_graph",
    "cpg_core._reports.html": "html_report",
    "cpg_core._reports.inputs": "ReviewInputs is_shared_name",
    "cpg_core._reports.lint": "LintView",
    "cpg_core._reports.markdown": "confidence markdown_page markdown_report markdown_sections",
    "cpg_core._reports.merge_safety": "MergeSafety MergeWait merge_safety",
    "cpg_core._reports.rollout": "plan_rollout",
    "cpg_core._reports.run": (
        "DeclaredRead FileOutcome RunReport WaitingPolicy run_data run_json run_text"
    ),
    "cpg_core._reports.why": "WhyView why_text",
    "cpg_core._review.rollout": "Rollout",
}
__getattr__, __all__ = lazy_face(__name__, _WHERE)
