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

from cpg_core import to_data
from cpg_core._plan import Plan
from cpg_core.reports._checks import plan_cannot_judge
from cpg_core.reports._graph import (
    OUTSIDE,
    Link,
    Node,
    TrafficGraph,
    group_of,
    links_with_plan,
    plural,
    port_label,
    traffic_graph,
)
from cpg_core.reports._inputs import ReviewInputs
from cpg_core.reports._layout import curve, layout, natural_key, place_labels
from cpg_core.reports._markdown import confidence, learned
from cpg_core.text import clean_text

NODE_W, NODE_H = 160, 30
OVERVIEW_ABOVE = 60
"""Above this many nodes the report opens on namespaces (click one to see its workloads)."""


def _short(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
    for n in nodes:
        cx, cy = drawing.centres[n.id]
        label, _, sub = clean_text(n.label).partition(" · ")
        drawn_nodes.append(
            {
                "id": n.id,
                "label": _short(label),
                "sub": sub,
                "full": clean_text(n.label),
                "kind": n.kind,
                "namespace": n.namespace,
                "x": cx - NODE_W / 2,
                "y": cy - drawing.node_h / 2,
                "h": drawing.node_h,
            }
        )
    drawn_links = []
    curves = [curve(drawing, link.source, link.target) for link in links]
    labels = place_labels([mid for _, mid in curves], [port_label(lk.ports) for lk in links])
    for link, (path, _), (mx, my) in zip(links, curves, labels, strict=True):
        drawn_links.append(
            {
                "source": link.source,
                "target": link.target,
                "d": path,
                "label": port_label(link.ports),
                "title": clean_text(link.title),
                "breaks": link.breaks,
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


def _views(graph: TrafficGraph, plan: Plan | None) -> list[dict[str, Any]]:
    nodes, links = links_with_plan(graph, plan)
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
            f"{g} · {plural(len(ms), 'peer' if g == OUTSIDE else 'workload')}",
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
        if g == OUTSIDE:
            continue
        own = {n.id for n in members[g]}
        focus = [lk for lk in links if lk.source in own or lk.target in own]
        shown = own | {lk.source for lk in focus} | {lk.target for lk in focus}
        views.append(_view(f"ns:{g}", g, [by_id[i] for i in sorted(shown)], focus, overview=False))
    return views


def html_report(*, title: str, inputs: ReviewInputs) -> str:
    graph = traffic_graph(inputs.policies)
    views = _views(graph, inputs.plan)
    details: dict[str, Any] = {}
    for node in graph.nodes:
        entries = []
        for name in graph.selected_by.get(node.id, ()):
            doc = inputs.evidence.get(name)
            rules = []
            for rule in doc.rules if doc else ():
                rules.append(
                    {
                        "key": rule.key,
                        "flows": rule.flow_count,
                        "learned": learned(rule).strip(" ()"),
                        "first": rule.first_seen,
                        "last": rule.last_seen,
                        "confidence": confidence(rule),
                        "samples": to_data(list(rule.samples[:5])),
                    }
                )
            entries.append({"policy": name, "yaml": inputs.texts.get(name, ""), "rules": rules})
        details[node.id] = {
            "label": node.label,
            "namespace": node.namespace,
            "kind": node.kind,
            "policies": entries,
        }
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
        data={"details": details, "findings": findings},
        policies=len(inputs.policies),
    )


TEMPLATE = """{% macro draw(v) %}<g class="view" data-view="{{ v.name }}" data-title="{{ v.title }}" data-w="{{ v.width|round|int }}" data-h="{{ v.height|round|int }}">
{% for b in v.boxes %}<g class="box" data-ns="{{ b.name }}"><rect x="{{ b.x }}" y="{{ b.y }}" width="{{ b.w }}" height="{{ b.h }}" rx="8"/><text x="{{ b.x + 10 }}" y="{{ b.y + 17 }}">{{ b.name }}</text></g>
{% endfor %}
{% for e in v.links %}<path class="edge{% if e.breaks %} breaks{% endif %}" d="{{ e.d }}" data-source="{{ e.source }}" data-target="{{ e.target }}" data-edge="{{ loop.index0 }}"><title>{{ e.title }}</title></path>
{% endfor %}
{% for e in v.links %}<text class="port{% if e.breaks %} breaks{% endif %}" x="{{ e.lx|round(1) }}" y="{{ e.ly|round(1) }}" text-anchor="middle" dy="-3" data-edge="{{ loop.index0 }}" data-source="{{ e.source }}" data-target="{{ e.target }}">{{ e.label }}</text>
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
main { flex: 1; min-height: 0; display: grid; grid-template-columns: 1fr 380px; }
#canvas { overflow: hidden; background: #f8fafc; cursor: grab; position: relative; }
#canvas svg { width: 100%; height: 100%; display: block; }
#where { position: absolute; left: 10px; top: 8px; font-weight: 600; color: #334155; }
aside { overflow: auto; border-left: 1px solid #cbd5e1; padding: 8px 12px; }
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
.dim, .faded { opacity: 0.12; }
pre { background: #0f172a; color: #e2e8f0; padding: 8px; overflow: auto; font-size: 12px; }
table { border-collapse: collapse; font-size: 12px; }
td, th { border: 1px solid #cbd5e1; padding: 2px 4px; text-align: left; }
h2 { font-size: 16px; margin: 12px 0 4px; }
.finding { background: #fef3c7; padding: 6px 8px; border: 1px solid #d97706; }
</style>
</head>
<body>
<header>
  <strong>cpg report: {{ title }}</strong>
  <span>{{ policies }} policies · {{ node_count }} nodes · {{ edge_count }} connections{% if would_break %} · <span class="breaks">{{ would_break }} flows would break</span>{% endif %}{% if cannot_judge %} · <span class="breaks" title="{{ cannot_judge }}">the plan cannot judge what would break</span>{% endif %}</span>
  <label>namespace <select id="ns"><option value="">all</option>{% for ns in namespaces %}<option>{{ ns }}</option>{% endfor %}</select></label>
  <label>finding <select id="finding"><option value="">none</option>{% for f in findings %}<option value="{{ loop.index0 }}">{{ f.label }}: {{ f.subject[:50] }}</option>{% endfor %}</select></label>
  <button id="back" type="button" hidden>&larr; all namespaces</button>
  <span class="legend">&rarr; allowed{% if would_break %} · <span class="breaks">&#8674; would break</span>{% endif %}</span>
</header>
{% if cannot_judge %}<p class="finding" id="cannot-judge"><strong>The plan cannot judge what would break.</strong> {{ cannot_judge }}</p>
{% endif %}<main>
<div id="canvas">
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
  function details(id) {
    var d = data.details[id];
    var p = panel();
    if (!d) { p.appendChild(el("h2", id.replace(/^[a-z]+:/, ""))); p.appendChild(el("p", "No policy of this folder selects it (a peer, or traffic a plan found).")); return; }
    p.appendChild(el("h2", (d.namespace ? d.namespace + "/" : "") + d.label));
    if (!d.policies.length) p.appendChild(el("p", "No policy selects it here (a peer)."));
    d.policies.forEach(function (pol) {
      p.appendChild(el("h2", pol.policy));
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
    if (first.getAttribute("data-view") === "overview") {
      show(ns ? (viewNamed("ns:" + ns) || first) : first);
    } else { filter(); }
  });
  document.getElementById("finding").addEventListener("change", filter);
  document.getElementById("back").addEventListener("click", function () { document.getElementById("ns").value = ""; show(first); });
  show(current);
})();
</script>
</body>
</html>
"""
