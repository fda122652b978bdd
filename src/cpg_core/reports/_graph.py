"""Who may talk to whom: the allowed traffic of a set of policies as a graph. Workloads are
grouped by namespace; entities, CIDRs and FQDNs are nodes of their own; each edge carries the
ports it allows. The Markdown and HTML reports draw the same graph."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from cpg_core.base._documents import PolicyDocument
from cpg_core.base._labels import NAMESPACE_LABEL, PRIORITY_KEYS, workload_name
from cpg_core.review._plan import Plan
from cpg_core.synthesis._baseline import member_view

OUTSIDE = "outside the cluster"
WHOLE_CLUSTER = "the whole cluster"
"""The group of the ``cluster`` entity: every pod and node, which no namespace holds (§D47)."""
PEER_GROUPS = frozenset({OUTSIDE, WHOLE_CLUSTER})
"""Groups of peers, not namespaces: no workload of their own, no namespace view."""
"""The group of peers that are not workloads (entities, CIDRs, FQDNs)."""


@attrs.frozen(slots=True)
class Node:
    id: str
    label: str
    kind: str
    """``workload``, ``entity``, ``cidr``, ``fqdn`` or ``selector`` (an endpoint selector that
    names no workload)."""
    namespace: str = ""
    workload: str = ""
    """The workload's name as evidence and plans give it (a ``workload`` node only; its
    label may spell its selector instead)."""


@attrs.frozen(slots=True)
class Edge:
    source: str
    target: str
    ports: tuple[str, ...]
    policy: str


@attrs.frozen(slots=True)
class TrafficGraph:
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    selected_by: dict[str, tuple[str, ...]] = attrs.field(factory=dict, hash=False)
    """Node id -> the policies (``namespace/name``) whose endpointSelector picks it."""

    def namespaces(self) -> list[str]:
        return sorted({n.namespace for n in self.nodes if n.namespace})


def _selected(match_labels: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(
        sorted(
            (str(k).removeprefix("k8s:"), str(v))
            for k, v in match_labels.items()
            if str(k).removeprefix("k8s:") != NAMESPACE_LABEL
            and not str(k).removeprefix("k8s:").startswith("io.cilium.k8s.")
        )
    )


def _endpoint_node(selector: Mapping[str, Any], namespace: str) -> Node:
    labels = selector.get("matchLabels") or {}
    ns = str(labels.get(NAMESPACE_LABEL) or labels.get("k8s:" + NAMESPACE_LABEL) or namespace)
    items = _selected(labels)
    if selector.get("matchExpressions") or not items:
        shown = ",".join(f"{k}={v}" for k, v in items) or "all"
        extra = " +expr" if selector.get("matchExpressions") else ""
        return Node(f"sel:{ns}/{shown}{extra}", f"{shown}{extra}", "selector", ns)
    name = workload_name(items) if any(k in PRIORITY_KEYS for k, _ in items) else ""
    name = name or ",".join(f"{k}={v}" for k, v in items)
    return Node(f"wl:{ns}/{name}", name, "workload", ns, workload_name(items))


def target_node(policy: PolicyDocument, spec: Mapping[str, Any]) -> Node:
    meta = policy.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    return _endpoint_node(spec.get("endpointSelector") or {}, namespace)


def _peer_nodes(rule: Mapping[str, Any], prefix: str, namespace: str) -> list[Node]:
    nodes = [_endpoint_node(s or {}, namespace) for s in rule.get(prefix + "Endpoints") or []]
    nodes += [Node(f"entity:{e}", str(e), "entity") for e in rule.get(prefix + "Entities") or []]
    nodes += [Node(f"cidr:{c}", str(c), "cidr") for c in rule.get(prefix + "CIDR") or []]
    nodes += [
        Node(f"cidr:{c.get('cidr')}", str(c.get("cidr")), "cidr")
        for c in rule.get(prefix + "CIDRSet") or []
        if isinstance(c, Mapping)
    ]
    if prefix == "to":
        for fqdn in rule.get("toFQDNs") or []:
            name = str(fqdn.get("matchName") or fqdn.get("matchPattern") or "")
            nodes.append(Node(f"fqdn:{name}", name, "fqdn"))
    return nodes or [Node("entity:all", "all", "entity")]


def _ports(rule: Mapping[str, Any]) -> list[str]:
    out = []
    for port_rule in rule.get("toPorts") or []:
        rules = port_rule.get("rules") or {}
        l7 = " (HTTP)" if rules.get("http") else " (DNS)" if rules.get("dns") else ""
        for port in port_rule.get("ports") or []:
            text = f"{port.get('protocol', 'ANY')}/{port.get('port', '*')}"
            if port.get("endPort"):
                text += f"-{port['endPort']}"
            out.append(text + l7)
    for icmp in rule.get("icmps") or []:
        out += [f"ICMP type {f.get('type')}" for f in icmp.get("fields") or []]
    return out or ["any port"]


def traffic_graph(policies: Iterable[PolicyDocument]) -> TrafficGraph:
    """The allowed traffic of ``policies`` (ingress and egress allow rules)."""
    nodes: dict[str, Node] = {}
    edges: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    selected_by: dict[str, set[str]] = {}
    for policy in policies:
        if isinstance(policy, Mapping):
            policy = member_view(policy)  # a shared policy: drawn at each workload it serves
        if not isinstance(policy, Mapping) or not str(policy.get("kind", "")).startswith("Cilium"):
            continue  # a ClusterNetworkPolicy selects by namespace and tier: not drawn here
        meta = policy.get("metadata") or {}
        name = f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")
        specs = [policy.get("spec")] if policy.get("spec") else []
        specs += list(policy.get("specs") or [])
        for spec in specs:
            if not isinstance(spec, Mapping):
                continue
            target = target_node(policy, spec)
            nodes.setdefault(target.id, target)
            selected_by.setdefault(target.id, set()).add(name)
            for section, prefix in (("ingress", "from"), ("egress", "to")):
                for rule in spec.get(section) or []:
                    if not isinstance(rule, Mapping):
                        continue
                    for peer in _peer_nodes(rule, prefix, target.namespace):
                        nodes.setdefault(peer.id, peer)
                        key = (peer.id, target.id) if section == "ingress" else (target.id, peer.id)
                        ports, names = edges.setdefault(key, (set(), set()))
                        ports.update(_ports(rule))
                        names.add(name)
    return TrafficGraph(
        nodes=tuple(sorted(nodes.values(), key=lambda n: (n.namespace, n.kind, n.label))),
        edges=tuple(
            Edge(source, target, tuple(sorted(ports)), ", ".join(sorted(names)))
            for (source, target), (ports, names) in sorted(edges.items())
        ),
        selected_by={node: tuple(sorted(names)) for node, names in sorted(selected_by.items())},
    )


def plural(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def port_label(ports: Sequence[str]) -> str:
    """``TCP/9080`` or, when many, ``TCP/9080 +3``."""
    return ports[0] + (f" +{len(ports) - 1}" if len(ports) > 1 else "") if ports else "any"


@attrs.frozen(slots=True)
class Link:
    source: str
    target: str
    ports: tuple[str, ...]
    title: str
    breaks: bool = False


def group_of(node: Node) -> str:
    if node.kind in ("workload", "selector") and node.namespace:
        return node.namespace
    return WHOLE_CLUSTER if node.id == "entity:cluster" else OUTSIDE


def links_with_plan(graph: TrafficGraph, plan: Plan | None) -> tuple[list[Node], list[Link]]:
    """The graph's nodes and edges as links to draw, with the plan's would-break traffic as
    links of their own (and the nodes they need that no policy names)."""
    known = {n.id: n for n in graph.nodes}
    extra: dict[str, Node] = {}
    links = []

    def node(name: str) -> str:
        if "/" in name:
            ns, workload = name.split("/", 1)
            found = Node(f"wl:{ns}/{workload}", workload, "workload", ns, workload)
        else:
            found = Node(f"entity:{name}", name, "entity")
        if found.id not in known:
            extra.setdefault(found.id, found)
        return found.id

    for item in plan.would_break if plan else ():
        t = item.traffic
        port = f"{t.protocol}/{t.port}"
        links.append(
            Link(
                node(t.source),
                node(t.destination),
                (port,),
                f"would break: {t.source} → {t.destination} {port} ({t.flows} flows): {item.why}",
                breaks=True,
            )
        )
    allowed = [
        Link(e.source, e.target, e.ports, f"{', '.join(e.ports)} ({e.policy})") for e in graph.edges
    ]
    return [*graph.nodes, *sorted(extra.values(), key=lambda n: n.id)], allowed + links
