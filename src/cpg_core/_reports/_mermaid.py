"""The Markdown report's graphs, in Mermaid (GitHub draws them). A small set of policies is one
graph of workloads in their namespaces; a larger one is a graph of namespaces (with how many
workloads each has and how many connections join them) and a graph per namespace of its
workloads and their peers. No graph hides part of a namespace without saying "… N more"
inside it, and each stays narrow enough for a pull request's column. Would-break traffic from
a plan is drawn dashed and red (§D30)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cpg_core._reports._layout import natural_key
from cpg_core._reports.graph import (
    OUTSIDE,
    PEER_GROUPS,
    Link,
    Node,
    TrafficGraph,
    group_of,
    links_with_plan,
    plural,
    port_label,
)
from cpg_core._review.plan_documents import Plan
from cpg_core.text import clean_text

WHOLE_UP_TO = (24, 36)
"""One workload graph for at most this many nodes and links; namespaces above."""
PER_NAMESPACE = 10
"""Workloads drawn in a namespace's graph; the rest are "… N more"."""
PEERS = 8
"""Peers drawn around a namespace's workloads; the rest are "… N more"."""
NAMESPACE_GRAPHS = 12
"""Namespaces with a graph of their own; the rest are named in a line below."""
_INIT = '%%{init: {"flowchart": {"nodeSpacing": 14, "rankSpacing": 30}}}%%'
_BREAKS = "stroke:#dc2626,stroke-width:2px,stroke-dasharray:5 4,color:#b91c1c"


def _text(text: str) -> str:
    """A label as Mermaid shows it and never reads as syntax: quotes, angle brackets and
    backticks as entity codes, and ``%`` too, so a name holding ``%%{init: …}%%`` is no
    directive (Mermaid finds directives anywhere in the text) and ``%%`` no comment."""
    value = clean_text(text).replace("\n", " ")
    for char, code in (
        ("#", "#35;"),
        ('"', "#quot;"),
        ("<", "#lt;"),
        (">", "#gt;"),
        ("`", "#96;"),
        ("%", "#37;"),
    ):
        value = value.replace(char, code)
    return value


