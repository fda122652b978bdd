"""How much of the cluster the policies cover: of the workloads a review knows of (the
policies' targets and peers, the evidence's sample flows, a plan's traffic), those some
policy selects with rules for ingress, and for egress — per namespace and in total. A
reviewer asks it first: a folder of 500 good policies still leaves a cluster open if the
500 are a third of its workloads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from cpg_core._base.documents import PolicyDocument, PolicyEvidence
from cpg_core._policy.model import read_policy
from cpg_core._reports.graph import target_node
from cpg_core._review.plan_documents import Plan
from cpg_core._synthesis.baseline import member_view

_ALL = "all"
"""The label of an endpoint selector that selects every pod of its namespace."""


@attrs.frozen(slots=True)
class NamespaceCoverage:
    namespace: str
    workloads: int
    ingress: int
    """Workloads some policy selects with ingress rules."""
    egress: int
    """Workloads some policy selects with egress rules."""
    ingress_open: tuple[str, ...] = ()
    """Workloads no policy selects with ingress rules (by name)."""
    egress_open: tuple[str, ...] = ()


@attrs.frozen(slots=True)
class Coverage:
    workloads: int
    ingress: int
    egress: int
    namespaces: tuple[NamespaceCoverage, ...]

    def share(self, direction: str) -> str:
        """``94 %`` of the workloads covered in ``direction`` (``—`` with no workload)."""
        covered = self.ingress if direction == "ingress" else self.egress
        return f"{100 * covered / self.workloads:.0f} %" if self.workloads else "—"


def _workloads_seen(
    policies: Iterable[PolicyDocument],
    evidence: Mapping[str, PolicyEvidence],
    plan: Plan | None,
    peers: Iterable[tuple[str, str]],
) -> set[tuple[str, str]]:
    seen = set(peers)
    for doc in evidence.values():
        for rule in doc.rules:
            for sample in rule.samples:
                for side in (sample.src, sample.dst):
                    if side.namespace and side.workload:
                        seen.add((side.namespace, side.workload))
    if plan is not None:
        ends = [t for item in plan.would_break for t in (item.traffic,)]
        ends += list(plan.not_fixed)
        for traffic in ends:
            for name in (traffic.source, traffic.destination):
                namespace, slash, workload = name.partition("/")
                if slash and namespace and workload:
                    seen.add((namespace, workload))
        seen.update((n.namespace, n.workload) for n in plan.newly_enforced)
    return seen


def coverage(
    policies: Iterable[PolicyDocument],
    evidence: Mapping[str, PolicyEvidence],
    plan: Plan | None = None,
    peers: Iterable[tuple[str, str]] = (),
) -> Coverage:
    """The coverage of ``policies`` over the workloads they, their ``evidence``, the
    ``plan`` and the graph's workload ``peers`` (namespace, workload) show."""
    selected: dict[str, set[tuple[str, str]]] = {"ingress": set(), "egress": set()}
    everything: dict[str, set[str]] = {"ingress": set(), "egress": set()}
    """Namespaces a policy covers whole (an empty endpointSelector); ``*`` every one."""
    targets: set[tuple[str, str]] = set()
    for document in policies:
        # A shared policy: its member workloads, one by one.
        policy = read_policy(member_view(document) if isinstance(document, Mapping) else document)
        if not policy.cilium:
            continue
        clusterwide = policy.namespace is None
        for spec in policy.specs:
            node = target_node(policy, spec)
            for direction in ("ingress", "egress"):
                if not spec.polices(direction):
                    continue
                if node.kind == "selector" and node.label == _ALL:
                    everything[direction].add("*" if clusterwide else node.namespace)
                elif node.kind == "workload":
                    selected[direction].add((node.namespace, node.workload))
                    targets.add((node.namespace, node.workload))
    seen = _workloads_seen(policies, evidence, plan, peers) | targets
    if plan is not None:  # the pods a proposal newly enforces are covered by it
        for newly in plan.newly_enforced:
            selected[newly.direction].add((newly.namespace, newly.workload))
    spaces: dict[str, list[str]] = {}
    for namespace, workload in sorted(seen):
        spaces.setdefault(namespace, []).append(workload)

    def covered(direction: str, namespace: str, workload: str) -> bool:
        whole = everything[direction]
        return (namespace, workload) in selected[direction] or bool(whole & {"*", namespace})

    rows = []
    for namespace, names in sorted(spaces.items()):
        open_in = {
            d: tuple(n for n in names if not covered(d, namespace, n))
            for d in ("ingress", "egress")
        }
        rows.append(
            NamespaceCoverage(
                namespace=namespace,
                workloads=len(names),
                ingress=len(names) - len(open_in["ingress"]),
                egress=len(names) - len(open_in["egress"]),
                ingress_open=open_in["ingress"],
                egress_open=open_in["egress"],
            )
        )
    return Coverage(
        workloads=sum(r.workloads for r in rows),
        ingress=sum(r.ingress for r in rows),
        egress=sum(r.egress for r in rows),
        namespaces=tuple(rows),
    )
