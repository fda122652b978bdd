"""The HTML report: one self-contained file (no request to any network when it is viewed, for
air-gapped clusters) with the traffic graph drawn as inline SVG from a layout computed here
(``_layout``), a small script of cpg's own for pan/zoom, highlighting, filters and the side
panel, and Jinja2 templating so that every text from a capture is escaped. Small graphs open
on their workloads; large ones on their namespaces, each expanding to its workloads and
their peers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs

from cpg_core._reports._coverage import Coverage, coverage
from cpg_core._reports._layout import (
    BOX_HEAD,
    Rect,
    bezier,
    layout,
    natural_key,
    place_labels,
    point_on,
    svg_path,
)
from cpg_core._reports._matrix import Matrix, namespace_matrix, newly_enforced
from cpg_core._reports.checks import plan_cannot_judge
from cpg_core._reports.graph import (
    OUTSIDE,
    PEER_GROUPS,
    Link,
    Node,
    TrafficGraph,
    group_of,
    links_with_plan,
    plan_node,
    plural,
    port_label,
    traffic_graph,
)
from cpg_core._reports.inputs import ReviewInputs
from cpg_core._reports.markdown import confidence, learned
from cpg_core._review.behind import seen_at
from cpg_core._review.explain import rule_in_words
from cpg_core._review.plan_documents import Plan
from cpg_core._review.readiness import WorkloadProfile
from cpg_core._review.wire import to_data
from cpg_core._synthesis.profile import seconds_of
from cpg_core._synthesis.render import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from cpg_core.text import clean_text

NODE_W, NODE_H = 160, 30
NAME_CHAR_W, SUB_CHAR_W = 9.0, 7.5
"""Generous widths of a character of a node's name (14 px bold) and its second line (12 px):
what a node's text may cover beyond its box, which edge labels keep clear of."""
OVERVIEW_ABOVE = 60
"""Above this many nodes the report opens on namespaces (click one to see its workloads)."""
MATRIX_ABOVE = 10
"""Above this many namespaces (the peers outside the cluster counted as one) the report opens
on the namespace matrix: measured on synthetic clusters, the namespace graph of 11 or more
leaves port counts it has no free place for, and its curves cross into an unreadable bundle."""

_CPG_MARK = f"{MANAGED_BY_LABEL}: {MANAGED_BY_VALUE}"
"""How a policy cpg wrote says so (a person's policy lacks it)."""