class _Chart:
    """One flowchart being written: ids for nodes, lines, and the links to style."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ids: dict[str, str] = {}
        self.links = 0
        self.breaking: list[int] = []

    def node_id(self, key: str) -> str:
        return self.ids.setdefault(key, f"n{len(self.ids)}")

    def node(self, key: str, label: str, kind: str, indent: str = "  ") -> None:
        """A node; `` · `` in ``label`` breaks the line there."""
        ident, text = self.node_id(key), "<br/>".join(_text(p) for p in label.split(" · "))
        if kind == "entity":
            self.lines.append(f'{indent}{ident}(["{text}"])')
        elif kind in ("cidr", "fqdn"):
            self.lines.append(f'{indent}{ident}[/"{text}"/]')
        else:
            self.lines.append(f'{indent}{ident}["{text}"]')

    def link(self, source: str, target: str, label: str, breaks: bool) -> None:
        arrow = "-.->" if breaks else "-->"
        text = _text(("would break: " if breaks else "") + label)
        self.lines.append(f'  {self.ids[source]} {arrow}|"{text}"| {self.ids[target]}')
        if breaks:
            self.breaking.append(self.links)
        self.links += 1

    def text(self, direction: str) -> str:
        lines = [_INIT, f"flowchart {direction}", *self.lines]
        if self.breaking:
            lines.append(f"  linkStyle {','.join(map(str, self.breaking))} {_BREAKS}")
        return "\n".join(lines)


def _direction(pairs: Mapping[tuple[str, str], object]) -> str:
    """``LR`` when the graph is broader than deep (a hub and its spokes), else ``TB`` (a
    chain): either way the long side runs down the page, not across the column."""
    succ: dict[str, set[str]] = {}
    for a, b in pairs:
        if a != b:
            succ.setdefault(a, set()).add(b)
    depth: dict[str, int] = {}
    for _ in range(len(succ) + 1):  # longest path, bounded (cycles stop growing it)
        changed = False
        for a, targets in succ.items():
            for b in targets:
                if depth.get(b, 0) < depth.get(a, 0) + 1 <= len(succ):
                    depth[b], changed = depth.get(a, 0) + 1, True
        if not changed:
            break
    ranks: dict[int, int] = {}
    for node in {n for pair in pairs for n in pair}:
        ranks[depth.get(node, 0)] = ranks.get(depth.get(node, 0), 0) + 1
    breadth = max(ranks.values(), default=1)
    return "LR" if breadth > len(ranks) else "TB"


def _workload_graph(nodes: Sequence[Node], links: Sequence[Link]) -> str:
    chart = _Chart()
    groups: dict[str, list[Node]] = {}
    for n in nodes:
        groups.setdefault(group_of(n), []).append(n)
    for index, name in enumerate(sorted(groups, key=lambda g: (g == OUTSIDE, natural_key(g)))):
        members = sorted(groups[name], key=lambda n: natural_key(n.label))
        if name == OUTSIDE:
            for n in members:
                chart.node(n.id, n.label, n.kind)
            continue
        chart.lines.append(f'  subgraph ns{index}["{_text(name)}"]')
        for n in members:
            chart.node(n.id, n.label, n.kind, "    ")
        chart.lines.append("  end")
    for link in links:
        chart.link(link.source, link.target, port_label(link.ports), link.breaks)
    return chart.text(_direction({(lk.source, lk.target): [] for lk in links}))


def _namespace_graph(nodes: Sequence[Node], links: Sequence[Link]) -> str:
    chart = _Chart()
    by_id = {n.id: n for n in nodes}
    members: dict[str, int] = {}
    for n in nodes:
        members[group_of(n)] = members.get(group_of(n), 0) + 1
    for name in sorted(members, key=lambda g: (g == OUTSIDE, natural_key(g))):
        what = "peer" if name in PEER_GROUPS else "workload"
        chart.node(name, f"{name} · {plural(members[name], what)}", "namespace")
    joined: dict[tuple[str, str], list[Link]] = {}
    for link in links:
        a, b = group_of(by_id[link.source]), group_of(by_id[link.target])
        if a != b:
            joined.setdefault((a, b), []).append(link)
    for (a, b), between in sorted(
        joined.items(), key=lambda kv: (natural_key(kv[0][0]), natural_key(kv[0][1]))
    ):
        breaking = [lk for lk in between if lk.breaks]
        if len(breaking) < len(between):
            chart.link(a, b, str(len(between) - len(breaking)), False)
        if breaking:
            chart.link(a, b, str(len(breaking)), True)
    return chart.text(_direction(joined))


def _focus_graph(namespace: str, nodes: Sequence[Node], links: Sequence[Link]) -> str:
    """One namespace's workloads (a subgraph, "… N more" past the cap) and their peers."""
    by_id = {n.id: n for n in nodes}
    own = sorted((n for n in nodes if group_of(n) == namespace), key=lambda n: natural_key(n.label))
    drawn = {n.id for n in own[:PER_NAMESPACE]}
    touching = [lk for lk in links if lk.source in drawn or lk.target in drawn]
    peers: list[str] = []
    for lk in touching:
        for end in (lk.source, lk.target):
            if end not in drawn and end not in peers:
                peers.append(end)
    peers.sort(key=lambda p: natural_key(f"{by_id[p].namespace}/{by_id[p].label}"))
    shown_peers = set(peers[:PEERS])
    chart = _Chart()
    chart.lines.append(f'  subgraph focus["{_text(namespace)}"]')
    for n in own[:PER_NAMESPACE]:
        chart.node(n.id, n.label, n.kind, "    ")
    if len(own) > PER_NAMESPACE:
        chart.node("more-own", f"… {len(own) - PER_NAMESPACE} more in {namespace}", "more", "    ")
    chart.lines.append("  end")
    for key in peers[:PEERS]:
        peer = by_id[key]
        name = f"{peer.namespace}/{peer.label}" if group_of(peer) not in PEER_GROUPS else peer.label
        chart.node(key, name, peer.kind)
    if len(peers) > PEERS:
        chart.node("more-peers", f"… {len(peers) - PEERS} more peers", "more")
    pairs: dict[tuple[str, str], object] = {}
    for lk in touching:
        if {lk.source, lk.target} <= drawn | shown_peers:
            chart.link(lk.source, lk.target, port_label(lk.ports), lk.breaks)
            pairs[(lk.source, lk.target)] = []
    return chart.text(_direction(pairs))


def mermaid_graphs(
    graph: TrafficGraph, plan: Plan | None = None
) -> tuple[list[tuple[str, str]], list[str]]:
    """(heading, flowchart) pairs — one untitled graph when small, else the namespaces and
    one per namespace, the first ``NAMESPACE_GRAPHS`` — and the namespaces left without one."""
    nodes, links = links_with_plan(graph, plan)
    if len(nodes) <= WHOLE_UP_TO[0] and len(links) <= WHOLE_UP_TO[1]:
        return [("", _workload_graph(nodes, links))], []
    out = [("Namespaces", _namespace_graph(nodes, links))]
    spaces = sorted({group_of(n) for n in nodes} - PEER_GROUPS, key=natural_key)
    for name in spaces[:NAMESPACE_GRAPHS]:
        out.append((f"Namespace {name}", _focus_graph(name, nodes, links)))
    return out, spaces[NAMESPACE_GRAPHS:]
