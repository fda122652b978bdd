"""The one table of output formats: for each kind of document, the formats it can be rendered
in and the function that renders it. Both roots look formats up here (the CLI's ``-o``
choices, cpg-mcp's get_report), so a new format is one entry and one function."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import yaml

from cpg_core._base.documents import PolicyEvidence
from cpg_core._reports._summary import review_summary
from cpg_core._reports.checks import (
    PlanView,
    VerifyView,
    plan_text,
    verify_text,
)
from cpg_core._reports.drift import DriftView, drift_json, drift_text
from cpg_core._reports.format_names import formats as formats
from cpg_core._reports.html import html_report
from cpg_core._reports.inputs import ReviewInputs
from cpg_core._reports.lint import LintView, lint_json, lint_sarif, lint_text
from cpg_core._reports.markdown import markdown_report
from cpg_core._reports.run import RunReport, run_json, run_text
from cpg_core._reports.why import WhyView, why_text
from cpg_core._review.explain import (
    ExplainFilter,
    explain_lines,
    explain_record,
    render_explain_json,
)
from cpg_core._review.wire import to_data, to_json
from cpg_core.text import json_text


@attrs.frozen(slots=True, kw_only=True)
class ExplainView:
    """A policy's evidence, filtered as the user asked, and where it was read from."""

    evidence: PolicyEvidence
    filter: ExplainFilter
    where: str = ""


def _explain_text(view: ExplainView) -> str:
    return "\n".join(text for _style, text in explain_lines(view.evidence, view.filter, view.where))


def _explain_json(view: ExplainView) -> str:
    return render_explain_json(view.evidence, view.filter)


def _explain_yaml(view: ExplainView) -> str:
    record = to_data(explain_record(view.evidence, view.filter))
    return str(yaml.safe_dump(record, sort_keys=False, allow_unicode=True))


@attrs.frozen(slots=True, kw_only=True)
class Review:
    """A review report to render: a policy folder as read, under a title."""

    title: str
    inputs: ReviewInputs
    max_size: int = 0
    """Characters the Markdown report stays under (0: no limit); the other formats are whole."""
    full_report: str = ""
    """Where the whole report is, for the note a cut Markdown report ends with."""


def _review_markdown(review: Review) -> str:
    inputs = review.inputs
    return markdown_report(
        title=review.title,
        policies=inputs.policies,
        evidence=inputs.evidence,
        health=inputs.health,
        plan=inputs.plan,
        max_size=review.max_size,
        full_report=review.full_report,
        declared=inputs.declared,
        profiles=inputs.profiles(),
    )


def _review_html(review: Review) -> str:
    return html_report(title=review.title, inputs=review.inputs)


def _review_json(review: Review) -> str:
    summary = review_summary(review.title, review.inputs)
    return json.dumps(to_data(summary), indent=2, ensure_ascii=False)


def _plan_json(view: PlanView) -> str:
    return json.dumps(to_data(view.plan), indent=2, ensure_ascii=False)


def _verify_json(view: VerifyView) -> str:
    return to_json(view.report)


def _why_json(view: WhyView) -> str:
    data = {
        "policies": view.policies,
        "origin": view.origin,
        "selected_flows": view.selected,
        "kinds": max(view.kinds, len(view.answers)),
        "answers": to_data(list(view.answers)),
    }
    return json.dumps(data, indent=2, ensure_ascii=False)


FORMATS: Mapping[str, Mapping[str, Callable[[Any], str]]] = {
    "run": {"text": run_text, "json": run_json},
    "review": {"markdown": _review_markdown, "html": _review_html, "json": _review_json},
    "plan": {"text": plan_text, "json": _plan_json},
    "verify": {"text": verify_text, "json": _verify_json},
    "explain": {"text": _explain_text, "json": _explain_json, "yaml": _explain_yaml},
    "why": {"text": why_text, "json": _why_json},
    "drift": {"text": drift_text, "json": drift_json},
    "lint": {"text": lint_text, "json": lint_json, "sarif": lint_sarif},
}
"""kind of document → format → renderer (document → text)."""

_KINDS: Mapping[type, str] = {
    RunReport: "run",
    Review: "review",
    PlanView: "plan",
    VerifyView: "verify",
    ExplainView: "explain",
    WhyView: "why",
    DriftView: "drift",
    LintView: "lint",
}


def _as_yaml(text: str) -> str:
    """A JSON document as YAML (``-o yaml``): the same data, keys in the same order."""
    return str(yaml.safe_dump(json.loads(text), sort_keys=False, allow_unicode=True))


def render(
    document: RunReport
    | Review
    | PlanView
    | VerifyView
    | ExplainView
    | WhyView
    | DriftView
    | LintView,
    fmt: str,
) -> str:
    """The document in format ``fmt``; ValueError naming the formats it has."""
    kind = _KINDS[type(document)]
    renderer = FORMATS[kind].get(fmt)
    if renderer is None and fmt == "yaml" and "json" in FORMATS[kind]:
        return _as_yaml(json_text(FORMATS[kind]["json"](document)))
    if renderer is None:
        raise ValueError(f"{fmt!r}: a {kind} report is one of {', '.join(formats(kind))}")
    text = renderer(document)
    # a file name's byte that is not UTF-8 is JSON's \udcXX, never a raw byte (a reader fails)
    return json_text(text) if fmt in ("json", "sarif") else text


__all__ = [
    "FORMATS",
    "ExplainView",
    "PlanView",
    "Review",
    "VerifyView",
    "WhyView",
    "formats",
    "render",
]
