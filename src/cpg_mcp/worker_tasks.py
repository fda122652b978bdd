"""What the heavy lane's worker processes run (``cpg_mcp.workers``): each task takes plain
values (a request, paths, filters) and returns plain values, so it crosses a process
boundary both ways. The forkserver imports this module once, and with it the run layer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cpg_core import CheckRequest, CpgError, Plan, to_data
from cpg_core.reports import markdown_sections
from cpg_core.text import clean
from cpg_core.why import FlowFilter
from cpg_io.declarations import read_declarations
from cpg_io.errors import IoError
from cpg_io.evidence_store import EvidenceStore
from cpg_io.runs import plan_run, read_review, trace_run, why_run
from cpg_mcp.words import in_tool_words

WhyAnswers = tuple[str, int, list[Any], int]
"""(origin, flows selected, each answer's wire form, distinct flows left unanswered)."""


def worded(exc: BaseException) -> str:
    """The agent's words for a failure the run layer names (a file, a setting), else ""."""
    if isinstance(exc, IoError | CpgError):
        return in_tool_words(exc)
    return ""


def plan(request: CheckRequest, evidence: EvidenceStore, kube_dir: Path | None) -> Plan:
    return plan_run(request, evidence=evidence, kube_dir=kube_dir).view.plan


def why(
    request: CheckRequest,
    selection: FlowFilter,
    kube_dir: Path | None,
    answer_seconds: float | None = None,
    evidence: EvidenceStore | None = None,
) -> WhyAnswers:
    return _answers(
        why_run(
            request,
            selection,
            kube_dir=kube_dir,
            answer_seconds=answer_seconds,
            evidence=evidence,
        )
    )


def trace(
    request: CheckRequest, flows: Any, kube_dir: Path | None, evidence: EvidenceStore | None = None
) -> WhyAnswers:
    return _answers(trace_run(request, flows, kube_dir=kube_dir, evidence=evidence))


ReportSections = tuple[list[str], list[tuple[str, list[list[str]]]]]
"""The Markdown report's head and its sections of blocks (``markdown_sections``)."""


def report(
    policies: Path, evidence: EvidenceStore, title: str, declarations: tuple[str, ...] = ()
) -> ReportSections:
    declared = read_declarations(declarations) if declarations else None
    inputs = read_review(policies, evidence, None, None, declared)
    head, sections = markdown_sections(
        title=title,
        policies=inputs.policies,
        evidence=inputs.evidence,
        health=inputs.health,
        plan=inputs.plan,
        declared=inputs.declared,
        profiles=inputs.profiles(),
    )
    tidy = [str(clean(line, keep_newlines=True)) for line in head]
    return tidy, [
        (name, [[str(clean(line, keep_newlines=True)) for line in block] for block in blocks])
        for name, blocks in sections
    ]


def _answers(answered: Any) -> WhyAnswers:
    view = answered.view
    return (
        f"{view.origin}",
        view.selected,
        [to_data(why) for why in view.answers],
        view.unanswered,
    )
