"""The Markdown report for a pull request: what the policies allow (a Mermaid graph GitHub
draws), why each rule is there (flows, first/last seen, confidence), the findings and infra
drops with their fixes, and what a plan says would break. Same inputs, same bytes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from cpg_core._documents import ClusterHealth, PolicyDocument, PolicyEvidence, RuleEvidence
from cpg_core._plan import Plan
from cpg_core.reports._graph import TrafficGraph, traffic_graph
from cpg_core.text import clean_text

MAX_NODES = 40
MAX_EDGES = 60
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


def _mermaid_text(text: str) -> str:
    value = clean_text(text).replace("\n", " ")
    for char, code in (('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("`", "#96;")):
        value = value.replace(char, code)
    return value


def mermaid(graph: TrafficGraph, max_nodes: int = MAX_NODES, max_edges: int = MAX_EDGES) -> str:
    """A ``flowchart LR``: workloads in a subgraph per namespace, other peers on their own,
    edges labelled with ports; beyond the caps, "… and N more"."""
    edges = list(graph.edges)
    shown_edges = edges[:max_edges]
    wanted = []
    for edge in shown_edges:
        for node_id in (edge.source, edge.target):
            if node_id not in wanted:
                wanted.append(node_id)
    by_id = {n.id: n for n in graph.nodes}
    kept_ids = set(wanted[:max_nodes])
    shown_edges = [e for e in shown_edges if e.source in kept_ids and e.target in kept_ids]
    ids = {node_id: f"n{i}" for i, node_id in enumerate(sorted(kept_ids))}
    lines = ["flowchart LR"]
    namespaces: dict[str, list[str]] = {}
    outside: list[str] = []
    for node_id in sorted(kept_ids):
        node = by_id[node_id]
        label = _mermaid_text(node.label)
        if node.kind in ("workload", "selector"):
            namespaces.setdefault(node.namespace, []).append(f'    {ids[node_id]}["{label}"]')
        elif node.kind == "entity":
            outside.append(f'  {ids[node_id]}(["{label}"])')
        else:
            outside.append(f'  {ids[node_id]}[/"{label}"/]')
    for index, namespace in enumerate(sorted(namespaces)):
        lines.append(f'  subgraph ns{index}["{_mermaid_text(namespace)}"]')
        lines += namespaces[namespace]
        lines.append("  end")
    lines += outside
    for edge in shown_edges:
        ports = ", ".join(edge.ports[:4]) + (
            f" +{len(edge.ports) - 4}" if len(edge.ports) > 4 else ""
        )
        lines.append(f'  {ids[edge.source]} -->|"{_mermaid_text(ports)}"| {ids[edge.target]}')
    hidden_edges = len(edges) - len(shown_edges)
    hidden_nodes = len(graph.nodes) - len(kept_ids)
    if hidden_edges or hidden_nodes:
        lines.append(
            f'  more["… and {hidden_edges} more connections, {hidden_nodes} more nodes: '
            'see the HTML report"]'
        )
    return "\n".join(lines)


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
    rules = [rule for name in names if name in evidence for rule in evidence[name].rules]
    flows = sum(rule.flow_count for rule in rules)
    findings = health.findings if health else ()
    drops = health.drops if health else ()
    out = [f"# cpg report: {_cell(title)}", ""]
    summary = [f"**{len(names)} policies**, {len(rules)} rules justified by {flows:,} flows"]
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
        summary.append(f"**{plan.would_break_flows:,} flows would break**")
    out += ["; ".join(summary) + ".", ""]
    graph = traffic_graph(policies)
    out += ["## Allowed traffic", "", "```mermaid", mermaid(graph), "```", ""]
    if plan is not None and plan.would_break:
        out += [
            "## Would break (cpg plan)",
            "",
            "| traffic | flows | why | fix |",
            "|---|---|---|---|",
        ]
        for item in plan.would_break[:MAX_ROWS]:
            t = item.traffic
            traffic = f"{t.direction} {t.source} → {t.destination} {t.protocol}/{t.port}"
            out.append(f"| {_cell(traffic)} | {t.flows} | {_cell(item.why)} | {_cell(item.fix)} |")
        out.append("")
    out += ["## Policies", ""]
    for name in names:
        out += [f"### {_cell(name)}", ""]
        doc = evidence.get(name)
        if doc is None or not doc.rules:
            out += ["No evidence recorded for this policy.", ""]
            continue
        out += ["| rule | flows | first seen | last seen | confidence |", "|---|---|---|---|---|"]
        for rule in doc.rules[:MAX_ROWS]:
            out.append(
                f"| `{_code(rule.key)}` | {rule.flow_count}{learned(rule)} | {_cell(rule.first_seen)} | "
                f"{_cell(rule.last_seen)} | {confidence(rule)} |"
            )
        if len(doc.rules) > MAX_ROWS:
            out.append(f"| … and {len(doc.rules) - MAX_ROWS} more | | | | |")
        out.append("")
    if findings:
        out += ["## Findings", "", "| finding | flows | what happened | fix |", "|---|---|---|---|"]
        for finding in sorted(findings, key=lambda f: (-f.count, f.kind, f.subject))[:MAX_ROWS]:
            label, what, fix = finding.advice()
            out.append(f"| {_cell(label)} | {finding.count} | {_cell(what)} | {_cell(fix)} |")
        out.append("")
    if drops:
        out += [
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
        out.append("")
    out += [
        "Confidence: high = 10 or more flows seen in 2 or more sessions; medium = 3 or more "
        "flows; low = fewer. Generated by cpg report.",
        "",
    ]
    return "\n".join(out)
