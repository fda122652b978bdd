"""Who may talk to whom: the allowed traffic of a set of policies as a graph. Workloads are
grouped by namespace; entities, CIDRs and FQDNs are nodes of their own; each edge carries the
ports it allows. The Markdown and HTML reports draw the same graph."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from cpg_core._base.documents import PolicyDocument
from cpg_core._base.labels import NAMESPACE_LABEL, PRIORITY_KEYS, workload_name
from cpg_core._policy.model import Policy, Rule, Selector, Spec, read_policy
from cpg_core._review.plan_documents import Plan
from cpg_core._synthesis.baseline import member_view

OUTSIDE = "outside the cluster"
"""The group of peers beyond the cluster: world, CIDRs, FQDNs."""
WHOLE_CLUSTER = "the whole cluster"
"""The group of the ``cluster`` entity: every pod and node, which no namespace holds (§D47)."""
CLUSTER_OWN = "nodes and API server"
"""The group of the entities that are the cluster's own machinery, not outside it."""
CLUSTER_ENTITIES = frozenset(
    {"host", "remote-node", "kube-apiserver", "health", "ingress", "init", "unmanaged"}
)
"""Cilium's reserved identities inside the cluster (world and its halves are outside)."""
PEER_GROUPS = frozenset({OUTSIDE, WHOLE_CLUSTER, CLUSTER_OWN})
"""Groups of peers, not namespaces: no workload of their own, no namespace view."""


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


def _selected(labels: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(
        sorted(
            (k.removeprefix("k8s:"), v)
            for k, v in labels
            if k.removeprefix("k8s:") != NAMESPACE_LABEL
            and not k.removeprefix("k8s:").startswith("io.cilium.k8s.")
        )
    )


def _endpoint_node(selector: Selector | None, namespace: str) -> Node:
    labels = dict(selector.labels) if selector is not None else {}
    expressions = bool(selector.expressions) if selector is not None else False
    ns = str(labels.get(NAMESPACE_LABEL) or labels.get("k8s:" + NAMESPACE_LABEL) or namespace)
    items = _selected(labels.items())
    if expressions or not items:
        shown = ",".join(f"{k}={v}" for k, v in items) or "all"
        extra = " +expr" if expressions else ""
        return Node(f"sel:{ns}/{shown}{extra}", f"{shown}{extra}", "selector", ns)
    name = workload_name(items) if any(k in PRIORITY_KEYS for k, _ in items) else ""
    name = name or ",".join(f"{k}={v}" for k, v in items)
    return Node(f"wl:{ns}/{name}", name, "workload", ns, workload_name(items))


def target_node(policy: Policy, spec: Spec) -> Node:
    return _endpoint_node(spec.subject, policy.written_namespace)


def _peer_nodes(rule: Rule, namespace: str) -> list[Node]:
    nodes = [_endpoint_node(s, namespace) for s in rule.endpoints]
    nodes += [Node(f"entity:{e}", e, "entity") for e in rule.entities]
    nodes += [Node(f"cidr:{c.cidr}", str(c.cidr), "cidr") for c in rule.cidrs]
    for fqdn in rule.fqdns:
        nodes.append(Node(f"fqdn:{fqdn.text}", fqdn.text, "fqdn"))
    return nodes or [Node("entity:all", "all", "entity")]


def _ports(rule: Rule) -> list[str]:
    out = []
    for port_rule in rule.port_rules:
        l7 = " (HTTP)" if port_rule.has_http else " (DNS)" if port_rule.has_dns else ""
        for port in port_rule.ports:
            protocol = port.protocol_written if "protocol" in port.written else "ANY"
            number = port.port_written if "port" in port.written else "*"
            text = f"{protocol}/{number}"
            if port.end_written:
                text += f"-{port.end_written}"
            out.append(text + l7)
    out += [f"ICMP type {icmp.type_written}" for icmp in rule.icmps]
    return out or ["any port"]


def traffic_graph(policies: Iterable[PolicyDocument]) -> TrafficGraph:
    """The allowed traffic of ``policies`` (ingress and egress allow rules)."""
    nodes: dict[str, Node] = {}
    edges: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    selected_by: dict[str, set[str]] = {}
    for document in policies:
        # A shared policy is drawn at each workload it serves; a ClusterNetworkPolicy
        # selects by namespace and tier: not drawn here.
        policy = read_policy(member_view(document) if isinstance(document, Mapping) else document)
        if not policy.cilium:
            continue
        name = f"{policy.written_namespace}/{policy.name}".lstrip("/")
        for spec in policy.specs:
            target = target_node(policy, spec)
            nodes.setdefault(target.id, target)
            selected_by.setdefault(target.id, set()).add(name)
            for section in ("ingress", "egress"):
                for rule in spec.rules(section):
                    for peer in _peer_nodes(rule, target.namespace):
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
    if node.id == "entity:cluster":
        return WHOLE_CLUSTER
    if node.kind == "entity" and node.id.removeprefix("entity:") in CLUSTER_ENTITIES:
        return CLUSTER_OWN
    return OUTSIDE


def plan_node(name: str) -> Node:
    """The node of an end of a plan's traffic (``namespace/workload`` or an entity)."""
    if "/" in name:
        ns, workload = name.split("/", 1)
        return Node(f"wl:{ns}/{workload}", workload, "workload", ns, workload)
    return Node(f"entity:{name}", name, "entity")


def links_with_plan(graph: TrafficGraph, plan: Plan | None) -> tuple[list[Node], list[Link]]:
    """The graph's nodes and edges as links to draw, with the plan's would-break traffic as
    links of their own (and the nodes they need that no policy names)."""
    known = {n.id: n for n in graph.nodes}
    extra: dict[str, Node] = {}
    links = []

    def node(name: str) -> str:
        found = plan_node(name)
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
