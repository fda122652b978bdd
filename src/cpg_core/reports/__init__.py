"""Every rendering of cpg's documents for people and machines, in one place: the review report
(Markdown for a pull request, one self-contained HTML file), its traffic graph, the dropped-flow
view cpg-mcp pages through, and the triage helpers the run summary uses. Pure: documents in,
text out; the adapters read the files and print."""

from cpg_core._decide import DECISION_LABELS
from cpg_core._triage import capped_breakdowns, severity_order, top_entries
from cpg_core.reports._checks import (
    PlanView,
    VerifyView,
    plan_text,
    verify_text,
    would_break_text,
)
from cpg_core.reports._drift import DriftView
from cpg_core.reports._dropped import DroppedFlowFilter, aggregate_rows, compose, flow_samples
from cpg_core.reports._formats import FORMATS, ExplainView, Review, formats, render
from cpg_core.reports._graph import Node, TrafficGraph, traffic_graph
from cpg_core.reports._html import html_report
from cpg_core.reports._inputs import ReviewInputs
from cpg_core.reports._lint import LintView
from cpg_core.reports._markdown import confidence, markdown_report
from cpg_core.reports._run import (
    FileOutcome,
    RunReport,
    WaitingPolicy,
    run_data,
    run_json,
    run_text,
)
from cpg_core.reports._why import WhyView, why_text

__all__ = [
    "DECISION_LABELS",
    "FORMATS",
    "DriftView",
    "DroppedFlowFilter",
    "ExplainView",
    "FileOutcome",
    "LintView",
    "Node",
    "PlanView",
    "Review",
    "ReviewInputs",
    "RunReport",
    "TrafficGraph",
    "VerifyView",
    "WaitingPolicy",
    "WhyView",
    "aggregate_rows",
    "capped_breakdowns",
    "compose",
    "confidence",
    "flow_samples",
    "formats",
    "html_report",
    "markdown_report",
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
