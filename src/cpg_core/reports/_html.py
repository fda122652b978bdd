"""The HTML report: one self-contained file (no request to any network when it is viewed, for
air-gapped clusters) with the traffic graph drawn as inline SVG from a layout computed here,
a small script of cpg's own for pan/zoom, filters and the side panel, and Jinja2 templating
so that every text from a capture is escaped."""

from __future__ import annotations

import math
from typing import Any

import jinja2

from cpg_core import to_data
from cpg_core.reports._graph import Node, TrafficGraph, traffic_graph
from cpg_core.reports._inputs import ReviewInputs
from cpg_core.reports._markdown import confidence, learned
from cpg_core.text import clean_text

NODE_W, NODE_H, GAP = 150, 34, 16
BOX_PAD, BOX_HEAD = 14, 26


def layout(
    graph: TrafficGraph,
) -> tuple[dict[str, tuple[float, float]], list[dict[str, Any]], float, float]:
    """Node centres, namespace boxes and the canvas size: each namespace a box of its
    workloads in a grid, the boxes in a grid of their own, peers outside the cluster in a
    last box. Deterministic: the same graph, the same drawing."""
    groups: dict[str, list[Node]] = {}
    for node in graph.nodes:
        key = (
            node.namespace if node.kind in ("workload", "selector") else "\u2002outside the cluster"
        )
        groups.setdefault(key, []).append(node)
    names = sorted(groups)
    per_row = max(1, math.ceil(math.sqrt(len(names))))
    positions: dict[str, tuple[float, float]] = {}
    boxes = []
    x = y = row_height = 0.0
    width = 0.0
    for index, name in enumerate(names):
        nodes = groups[name]
        cols = max(1, math.ceil(math.sqrt(len(nodes))))
        rows = math.ceil(len(nodes) / cols)
        box_w = cols * (NODE_W + GAP) - GAP + 2 * BOX_PAD
        box_h = rows * (NODE_H + GAP) - GAP + 2 * BOX_PAD + BOX_HEAD
        if index and index % per_row == 0:
            x, y, row_height = 0.0, y + row_height + 3 * GAP, 0.0
        for i, node in enumerate(nodes):
            cx = x + BOX_PAD + (i % cols) * (NODE_W + GAP) + NODE_W / 2
            cy = y + BOX_HEAD + BOX_PAD + (i // cols) * (NODE_H + GAP) + NODE_H / 2
            positions[node.id] = (cx, cy)
        boxes.append({"name": name.strip(), "x": x, "y": y, "w": box_w, "h": box_h})
        x += box_w + 3 * GAP
        width = max(width, x)
        row_height = max(row_height, box_h)
    return positions, boxes, max(width, 400.0), max(y + row_height, 200.0)


def _border(
    a: tuple[float, float], b: tuple[float, float]
) -> tuple[tuple[float, float], tuple[float, float]]:
    """The segment from node a to node b, cut at both boxes' borders (the arrow shows)."""
    (x1, y1), (x2, y2) = a, b
    dx, dy = x2 - x1, y2 - y1
    if not dx and not dy:
        return a, b
    half_w, half_h = NODE_W / 2 + 2, NODE_H / 2 + 2
    t = min(half_w / abs(dx) if dx else math.inf, half_h / abs(dy) if dy else math.inf)
    t = min(t, 0.5)
    return (x1 + dx * t, y1 + dy * t), (x2 - dx * t, y2 - dy * t)


def _short(text: str, limit: int = 22) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def html_report(*, title: str, inputs: ReviewInputs) -> str:
    graph = traffic_graph(inputs.policies)
    positions, boxes, width, height = layout(graph)
    details = {}
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
    for finding in sorted(
        health.findings if health else (), key=lambda f: (-f.count, f.kind, f.subject)
    ):
        label, what, fix = finding.advice()
        involved = [
            n.id
            for n in graph.nodes
            if n.namespace and f"{n.namespace}/{n.label}" in finding.subject
        ]
        findings.append(
            {"label": label, "what": what, "fix": fix, "count": finding.count, "nodes": involved}
        )
    drops = [
        {"reason": d.reason, "class": d.drop_class, "count": d.count, "fix": d.remediation}
        for d in sorted(health.drops if health else (), key=lambda d: (-d.count, d.reason))
    ]
    edges = []
    for edge in graph.edges:
        (x1, y1), (x2, y2) = _border(positions[edge.source], positions[edge.target])
        edges.append(
            {
                "source": edge.source,
                "target": edge.target,
                "d": f"M{x1:.0f},{y1:.0f} L{x2:.0f},{y2:.0f}",
                "ports": ", ".join(edge.ports),
                "policy": edge.policy,
            }
        )
    nodes = [
        {
            "id": n.id,
            "label": _short(clean_text(n.label)),
            "full": clean_text(n.label),
            "kind": n.kind,
            "namespace": n.namespace,
            "x": positions[n.id][0] - NODE_W / 2,
            "y": positions[n.id][1] - NODE_H / 2,
        }
        for n in graph.nodes
    ]
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(TEMPLATE).render(
        title=clean_text(title),
        width=width,
        height=height,
        node_w=NODE_W,
        node_h=NODE_H,
        boxes=boxes,
        nodes=nodes,
        edges=edges,
        namespaces=graph.namespaces(),
        findings=findings,
        drops=drops,
        data={"details": details, "findings": findings},
        policies=len(inputs.policies),
    )


TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>cpg report: {{ title }}</title>
<style>
body { margin: 0; font: 14px system-ui, sans-serif; display: grid; grid-template-columns: 1fr 420px; height: 100vh; }
header { grid-column: 1 / 3; padding: 8px 12px; background: #1f2937; color: #fff; display: flex; gap: 16px; align-items: center; }
header select { font-size: 13px; max-width: 320px; }
#canvas { overflow: hidden; background: #f8fafc; cursor: grab; }
#canvas svg { width: 100%; height: 100%; }
aside { overflow: auto; border-left: 1px solid #cbd5e1; padding: 8px 12px; }
.box rect { fill: #e2e8f0; stroke: #94a3b8; }
.box text { font-weight: 600; fill: #334155; }
.node rect { fill: #fff; stroke: #2563eb; rx: 6; }
.node.entity rect, .node.cidr rect, .node.fqdn rect { stroke: #9333ea; }
.node.hit rect { fill: #fde68a; }
.node text { font-size: 12px; pointer-events: none; }
.node { cursor: pointer; }
.edge { stroke: #64748b; stroke-width: 1.2; fill: none; marker-end: url(#arrow); }
.dim { opacity: 0.12; }
pre { background: #0f172a; color: #e2e8f0; padding: 8px; overflow: auto; font-size: 12px; }
table { border-collapse: collapse; font-size: 12px; }
td, th { border: 1px solid #cbd5e1; padding: 2px 4px; text-align: left; }
h2 { font-size: 16px; margin: 12px 0 4px; }
</style>
</head>
<body>
<header>
  <strong>cpg report: {{ title }}</strong>
  <span>{{ policies }} policies, {{ nodes|length }} nodes, {{ edges|length }} connections</span>
  <label>namespace <select id="ns"><option value="">all</option>{% for ns in namespaces %}<option>{{ ns }}</option>{% endfor %}</select></label>
  <label>finding <select id="finding"><option value="">none</option>{% for f in findings %}<option value="{{ loop.index0 }}">{{ f.label }}: {{ f.what[:60] }}</option>{% endfor %}</select></label>
</header>
<div id="canvas">
<svg id="graph" viewBox="0 0 {{ width|round|int }} {{ height|round|int }}" xmlns="http://www.w3.org/2000/svg">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#64748b"/></marker></defs>
<g id="world">
{% for b in boxes %}<g class="box"><rect x="{{ b.x }}" y="{{ b.y }}" width="{{ b.w }}" height="{{ b.h }}" rx="8"/><text x="{{ b.x + 10 }}" y="{{ b.y + 18 }}">{{ b.name }}</text></g>
{% endfor %}
{% for e in edges %}<path class="edge" d="{{ e.d }}" data-source="{{ e.source }}" data-target="{{ e.target }}"><title>{{ e.ports }} ({{ e.policy }})</title></path>
{% endfor %}
{% for n in nodes %}<g class="node {{ n.kind }}" data-id="{{ n.id }}" data-ns="{{ n.namespace }}"><rect x="{{ n.x }}" y="{{ n.y }}" width="{{ node_w }}" height="{{ node_h }}"/><text x="{{ n.x + 8 }}" y="{{ n.y + 21 }}">{{ n.label }}</text><title>{{ n.full }}</title></g>
{% endfor %}
</g>
</svg>
</div>
<aside>
  <div id="panel"><p>Click a workload to see its policy and the evidence behind each rule.</p></div>
  <h2>Findings</h2>
  {% if findings %}<table><tr><th>finding</th><th>flows</th><th>fix</th></tr>{% for f in findings %}<tr><td>{{ f.what }}</td><td>{{ f.count }}</td><td>{{ f.fix }}</td></tr>{% endfor %}</table>{% else %}<p>None.</p>{% endif %}
  <h2>Infrastructure and transient drops</h2>
  {% if drops %}<table><tr><th>reason</th><th>class</th><th>flows</th><th>fix</th></tr>{% for d in drops %}<tr><td>{{ d.reason }}</td><td>{{ d["class"] }}</td><td>{{ d.count }}</td><td>{{ d.fix }}</td></tr>{% endfor %}</table>{% else %}<p>None.</p>{% endif %}
</aside>
<script id="data" type="application/json">{{ data|tojson }}</script>
<script>
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("data").textContent);
  var svg = document.getElementById("graph");
  var box = svg.viewBox.baseVal;
  var drag = null;
  svg.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var k = ev.deltaY > 0 ? 1.15 : 1 / 1.15;
    var r = svg.getBoundingClientRect();
    var px = box.x + (ev.clientX - r.left) / r.width * box.width;
    var py = box.y + (ev.clientY - r.top) / r.height * box.height;
    box.x = px - (px - box.x) * k; box.y = py - (py - box.y) * k;
    box.width *= k; box.height *= k;
  }, { passive: false });
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
  function show(id) {
    var d = data.details[id];
    var panel = document.getElementById("panel");
    panel.replaceChildren();
    panel.appendChild(el("h2", (d.namespace ? d.namespace + "/" : "") + d.label));
    if (!d.policies.length) panel.appendChild(el("p", "No policy selects it here (a peer)."));
    d.policies.forEach(function (p) {
      panel.appendChild(el("h2", p.policy));
      var pre = el("pre", p.yaml); pre.className = "yaml"; panel.appendChild(pre);
      p.rules.forEach(function (r) {
        panel.appendChild(el("p", r.key + ": " + r.flows + " flows" + (r.learned ? " (" + r.learned + ")" : "") + ", " + r.first + " → " + r.last + ", confidence " + r.confidence));
        var t = el("table");
        r.samples.forEach(function (s) {
          var row = el("tr");
          row.appendChild(el("td", s.time));
          row.appendChild(el("td", (s.src.namespace || "") + "/" + (s.src.pod || s.src.ip || "")));
          row.appendChild(el("td", (s.dst.namespace || "") + "/" + (s.dst.pod || s.dst.ip || "")));
          row.appendChild(el("td", s.protocol + "/" + s.port));
          t.appendChild(row);
        });
        panel.appendChild(t);
      });
    });
  }
  document.querySelectorAll(".node").forEach(function (n) {
    n.addEventListener("click", function () { show(n.getAttribute("data-id")); });
  });
  function filter() {
    var ns = document.getElementById("ns").value;
    var f = document.getElementById("finding").value;
    var hits = f === "" ? [] : data.findings[Number(f)].nodes;
    var keep = {};
    document.querySelectorAll(".node").forEach(function (n) {
      var id = n.getAttribute("data-id");
      var on = !ns || n.getAttribute("data-ns") === ns;
      n.classList.toggle("dim", !on);
      n.classList.toggle("hit", hits.indexOf(id) >= 0);
      if (on) keep[id] = true;
    });
    document.querySelectorAll(".edge").forEach(function (e) {
      var on = !ns || keep[e.getAttribute("data-source")] || keep[e.getAttribute("data-target")];
      e.classList.toggle("dim", !on);
    });
  }
  document.getElementById("ns").addEventListener("change", filter);
  document.getElementById("finding").addEventListener("change", filter);
})();
</script>
</body>
</html>
"""