def _short(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


FAN_OUT = 3
"""Edges from one node (or into one) with the same ports, at or above which one label says
it for all: a scraper reaching ten pods on TCP/9090 is one label, not a column of ten, and
so is every pod's DNS to the cluster's resolver."""


def _fans(links: Sequence[Link], texts: Sequence[str]) -> list[object]:
    """Each edge's fan, or None: allowed edges from one source with the same ports, groups of
    ``FAN_OUT`` or more; then, of the edges left, those into one target likewise. A fan shares
    one label (an edge that would break keeps its own)."""
    fans: list[object] = [None] * len(links)
    for end in ("source", "target"):
        groups: dict[tuple[str, str], list[int]] = {}
        for i, link in enumerate(links):
            if not link.breaks and fans[i] is None:
                groups.setdefault((getattr(link, end), texts[i]), []).append(i)
        for key, members in groups.items():
            if len(members) >= FAN_OUT:
                for i in members:
                    fans[i] = (end, *key)
    return fans


def _view(
    name: str, title: str, nodes: Sequence[Node], links: Sequence[Link], *, overview: bool
) -> dict[str, Any]:
    groups: dict[str, list[str]] = {}
    for n in nodes:
        groups.setdefault(n.id if overview else group_of(n), []).append(n.id)
    drawing = layout(
        groups,
        [(link.source, link.target) for link in links],
        node_w=NODE_W,
        node_h=NODE_H + (14 if overview else 0),
        max_columns=3 if overview else 4,
        outside=f"ns:{OUTSIDE}" if overview else OUTSIDE,
        boxed=not overview,
        column_gap=180 if overview else 100,
    )
    drawn_nodes = []
    taken: list[Rect] = []
    for n in nodes:
        cx, cy = drawing.centres[n.id]
        label, _, sub = clean_text(n.label).partition(" · ")
        x, y = cx - NODE_W / 2, cy - drawing.node_h / 2
        drawn_nodes.append(
            {
                "id": n.id,
                "label": _short(label),
                "sub": sub,
                "full": clean_text(n.label),
                "kind": n.kind,
                "namespace": n.namespace,
                "x": x,
                "y": y,
                "h": drawing.node_h,
            }
        )
        text_w = 10 + max(len(_short(label)) * NAME_CHAR_W, len(sub) * SUB_CHAR_W)
        taken.append((x - 2, y - 2, x + max(NODE_W, text_w) + 2, y + drawing.node_h + 2))
    for b in [] if overview else drawing.boxes:
        title_w = 12 + len(b.name) * NAME_CHAR_W
        taken.append((b.x, b.y, b.x + max(b.w, title_w), b.y + BOX_HEAD))
    curves = [bezier(drawing, link.source, link.target) for link in links]
    texts = [port_label(link.ports) for link in links]
    # The labels that matter most are placed first: traffic that would break, then those that
    # speak for a fan of edges, then the rest in the drawing's order. A label with no free
    # place left is drawn only on highlight.
    fans = _fans(links, texts)
    order = sorted(range(len(links)), key=lambda i: (not links[i].breaks, fans[i] is None, i))
    places = place_labels(
        [curves[i] for i in order],
        [texts[i] for i in order],
        taken,
        [fans[i] for i in order],
    )
    spots = dict(zip(order, places, strict=True))
    drawn_links = []
    for i, link in enumerate(links):
        spot = spots[i]
        mx, my = spot if spot is not None else point_on(curves[i], 0.5)
        drawn_links.append(
            {
                "source": link.source,
                "target": link.target,
                "d": svg_path(curves[i]),
                "label": texts[i],
                "title": clean_text(link.title),
                "breaks": link.breaks,
                "spare": spot is None,
                "lx": mx,
                "ly": my,
            }
        )
    boxes = [] if overview else [attrs.asdict(b) for b in drawing.boxes]
    return {
        "name": name,
        "title": title,
        "width": drawing.width,
        "height": drawing.height,
        "boxes": boxes,
        "nodes": drawn_nodes,
        "links": drawn_links,
    }


def _views(nodes: Sequence[Node], links: Sequence[Link]) -> list[dict[str, Any]]:
    by_id = {n.id: n for n in nodes}
    if len(nodes) <= OVERVIEW_ABOVE:
        return [_view("all", "", nodes, links, overview=False)]
    # Overview: a node per namespace (and per kind of outside peer), links with counts.
    members: dict[str, list[Node]] = {}
    for n in nodes:
        members.setdefault(group_of(n), []).append(n)
    summary = [
        Node(
            f"ns:{g}",
            f"{g} · {plural(len(ms), 'peer' if g in PEER_GROUPS else 'workload')}",
            "namespace",
            g,
        )
        for g, ms in members.items()
    ]
    counted: dict[tuple[str, str], list[Link]] = {}
    for link in links:
        a, b = group_of(by_id[link.source]), group_of(by_id[link.target])
        counted.setdefault((f"ns:{a}", f"ns:{b}"), []).append(link)
    overview_links = [
        Link(
            a,
            b,
            (str(len(ls)),),
            f"{plural(len(ls), 'connection')}, ports "
            + ", ".join(sorted({p for lk in ls for p in lk.ports})),
            breaks=any(lk.breaks for lk in ls),
        )
        for (a, b), ls in sorted(counted.items())
        if a != b
    ]
    views = [_view("overview", "", summary, overview_links, overview=True)]
    for g in sorted(members, key=natural_key):
        if g in PEER_GROUPS:
            continue
        own = {n.id for n in members[g]}
        focus = [lk for lk in links if lk.source in own or lk.target in own]
        shown = own | {lk.source for lk in focus} | {lk.target for lk in focus}
        views.append(_view(f"ns:{g}", g, [by_id[i] for i in sorted(shown)], focus, overview=False))
    return views


def _matrix_page(matrix: Matrix, nodes: Sequence[Node]) -> tuple[list[dict[str, Any]], Any]:
    """The namespace matrix's rows for the template, and each cell's pair for the script."""
    by_id = {n.id: n for n in nodes}
    index = {(c.source, c.target): i for i, c in enumerate(matrix.cells)}
    rows = []
    for group in matrix.groups:
        cells: list[dict[str, Any] | None] = []
        for column in matrix.groups:
            i = index.get((group, column))
            if i is None:
                cells.append(None)
                continue
            cell = matrix.cells[i]
            breaking = sum(1 for link in cell.links if link.status == "breaks")
            title = (
                f"{group} → {column}: {plural(cell.connections, 'connection')}"
                + (f", {breaking} would break" if breaking else "")
                + f"; {', '.join(cell.ports)}"
            )
            cells.append(
                {"index": i, "count": cell.connections, "status": cell.status, "title": title}
            )
        rows.append({"group": group, "cells": cells})
    pairs = []
    for cell in matrix.cells:
        pairs.append(
            {
                "source": cell.source,
                "target": cell.target,
                "links": [
                    [
                        link.source,
                        link.target,
                        port_label(link.ports),
                        ", ".join(link.ports),
                        link.status,
                    ]
                    for link in cell.links
                ],
            }
        )
    names = {
        node_id: clean_text(by_id[node_id].label)
        for cell in matrix.cells
        for link in cell.links
        for node_id in (link.source, link.target)
    }
    return rows, {"pairs": pairs, "names": names}


def _coverage_rows(found: Coverage) -> list[dict[str, Any]]:
    return [
        {
            "namespace": row.namespace,
            "workloads": row.workloads,
            "ingress": row.ingress,
            "egress": row.egress,
            "open": ", ".join(
                [f"{w} (ingress)" for w in row.ingress_open]
                + [f"{w} (egress)" for w in row.egress_open]
            ),
        }
        for row in found.namespaces
    ]


BREAKS_LISTED = 100
"""Would-break items the side panel lists as page text (each also opens from its cell)."""


def _would_break(plan: Plan | None) -> list[dict[str, Any]]:
    """Each would-break item of the plan with why, the fix in words, and the YAML to paste
    (the narrower selector first where the plan offers one), keyed by the ends' node ids."""
    out = []
    for item in plan.would_break if plan else ():
        t = item.traffic
        out.append(
            {
                "traffic": clean_text(
                    f"{t.direction} {t.source} → {t.destination} {t.protocol}/{t.port}"
                ),
                "flows": t.flows,
                "why": clean_text(item.why),
                "fix": clean_text(item.fix),
                "narrow": clean_text(item.narrow_yaml, keep_newlines=True),
                "narrowed": clean_text(", ".join(item.narrow_policies) or item.policy),
                "rule": clean_text(item.rule_yaml, keep_newlines=True),
                "policy": clean_text(item.policy),
                "source": plan_node(t.source).id,
                "target": plan_node(t.destination).id,
            }
        )
    return out


def _policy_entry(name: str, inputs: ReviewInputs) -> dict[str, Any]:
    """A policy as the side panel shows it: its whole YAML and each rule's evidence."""
    doc = inputs.evidence.get(name)
    rules = [
        {
            "key": f"{rule.direction} {rule_in_words(rule)}",
            "flows": rule.flow_count,
            "learned": learned(rule).strip(" ()"),
            "first": seen_at(rule.first_seen),
            "last": seen_at(rule.last_seen),
            "confidence": confidence(rule),
            "samples": [
                {**sample, "time": seen_at(str(sample.get("time", "")))}
                for sample in to_data(list(rule.samples[:5]))
            ],
        }
        for rule in (doc.rules if doc else ())
    ]
    text = inputs.texts.get(name, "")
    return {
        "policy": name.lstrip("/"),  # a clusterwide policy has no namespace to name
        "yaml": text,
        "rules": rules,
        "yours": bool(text) and _CPG_MARK not in text,
    }


def _details(graph: TrafficGraph, inputs: ReviewInputs) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each node's label and the names of the policies selecting it; each policy once (a
    shared policy selects hundreds of nodes: its YAML is in the page once)."""
    details: dict[str, Any] = {}
    policies: dict[str, Any] = {}
    for node in graph.nodes:
        names = []
        for selecting in graph.selected_by.get(node.id, ()):
            # a clusterwide policy is "/name" in the folder's texts and evidence
            name = selecting if selecting in inputs.texts else f"/{selecting}"
            if name not in policies:
                policies[name] = _policy_entry(name, inputs)
            names.append(name)
        details[node.id] = {
            "label": node.label,
            "namespace": node.namespace,
            "kind": node.kind,
            "policies": names,
        }
    return details, policies


def html_report(*, title: str, inputs: ReviewInputs) -> str:
    graph = traffic_graph(inputs.policies)
    nodes, links = links_with_plan(graph, inputs.plan)
    views = _views(nodes, links)
    matrix = namespace_matrix(nodes, links, newly_enforced(inputs.plan))
    matrix_rows, matrix_data = _matrix_page(matrix, nodes)
    covered = coverage(
        inputs.policies,
        inputs.evidence,
        inputs.plan,
        [(n.namespace, n.workload) for n in nodes if n.kind == "workload"],
    )
    details, policies = _details(graph, inputs)
    findings = []
    health = inputs.health
    namespaces = sorted(graph.namespaces(), key=natural_key)
    for finding in sorted(
        health.findings if health else (), key=lambda f: (-f.count, f.kind, f.subject)
    ):
        label, what, fix = finding.advice()
        involved = [
            n.id
            for n in graph.nodes
            if n.namespace and f"{n.namespace}/{n.label}" in finding.subject
        ]
        spaces = [
            ns for ns in namespaces if re.search(rf"(^|[\s(]){re.escape(ns)}/", finding.subject)
        ]
        findings.append(
            {
                "label": label,
                "subject": finding.subject,
                "what": what,
                "fix": fix,
                "count": finding.count,
                "nodes": involved,
                "namespaces": spaces,
            }
        )
    drops = [
        {"reason": d.reason, "class": d.drop_class, "count": d.count, "fix": d.remediation}
        for d in sorted(health.drops if health else (), key=lambda d: (-d.count, d.reason))
    ]
    breaks = _would_break(inputs.plan)
    readiness = [
        {
            "name": p.name,
            "verdict": p.verdict,
            "ready": p.ready,
            "why": "; ".join(p.reasons) if not p.ready else p.stable_line(),
            "points": curve_points(p),
        }
        for p in inputs.profiles()
    ]
    import jinja2  # only an HTML report needs it: every other command starts without it

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    would_break = inputs.plan.would_break_flows if inputs.plan else 0
    cannot_judge = (
        plan_cannot_judge() if inputs.plan and inputs.plan.verdict == "cannot_judge" else ""
    )
    return env.from_string(TEMPLATE).render(
        title=clean_text(title),
        node_w=NODE_W,
        views=views,
        overview=views[0]["name"] == "overview",
        node_count=len(graph.nodes),
        edge_count=len(graph.edges),
        namespaces=namespaces,
        findings=findings,
        drops=drops,
        would_break=would_break,
        cannot_judge=cannot_judge,
        data={
            "details": details,
            "policies": policies,
            "findings": findings,
            "breaks": breaks,
            **matrix_data,
        },
        breaks=breaks[:BREAKS_LISTED],
        breaks_more=max(0, len(breaks) - BREAKS_LISTED),
        policies=len(inputs.policies),
        matrix_rows=matrix_rows,
        groups=matrix.groups,
        matrix_first=len(matrix.groups) > MATRIX_ABOVE,
        coverage=covered,
        coverage_rows=_coverage_rows(covered),
        readiness=readiness,
        ready=sum(1 for r in readiness if r["ready"]),
        policy_map=inputs.plan.policy_map if inputs.plan else (),
        policy_map_max=f"{inputs.plan.policy_map_max:,}" if inputs.plan else "",
    )


def curve_points(profile: WorkloadProfile, width: int = 120, height: int = 28) -> str:
    """The learning curve as an SVG polyline's points: time across, rules up (a step per
    new rule), in a box of ``width`` by ``height``; "" with no point."""
    curve = profile.curve
    if not curve:
        return ""
    times = [seconds_of(point.time) or 0.0 for point in curve]
    start, end = times[0], max(times[-1], seconds_of(profile.last) or times[-1])
    span = end - start or 1.0
    top = curve[-1].rules or 1
    points = []
    previous_y = height - 2.0
    for when, rules in zip(times, (point.rules for point in curve), strict=True):
        x = round(2 + (when - start) / span * (width - 4), 1)
        y = round(height - 2 - rules / top * (height - 4), 1)
        points += [f"{x},{previous_y}", f"{x},{y}"]
        previous_y = y
    points.append(f"{width - 2},{previous_y}")
    return " ".join(points)


TEMPLATE = """{% macro draw(v) %}<g class="view" data-view="{{ v.name }}" data-title="{{ v.title }}" data-w="{{ v.width|round|int }}" data-h="{{ v.height|round|int }}">
{% for b in v.boxes %}<g class="box" data-ns="{{ b.name }}"><rect x="{{ b.x }}" y="{{ b.y }}" width="{{ b.w }}" height="{{ b.h }}" rx="8"/><text x="{{ b.x + 10 }}" y="{{ b.y + 17 }}">{{ b.name }}</text></g>
{% endfor %}
{% for e in v.links %}<path class="edge{% if e.breaks %} breaks{% endif %}" d="{{ e.d }}" data-source="{{ e.source }}" data-target="{{ e.target }}" data-edge="{{ loop.index0 }}"><title>{{ e.title }}</title></path>
{% endfor %}
{% for e in v.links %}<text class="port{% if e.breaks %} breaks{% endif %}{% if e.spare %} spare{% endif %}" x="{{ e.lx|round(1) }}" y="{{ e.ly|round(1) }}" text-anchor="middle" dy="-3" data-edge="{{ loop.index0 }}" data-source="{{ e.source }}" data-target="{{ e.target }}">{{ e.label }}</text>
{% endfor %}
{% for n in v.nodes %}<g class="node {{ n.kind }}" data-id="{{ n.id }}" data-ns="{{ n.namespace }}"><rect x="{{ n.x }}" y="{{ n.y }}" width="{{ node_w }}" height="{{ n.h }}"/>{% if n.sub %}<text x="{{ n.x + 8 }}" y="{{ n.y + 18 }}" class="name">{{ n.label }}</text><text x="{{ n.x + 8 }}" y="{{ n.y + 36 }}" class="sub">{{ n.sub }}</text>{% else %}<text x="{{ n.x + 8 }}" y="{{ n.y + n.h / 2 + 5 }}">{{ n.label }}</text>{% endif %}<title>{{ n.full }}</title></g>
{% endfor %}
</g>
{% endmacro %}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>cpg report: {{ title }}</title>
<style>
html, body { height: 100%; }
body { margin: 0; font: 14px system-ui, sans-serif; display: flex; flex-direction: column; }
header { flex: none; padding: 5px 12px; background: #1f2937; color: #fff; display: flex; gap: 14px; align-items: center; font-size: 13px; white-space: nowrap; overflow: hidden; }
header select, header button { font-size: 12px; max-width: 260px; }
header .legend { margin-left: auto; color: #cbd5e1; }
header .breaks { color: #fca5a5; }
main { flex: 1; min-height: 0; display: grid; grid-template-columns: 1fr minmax(380px, 34vw); }
#canvas { overflow: hidden; background: #f8fafc; cursor: grab; position: relative; }
#canvas svg { width: 100%; height: 100%; display: block; }
#where { position: absolute; left: 10px; top: 8px; font-weight: 600; color: #334155; }
aside { overflow-y: auto; overflow-x: hidden; border-left: 1px solid #cbd5e1; padding: 8px 12px; overflow-wrap: anywhere; }
aside table { width: 100%; table-layout: fixed; }
.break { background: #fef2f2; border: 1px solid #dc2626; padding: 4px 8px; margin: 6px 0; }
.break p { margin: 3px 0; }
header a.breaks { color: #fca5a5; }
.box rect { fill: #e2e8f0; stroke: #94a3b8; }
.box text { font-weight: 600; fill: #334155; font-size: 13px; }
.box.hit rect { fill: #fde68a; stroke: #d97706; }
.node rect { fill: #fff; stroke: #2563eb; rx: 6; }
.node.namespace rect { fill: #dbeafe; stroke: #1d4ed8; stroke-width: 1.5; }
.node.entity rect, .node.cidr rect, .node.fqdn rect { stroke: #9333ea; }
.node.hit rect { fill: #fde68a; }
.node.selected rect { stroke-width: 3; fill: #dbeafe; }
.node text { font-size: 13px; pointer-events: none; }
.node text.name { font-weight: 600; font-size: 14px; }
.node text.sub { font-size: 12px; fill: #334155; }
.node { cursor: pointer; }
.edge { stroke: #64748b; stroke-width: 1.3; fill: none; marker-end: url(#arrow); }
.edge.breaks { stroke: #dc2626; stroke-dasharray: 6 4; marker-end: url(#arrow-red); }
.edge.hot { stroke: #1d4ed8; stroke-width: 2.6; }
.edge.breaks.hot { stroke: #b91c1c; }
.port { font-size: 11px; fill: #334155; paint-order: stroke; stroke: #f8fafc; stroke-width: 3px; pointer-events: none; }
.port.breaks { fill: #b91c1c; }
.port.hot { fill: #1d4ed8; font-weight: 600; }
.port.spare { display: none; }
.port.spare.hot { display: inline; }
.dim, .faded { opacity: 0.12; }
pre { background: #0f172a; color: #e2e8f0; padding: 8px; font-size: 12px; white-space: pre-wrap; overflow-wrap: anywhere; }
table { border-collapse: collapse; font-size: 12px; }
td, th { border: 1px solid #cbd5e1; padding: 2px 4px; text-align: left; }
h2 { font-size: 16px; margin: 12px 0 4px; }
.finding { background: #fef3c7; padding: 6px 8px; border: 1px solid #d97706; }
#grid { position: absolute; inset: 0; overflow: auto; background: #f8fafc; padding: 8px 12px; z-index: 1; cursor: default; }
#grid[hidden] { display: none; }
#grid-title { margin: 0 0 8px; color: #334155; font-size: 13px; }
#matrix, #pair { border-collapse: collapse; font-size: 12px; }
#matrix th, #pair th { background: #f1f5f9; font-weight: 600; white-space: nowrap; padding: 2px 6px; cursor: pointer; }
#matrix th.col span, #pair th.col span { writing-mode: vertical-rl; transform: rotate(180deg); display: inline-block; max-height: 140px; overflow: hidden; text-overflow: ellipsis; }
#matrix th.corner, #pair th.corner { cursor: default; font-weight: 400; color: #475569; }
#matrix td, #pair td { min-width: 26px; height: 22px; text-align: center; padding: 0 4px; white-space: nowrap; }
#matrix td.none, #pair td.none { background: #fff; }
td.cell { cursor: pointer; }
td.cell.allowed, .swatch.allowed { background: #dbeafe; }
td.cell.newly, .swatch.newly { background: #fde68a; }
td.cell.breaks, .swatch.breaks { background: #fecaca; color: #991b1b; font-weight: 600; }
td.cell:hover { outline: 2px solid #1d4ed8; }
.key { font-size: 12px; color: #334155; }
.swatch { display: inline-block; width: 12px; height: 12px; border: 1px solid #94a3b8; vertical-align: middle; margin-left: 8px; }
</style>
</head>
<body>
<header>
  <strong>cpg report: {{ title }}</strong>
  <span>{{ policies }} policies · {{ node_count }} nodes · {{ edge_count }} connections{% if would_break %} · <a class="breaks" href="#would-break">{{ would_break }} flows would break</a>{% endif %}{% if cannot_judge %} · <span class="breaks" title="{{ cannot_judge }}">the plan cannot judge what would break</span>{% endif %}</span>
  <label>namespace <select id="ns"><option value="">all</option>{% for ns in namespaces %}<option>{{ ns }}</option>{% endfor %}</select></label>
  <label>finding <select id="finding"><option value="">none</option>{% for f in findings %}<option value="{{ loop.index0 }}">{{ f.label }}: {{ f.subject[:50] }}</option>{% endfor %}</select></label>
  <button id="mode" type="button">{% if matrix_first %}graph view{% else %}matrix view{% endif %}</button>
  <button id="back" type="button" hidden>&larr; all namespaces</button>
  <span class="legend">&rarr; allowed{% if would_break %} · <span class="breaks">&#8674; would break</span>{% endif %}</span>
</header>
{% if cannot_judge %}<p class="finding" id="cannot-judge"><strong>The plan cannot judge what would break.</strong> {{ cannot_judge }}</p>
{% endif %}<main>
<div id="canvas">
<div id="grid"{% if not matrix_first %} hidden{% endif %}>
<div id="grid-title"><span id="pair-title">Namespaces: a row per source, a column per destination; a cell counts the connections between them. Click a cell to open that pair.</span> <button id="pair-back" type="button" hidden>&larr; all namespaces</button></div>
<table id="matrix"><thead><tr><th class="corner">from &darr; to &rarr;</th>{% for g in groups %}<th class="col" data-group="{{ g }}"><span>{{ g }}</span></th>{% endfor %}</tr></thead>
<tbody>{% for row in matrix_rows %}<tr><th class="row" data-group="{{ row.group }}">{{ row.group }}</th>{% for c in row.cells %}{% if c %}<td class="cell {{ c.status }}" data-cell="{{ c.index }}" title="{{ c.title }}">{{ c.count }}</td>{% else %}<td class="none"></td>{% endif %}{% endfor %}</tr>
{% endfor %}</tbody></table>
<table id="pair" hidden></table>
<p class="key"><span class="swatch breaks"></span> would break <span class="swatch newly"></span> newly enforced <span class="swatch allowed"></span> allowed</p>
</div>
<div id="where"></div>
<svg id="graph" xmlns="http://www.w3.org/2000/svg" preserveAspectRatio="xMidYMid meet">
<defs>
<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#64748b"/></marker>
<marker id="arrow-red" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#dc2626"/></marker>
</defs>
{{ draw(views[0]) }}
</svg>
</div>
{% for v in views[1:] %}<template class="later" data-view="{{ v.name }}"><svg xmlns="http://www.w3.org/2000/svg">{{ draw(v) }}</svg></template>
{% endfor %}<aside>
  <div id="panel"><p>{% if overview %}Click a namespace to see its workloads and their peers; {% endif %}Click a workload to see its policy and the evidence behind each rule.</p></div>
  {% if breaks %}<section id="would-break"><h2>Would break ({{ data.breaks|length }})</h2>
  <p>Traffic that works today and would stop: why, and the fix (a narrower selector first where there is one, else the rule to add).</p>
  {% for b in breaks %}<div class="break"><p><strong>{{ b.traffic }}</strong> ({{ b.flows }} flows)</p><p>Why: {{ b.why }}</p><p>Fix: {{ b.fix }}</p>{% if b.narrow or b.rule %}<details><summary>YAML to paste</summary>{% if b.narrow %}<p>Narrow {{ b.narrowed }}:</p><pre class="fix-yaml">{{ b.narrow }}</pre>{% endif %}{% if b.rule %}<p>{% if b.narrow %}Or add{% else %}Add{% endif %} to {{ b.policy }}:</p><pre class="fix-yaml">{{ b.rule }}</pre>{% endif %}</details>{% endif %}</div>
  {% endfor %}{% if breaks_more %}<p>… and {{ breaks_more }} more: cpg plan lists every one.</p>{% endif %}</section>{% endif %}
  {% if readiness %}<section id="readiness"><h2>Readiness: {{ ready }} of {{ readiness|length }} workloads ready to enforce</h2>
  <p>Each workload's learning curve (its rules as they first appeared); keep learning until it was observed long enough, on enough flows, and its rules stopped growing.</p>
  <table><tr><th>workload</th><th>verdict</th><th>rules over time</th><th>why</th></tr>{% for r in readiness %}<tr class="{{ 'ready' if r.ready else 'learning' }}"><td>{{ r.name }}</td><td>{{ r.verdict }}</td><td>{% if r.points %}<svg class="curve" width="120" height="28" viewBox="0 0 120 28"><polyline fill="none" stroke="#2563eb" stroke-width="1.5" points="{{ r.points }}"/></svg>{% endif %}</td><td>{{ r.why }}</td></tr>{% endfor %}</table></section>{% endif %}
  <h2>Coverage</h2>
  <p id="coverage">Of {{ coverage.workloads }} workloads, policies select {{ coverage.ingress }} for ingress ({{ coverage.share("ingress") }}) and {{ coverage.egress }} for egress ({{ coverage.share("egress") }}).</p>
  {% if coverage_rows %}<details id="coverage-namespaces"><summary>per namespace</summary><table><tr><th>namespace</th><th>workloads</th><th>ingress</th><th>egress</th><th>open</th></tr>{% for r in coverage_rows %}<tr><td>{{ r.namespace }}</td><td>{{ r.workloads }}</td><td>{{ r.ingress }}</td><td>{{ r.egress }}</td><td>{{ r.open }}</td></tr>{% endfor %}</table></details>{% endif %}
  {% if policy_map %}<h2>Policy map pressure</h2>
  <table id="policy-map"><tr><th>pod</th><th>entries</th><th>of {{ policy_map_max }}</th><th>cut</th></tr>{% for p in policy_map %}<tr><td>{{ p.endpoint }}</td><td>{{ p.entries }}</td><td>{{ p.share }}{% if p.over %} (over){% endif %}</td><td>{{ p.advice|join("; ") }}</td></tr>{% endfor %}</table>{% endif %}
  <h2>Findings</h2>
  {% if findings %}<table><tr><th>finding</th><th>flows</th><th>fix</th></tr>{% for f in findings %}<tr><td>{{ f.what }}</td><td>{{ f.count }}</td><td>{{ f.fix }}</td></tr>{% endfor %}</table>{% else %}<p>None.</p>{% endif %}
  <h2>Infrastructure and transient drops</h2>
  {% if drops %}<table><tr><th>reason</th><th>class</th><th>flows</th><th>fix</th></tr>{% for d in drops %}<tr><td>{{ d.reason }}</td><td>{{ d["class"] }}</td><td>{{ d.count }}</td><td>{{ d.fix }}</td></tr>{% endfor %}</table>{% else %}<p>None.</p>{% endif %}
</aside>
</main>
<script id="data" type="application/json">{{ data|tojson }}</script>
<script>
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("data").textContent);
  var svg = document.getElementById("graph");
  var canvas = document.getElementById("canvas");
  var views = Array.prototype.slice.call(document.querySelectorAll("g.view"));
  var first = views[0];
  var current = first;
  var selected = null;
  var box = null;
  function fit() {
    var w = Number(current.getAttribute("data-w")), h = Number(current.getAttribute("data-h"));
    var r = canvas.getBoundingClientRect();
    var cw = Math.max(r.width, 100), ch = Math.max(r.height, 100), pad = 24;
    var scale = Math.min(cw / (w + 2 * pad), ch / (h + 2 * pad));
    if (scale < 0.85) scale = 1; else scale = Math.min(scale, 1.5);
    var vw = cw / scale, vh = ch / scale;
    var x = vw > w + 2 * pad ? -(vw - w) / 2 : -pad, y = vh > h + 2 * pad ? -(vh - h) / 2 : -pad - 10;
    svg.setAttribute("viewBox", x + " " + y + " " + vw + " " + vh);
    box = svg.viewBox.baseVal;
  }
  function show(view) {
    views.forEach(function (v) { v.setAttribute("display", v === view ? "inline" : "none"); });
    current = view;
    selected = null;
    document.getElementById("back").hidden = !(first.getAttribute("data-view") === "overview" && view !== first);
    document.getElementById("where").textContent = view.getAttribute("data-title") ? "namespace " + view.getAttribute("data-title") + " and its peers" : "";
    fit();
    filter();
  }
  function viewNamed(name) {
    // Views past the first wait in <template>s (a large report opens at once): drawn the
    // first time they are asked for.
    for (var i = 0; i < views.length; i++) if (views[i].getAttribute("data-view") === name) return views[i];
    var later = document.querySelectorAll("template.later");
    for (var j = 0; j < later.length; j++) {
      if (later[j].getAttribute("data-view") !== name) continue;
      var drawn = later[j].content.querySelector("g.view");
      drawn.setAttribute("display", "none");
      svg.appendChild(document.importNode(drawn, true));
      var view = svg.lastElementChild;
      views.push(view);
      wire(view);
      return view;
    }
    return null;
  }
  window.addEventListener("resize", fit);
  svg.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var k = ev.deltaY > 0 ? 1.15 : 1 / 1.15;
    var r = svg.getBoundingClientRect();
    var px = box.x + (ev.clientX - r.left) / r.width * box.width;
    var py = box.y + (ev.clientY - r.top) / r.height * box.height;
    box.x = px - (px - box.x) * k; box.y = py - (py - box.y) * k;
    box.width *= k; box.height *= k;
  }, { passive: false });
  var drag = null;
  svg.addEventListener("mousedown", function (ev) { drag = { x: ev.clientX, y: ev.clientY }; });
  window.addEventListener("mouseup", function () { drag = null; });
  window.addEventListener("mousemove", function (ev) {
    if (!drag) return;
    var r = svg.getBoundingClientRect();
    box.x -= (ev.clientX - drag.x) / r.width * box.width;
    box.y -= (ev.clientY - drag.y) / r.height * box.height;
    drag = { x: ev.clientX, y: ev.clientY };
  });
  function el(tag, text) { var e = document.createElement(tag); if (text !== undefined) e.textContent = text; return e; }
  function panel() { var p = document.getElementById("panel"); p.replaceChildren(); return p; }
  function breakCard(b) {
    var card = el("div"); card.className = "break";
    var head = el("p"); head.appendChild(el("strong", b.traffic)); head.appendChild(document.createTextNode(" (" + b.flows + " flows)")); card.appendChild(head);
    card.appendChild(el("p", "Why: " + b.why));
    card.appendChild(el("p", "Fix: " + b.fix));
    if (b.narrow) { card.appendChild(el("p", "Narrow " + b.narrowed + ":")); var n = el("pre", b.narrow); n.className = "fix-yaml"; card.appendChild(n); }
    if (b.rule) { card.appendChild(el("p", (b.narrow ? "Or add" : "Add") + " to " + b.policy + ":")); var r = el("pre", b.rule); r.className = "fix-yaml"; card.appendChild(r); }
    return card;
  }
  function breaking(match) {
    var found = data.breaks.filter(match);
    if (!found.length) return false;
    var p = panel();
    p.appendChild(el("h2", "Would break: " + found.length));
    found.forEach(function (b) { p.appendChild(breakCard(b)); });
    return true;
  }
  function details(id) {
    var d = data.details[id];
    var mine = data.breaks.filter(function (b) { return b.source === id || b.target === id; });
    var p = panel();
    if (mine.length) {
      p.appendChild(el("h2", "Would break: " + mine.length));
      mine.forEach(function (b) { p.appendChild(breakCard(b)); });
    }
    if (!d) { p.appendChild(el("h2", id.replace(/^[a-z]+:/, ""))); p.appendChild(el("p", "No policy of this folder selects it (a peer, or traffic a plan found).")); return; }
    p.appendChild(el("h2", (d.namespace ? d.namespace + "/" : "") + d.label));
    if (!d.policies.length) p.appendChild(el("p", "No policy selects it here (a peer)."));
    d.policies.forEach(function (name) {
      var pol = data.policies[name];
      p.appendChild(el("h2", pol.policy));
      if (pol.yours) p.appendChild(el("p", "Your policy (cpg did not write it and leaves it as it is); Cilium applies it with cpg's."));
      var pre = el("pre", pol.yaml); pre.className = "yaml"; p.appendChild(pre);
      pol.rules.forEach(function (r) {
        p.appendChild(el("p", r.key + ": " + r.flows + " flows" + (r.learned ? " (" + r.learned + ")" : "") + ", " + r.first + " → " + r.last + ", confidence " + r.confidence));
        var t = el("table");
        r.samples.forEach(function (s) {
          var row = el("tr");
          row.appendChild(el("td", s.time));
          row.appendChild(el("td", (s.src.namespace || "") + "/" + (s.src.pod || s.src.ip || "")));
          row.appendChild(el("td", (s.dst.namespace || "") + "/" + (s.dst.pod || s.dst.ip || "")));
          row.appendChild(el("td", s.protocol + "/" + s.port));
          t.appendChild(row);
        });
        p.appendChild(t);
      });
    });
  }
  function highlight(id) {
    current.querySelectorAll(".node").forEach(function (n) {
      var me = n.getAttribute("data-id") === id;
      n.classList.toggle("selected", me);
    });
    var near = {};
    near[id] = true;
    current.querySelectorAll(".edge, .port").forEach(function (e) {
      var on = id !== null && (e.getAttribute("data-source") === id || e.getAttribute("data-target") === id);
      e.classList.toggle("hot", on);
      e.classList.toggle("faded", id !== null && !on);
      if (on) { near[e.getAttribute("data-source")] = true; near[e.getAttribute("data-target")] = true; }
    });
    current.querySelectorAll(".node").forEach(function (n) {
      n.classList.toggle("faded", id !== null && !near[n.getAttribute("data-id")]);
    });
  }
  function wire(view) { view.querySelectorAll(".node").forEach(function (n) {
    var id = n.getAttribute("data-id");
    n.addEventListener("click", function (ev) {
      ev.stopPropagation();
      if (id.indexOf("ns:") === 0) {
        var view = viewNamed(id);
        if (view) { document.getElementById("ns").value = id.slice(3); show(view); }
        return;
      }
      selected = selected === id ? null : id;
      highlight(selected);
      if (selected) details(id);
    });
    n.addEventListener("mouseenter", function () { if (!selected) highlight(id); });
    n.addEventListener("mouseleave", function () { if (!selected) highlight(null); });
  }); }
  wire(first);
  function filter() {
    var ns = document.getElementById("ns").value;
    var f = document.getElementById("finding").value;
    var finding = f === "" ? null : data.findings[Number(f)];
    var hits = {}, spaces = {};
    if (finding) {
      finding.nodes.forEach(function (id) { hits[id] = true; hits["ns:" + id.slice(3).split("/")[0]] = true; });
      finding.namespaces.forEach(function (s) { spaces[s] = true; hits["ns:" + s] = true; });
    }
    var keep = {};
    var own = function (n) { return !ns || n.getAttribute("data-ns") === ns; };
    current.querySelectorAll(".node").forEach(function (n) { if (own(n)) keep[n.getAttribute("data-id")] = true; });
    var peers = {};
    current.querySelectorAll(".edge").forEach(function (e) {
      var s = e.getAttribute("data-source"), t = e.getAttribute("data-target");
      var on = !ns || keep[s] || keep[t];
      if (on) { peers[s] = true; peers[t] = true; }
      e.classList.toggle("dim", !on);
      var label = current.querySelector('.port[data-edge="' + e.getAttribute("data-edge") + '"]');
      if (label) label.classList.toggle("dim", !on);
    });
    current.querySelectorAll(".node").forEach(function (n) {
      var id = n.getAttribute("data-id");
      n.classList.toggle("dim", !!ns && !keep[id] && !peers[id]);
      n.classList.toggle("hit", !!hits[id]);
    });
    current.querySelectorAll(".box").forEach(function (b) {
      b.classList.toggle("hit", !!spaces[b.getAttribute("data-ns")]);
    });
    if (finding) {
      var p = panel();
      var card = el("div"); card.className = "finding";
      card.appendChild(el("h2", finding.label));
      card.appendChild(el("p", finding.subject + " (" + finding.count + " flows)"));
      card.appendChild(el("p", finding.what));
      card.appendChild(el("p", "Fix: " + finding.fix));
      if (!finding.nodes.length && !finding.namespaces.length) card.appendChild(el("p", "Not a workload of the graph: no node to highlight."));
      p.appendChild(card);
    }
  }
  document.getElementById("ns").addEventListener("change", function () {
    var ns = document.getElementById("ns").value;
    if (!grid.hidden) matrixMode(false);
    if (first.getAttribute("data-view") === "overview") {
      show(ns ? (viewNamed("ns:" + ns) || first) : first);
    } else { filter(); }
  });
  document.getElementById("finding").addEventListener("change", filter);
  var grid = document.getElementById("grid"), matrix = document.getElementById("matrix"), pair = document.getElementById("pair");
  var modeButton = document.getElementById("mode"), pairBack = document.getElementById("pair-back");
  var pairTitle = document.getElementById("pair-title"), matrixTitle = pairTitle.textContent;
  function matrixMode(on) {
    grid.hidden = !on;
    svg.style.display = on ? "none" : "";
    document.getElementById("where").hidden = on;
    modeButton.textContent = on ? "graph view" : "matrix view";
    if (!on) fit();
  }
  function closePair() {
    pair.hidden = true; matrix.hidden = false; pairBack.hidden = true;
    pair.removeAttribute("data-cell"); pairTitle.textContent = matrixTitle;
  }
  function heading(id, cls) {
    var th = el("th"); th.className = cls; th.setAttribute("data-id", id);
    var name = data.names[id] || id;
    if (cls === "col") { var span = el("span", name); th.appendChild(span); } else th.textContent = name;
    th.title = id.replace(/^[a-z]+:/, "");
    th.addEventListener("click", function () { details(id); });
    return th;
  }
  function openPair(index) {
    var found = data.pairs[index];
    var rows = [], cols = [], at = {};
    found.links.forEach(function (l) {
      if (rows.indexOf(l[0]) < 0) rows.push(l[0]);
      if (cols.indexOf(l[1]) < 0) cols.push(l[1]);
      at[l[0] + "\u0000" + l[1]] = l;
    });
    var byName = function (a, b) { return (data.names[a] || a).localeCompare(data.names[b] || b, undefined, { numeric: true }); };
    rows.sort(byName); cols.sort(byName);
    pair.replaceChildren();
    var head = el("tr"), corner = el("th", "from \u2193 to \u2192"); corner.className = "corner"; head.appendChild(corner);
    cols.forEach(function (c) { head.appendChild(heading(c, "col")); });
    pair.appendChild(head);
    rows.forEach(function (r) {
      var tr = el("tr"); tr.appendChild(heading(r, "row"));
      cols.forEach(function (c) {
        var l = at[r + "\u0000" + c], td = el("td");
        if (!l) { td.className = "none"; tr.appendChild(td); return; }
        td.className = "cell " + l[4]; td.textContent = l[2];
        td.title = (data.names[r] || r) + " \u2192 " + (data.names[c] || c) + ": " + l[3] + (l[4] === "breaks" ? " (would break)" : l[4] === "newly" ? " (newly enforced)" : "");
        td.addEventListener("click", function () {
          if (l[4] === "breaks" && breaking(function (b) { return b.source === r && b.target === c; })) return;
          details(data.details[c] ? c : r);
        });
        tr.appendChild(td);
      });
      pair.appendChild(tr);
    });
    pair.setAttribute("data-cell", String(index));
    pair.setAttribute("data-source", found.source); pair.setAttribute("data-target", found.target);
    matrix.hidden = true; pair.hidden = false; pairBack.hidden = false;
    pairTitle.textContent = found.source + " \u2192 " + found.target + ": " + found.links.length + " connection" + (found.links.length === 1 ? "" : "s") + ". Click a workload to see its policy and evidence.";
  }
  matrix.querySelectorAll("td.cell").forEach(function (td) {
    td.addEventListener("click", function () { openPair(Number(td.getAttribute("data-cell"))); });
  });
  matrix.querySelectorAll("th.row, th.col").forEach(function (th) {
    th.addEventListener("click", function () {
      // A namespace's header opens it in the graph (its own view, or the one view filtered).
      var group = th.getAttribute("data-group"), select = document.getElementById("ns");
      if (!Array.prototype.some.call(select.options, function (o) { return o.value === group; })) return;
      select.value = group;
      matrixMode(false);
      var view = first.getAttribute("data-view") === "overview" ? viewNamed("ns:" + group) : null;
      if (view) show(view); else filter();
    });
  });
  pairBack.addEventListener("click", closePair);
  modeButton.addEventListener("click", function () { closePair(); matrixMode(grid.hidden); });
  document.getElementById("back").addEventListener("click", function () { document.getElementById("ns").value = ""; show(first); });
  show(current);
  matrixMode(!grid.hidden);
})();
</script>
</body>
</html>
"""
