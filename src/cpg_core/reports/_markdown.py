"""The Markdown report for a pull request: what the policies allow (a Mermaid graph GitHub
draws), why each rule is there (flows, first/last seen, confidence), the findings and infra
drops with their fixes, and what a plan says would break. Same inputs, same bytes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from cpg_core.base import (
    ClusterHealth,
    DropRecord,
    Finding,
    PolicyDocument,
    PolicyEvidence,
    RuleEvidence,
)
from cpg_core.reports._checks import plan_cannot_judge, plan_verdict
from cpg_core.reports._coverage import Coverage, coverage
from cpg_core.reports._graph import TrafficGraph, traffic_graph
from cpg_core.reports._mermaid import mermaid_graphs
from cpg_core.review import Plan, also_selected
from cpg_core.synthesis import FOR_CLUSTER
from cpg_core.text import clean_text

MAX_ROWS = 30


_LEARNED = ("forwarded", "redirected")


def learned(rule: RuleEvidence) -> str:
    """`` (learned: forwarded 2)`` for a rule learned from traffic that works (--learn)."""
    counts = [f"{cls} {rule.classes[cls]}" for cls in _LEARNED if rule.classes.get(cls)]
    return f" (learned: {', '.join(counts)})" if counts else ""


def confidence(rule: RuleEvidence) -> str:
    """``high`` (10 flows or more, seen in 2 sessions or more), ``medium`` (3 flows or more),
    else ``low``: how much traffic stands behind a rule."""
    if rule.flow_count >= 10 and len(rule.contributing_sessions) >= 2:
        return "high"
    if rule.flow_count >= 3:
        return "medium"
    if FOR_CLUSTER in rule.classes:
        return "for the cluster"
    return "low"


_MARKUP = re.compile(r"([\\\[\]*~])")
"""Markdown punctuation a value could open a link, an image or emphasis with (without
brackets, ``](`` and ``![`` mean nothing)."""


def _cell(text: object) -> str:
    """Text for a table cell or a heading: one line, and no markup of the capture's making
    (no HTML, link, image, emphasis, code span or @mention; pipes escaped)."""
    value = clean_text(str(text)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    value = _MARKUP.sub(r"\\\1", value).replace("`", "'").replace("|", "\\|")
    return value.replace("@", "&#64;")


def _code(text: object) -> str:
    """Text inside a code span in a table cell: one line, no backtick to close the span
    early, pipes escaped (GitHub splits cells on them even there)."""
    return clean_text(str(text)).replace("`", "'").replace("|", "\\|")


def coverage_lines(covered: Coverage) -> list[str]:
    """The coverage section: the totals in a sentence, a row per namespace."""
    out = ["## Coverage", ""]
    if not covered.workloads:
        return [*out, "No workload in the policies, their evidence or the plan.", ""]
    out += [
        f"Of {covered.workloads} workloads, policies select {covered.ingress} for ingress "
        f"({covered.share('ingress')}) and {covered.egress} for egress "
        f"({covered.share('egress')}).",
        "",
        "| namespace | workloads | ingress | egress | no policy for |",
        "|---|---|---|---|---|",
    ]
    for row in covered.namespaces[:MAX_ROWS]:
        open_for = [f"{w} (ingress)" for w in row.ingress_open]
        open_for += [f"{w} (egress)" for w in row.egress_open]
        shown = ", ".join(open_for[:10]) + (
            f", … {len(open_for) - 10} more" if len(open_for) > 10 else ""
        )
        out.append(
            f"| {_cell(row.namespace)} | {row.workloads} | {row.ingress} | {row.egress} | "
            f"{_cell(shown) or '—'} |"
        )
    if len(covered.namespaces) > MAX_ROWS:
        out.append(f"| … and {len(covered.namespaces) - MAX_ROWS} more namespaces | | | | |")
    return [*out, ""]


def markdown_report(
    *,
    title: str,
    policies: Sequence[PolicyDocument],
    evidence: Mapping[str, PolicyEvidence],
    health: ClusterHealth | None = None,
    plan: Plan | None = None,
) -> str:
    """The report. ``evidence`` maps ``namespace/name`` of a policy to its evidence;
    ``plan`` is what ``cpg plan`` found."""
    names = sorted(
        f"{(p.get('metadata') or {}).get('namespace', '')}/{(p.get('metadata') or {}).get('name', '')}"
        for p in policies
    )
    findings = health.findings if health else ()
    drops = health.drops if health else ()
    out = [f"# cpg report: {_cell(title)}", ""]
    out += _summary_lines(names, evidence, findings, drops, plan)
    graph = traffic_graph(policies)
    covered = coverage(
        policies,
        evidence,
        plan,
        [(n.namespace, n.workload) for n in graph.nodes if n.kind == "workload"],
    )
    out += coverage_lines(covered)
    out += _graph_lines(graph, plan)
    if plan is not None:
        out += _would_break_table(plan) + _pressure_table(plan)
    out += _policy_sections(names, policies, evidence)
    out += _findings_table(findings) + _drops_table(drops)
    out += [
        "Confidence: high = 10 or more flows seen in 2 or more sessions; medium = 3 or more "
        "flows; low = fewer. Generated by cpg report.",
        "",
    ]
    return "\n".join(out)


def _summary_lines(
    names: Sequence[str],
    evidence: Mapping[str, PolicyEvidence],
    findings: Sequence[Finding],
    drops: Sequence[DropRecord],
    plan: Plan | None,
) -> list[str]:
    rules = [rule for name in names if name in evidence for rule in evidence[name].rules]
    flows = sum(rule.flow_count for rule in rules)
    added = sum(1 for rule in rules if FOR_CLUSTER in rule.classes)
    summary = [
        f"**{len(names)} policies**, {len(rules) - added} rules justified by {flows:,} flows"
        + (f" and {added} written for the cluster (DNS for every egress policy)" if added else "")
    ]
    if plan is not None:
        statuses: dict[str, int] = {}
        for diff in plan.diffs:
            statuses[diff.status] = statuses.get(diff.status, 0) + 1
        summary.append(
            f"{statuses.get('new', 0)} new, {statuses.get('changed', 0)} changed, "
            f"{statuses.get('unchanged', 0)} unchanged"
        )
    summary.append(f"{len(findings)} findings")
    summary.append(f"{sum(d.count for d in drops):,} infrastructure/transient drops")
    if plan is not None:
        summary.append(plan_verdict(plan, bold="**"))
    out = ["; ".join(summary) + ".", ""]
    if plan is not None and plan.verdict == "cannot_judge":
        out += [f"> **The plan cannot judge what would break.** {plan_cannot_judge()}", ""]
    return out


def _graph_lines(graph: TrafficGraph, plan: Plan | None) -> list[str]:
    graphs, left_out = mermaid_graphs(graph, plan) if graph.nodes else ([], [])
    out = ["## Allowed traffic", ""]
    if not graph.nodes:
        out += ["None: no policy in the folder allows any traffic.", ""]
    if plan is not None and plan.would_break:
        out += ["Dashed red arrows: traffic that works today and would break (cpg plan).", ""]
    for heading, chart in graphs:
        out += [f"### {_cell(heading)}", ""] if heading else []
        out += ["```mermaid", chart, "```", ""]
    if left_out:
        skipped = ", ".join(_cell(name) for name in left_out)
        out += [
            f"No graph here for {len(left_out)} more namespaces ({skipped}): see the HTML report.",
            "",
        ]
    return out


def _would_break_table(plan: Plan) -> list[str]:
    if not plan.would_break:
        return []
    out = ["## Would break (cpg plan)", "", "| traffic | flows | why | fix |", "|---|---|---|---|"]
    for item in plan.would_break[:MAX_ROWS]:
        t = item.traffic
        traffic = f"{t.direction} {t.source} → {t.destination} {t.protocol}/{t.port}"
        out.append(f"| {_cell(traffic)} | {t.flows} | {_cell(item.why)} | {_cell(item.fix)} |")
    return [*out, ""]


def _pressure_table(plan: Plan) -> list[str]:
    if not plan.policy_map:
        return []
    out = [
        "## Policy map pressure (cpg plan)",
        "",
        f"Estimated entries of each pod's policy map against bpf-policy-map-max "
        f"({plan.policy_map_max:,}); over it, the agent cannot apply the policies.",
        "",
        "| pod | entries | share | largest rules | cut |",
        "|---|---|---|---|---|",
    ]
    for pod in plan.policy_map[:MAX_ROWS]:
        largest = "; ".join(
            f"{r.policy} {r.rule}: {r.identities} × {r.ports}" for r in pod.largest[:3]
        )
        out.append(
            f"| {_cell(pod.endpoint)} | {pod.entries:,} | {pod.share}"
            f"{' (over)' if pod.over else ''} | {_cell(largest)} | "
            f"{_cell('; '.join(pod.advice)) or '—'} |"
        )
    return [*out, ""]


def _policy_sections(
    names: Sequence[str],
    policies: Sequence[PolicyDocument],
    evidence: Mapping[str, PolicyEvidence],
) -> list[str]:
    out = ["## Policies", ""]
    others = {a.policy: a.by for a in also_selected(policies)}
    for name in names:
        out += [f"### {_cell(name)}", ""]
        if name in others:
            mine = ", ".join(f"`{_code(n)}`" for n in others[name])
            out += [f"Also selected by your policy {mine} (cpg leaves it as it is).", ""]
        doc = evidence.get(name)
        if doc is None or not doc.rules:
            out += ["No evidence recorded for this policy.", ""]
            continue
        out += ["| rule | flows | first seen | last seen | confidence |", "|---|---|---|---|---|"]
        for rule in doc.rules[:MAX_ROWS]:
            first, last = (
                (_cell(rule.first_seen), _cell(rule.last_seen)) if rule.flow_count else ("—", "—")
            )
            out.append(
                f"| `{_code(rule.key)}` | {rule.flow_count}{learned(rule)} | {first} | "
                f"{last} | {confidence(rule)} |"
            )
        if len(doc.rules) > MAX_ROWS:
            out.append(f"| … and {len(doc.rules) - MAX_ROWS} more | | | | |")
        out.append("")
    return out


def _findings_table(findings: Sequence[Finding]) -> list[str]:
    if not findings:
        return []
    out = ["## Findings", "", "| finding | flows | what happened | fix |", "|---|---|---|---|"]
    for finding in sorted(findings, key=lambda f: (-f.count, f.kind, f.subject))[:MAX_ROWS]:
        label, what, fix = finding.advice()
        out.append(f"| {_cell(label)} | {finding.count} | {_cell(what)} | {_cell(fix)} |")
    return [*out, ""]


def _drops_table(drops: Sequence[DropRecord]) -> list[str]:
    if not drops:
        return []
    out = [
        "## Infrastructure and transient drops (no policy fixes these)",
        "",
        "| reason | class | flows | fix |",
        "|---|---|---|---|",
    ]
    for drop in sorted(drops, key=lambda d: (-d.count, d.reason))[:MAX_ROWS]:
        out.append(
            f"| {_cell(drop.reason)} | {_cell(drop.drop_class)} | {drop.count} | "
            f"{_cell(drop.remediation or '—')} |"
        )
    return [*out, ""]
