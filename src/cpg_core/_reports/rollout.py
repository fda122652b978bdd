"""The rollout order of a plan's proposal (§D59): who depends on whom, read from the traffic
the proposed policies allow, and which workloads wait (not ready, or something would break)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cpg_core._base.documents import PolicyDocument
from cpg_core._reports.graph import traffic_graph
from cpg_core._reports.inputs import is_shared_name
from cpg_core._review.plan_documents import Plan, WouldBreak
from cpg_core._review.readiness import WorkloadProfile
from cpg_core._review.rollout import Rollout, RolloutUnit, SharedTie, rollout_order

KEEP_LEARNING = "keep learning: "
UNCHECKED = (
    "The capture has no traffic that works today: nothing here was checked for what it would "
    "break, so each batch's shadow run is its only check"
)
TIED_NOTE = (
    "{n} workloads share policies (_shared/): each is applied with all the others a shared "
    "policy serves, never alone (its own file lacks the shared rule; the shared file alone "
    "puts the others into default-deny); to roll them out a batch at a time, write their "
    "policies without sharing (the shared option at 0)"
)
NO_EVIDENCE = "no evidence behind its policy: how long it was observed is unknown"


def plan_rollout(
    plan: Plan,
    proposal: Sequence[PolicyDocument],
    files: Mapping[str, str],
    *,
    folder: str,
    shadow_for: float,
) -> Rollout:
    """The batches of the proposal's ready workloads (``files``: each policy's file, by
    ``namespace/name``), each checked by a shadow run of ``shadow_for`` seconds."""
    graph = traffic_graph(proposal)
    nodes = {node.id: node for node in graph.nodes}
    names = {
        node_id: f"{node.namespace}/{node.workload or node.label}"
        for node_id, node in nodes.items()
        if node.kind in ("workload", "selector")
    }
    clients: dict[str, set[str]] = {}
    for edge in graph.edges:
        if edge.source in names and edge.target in names and edge.source != edge.target:
            clients.setdefault(names[edge.target], set()).add(names[edge.source])
    units = []
    members: dict[str, set[str]] = {}
    for node_id, policies in graph.selected_by.items():
        if node_id not in names:
            continue
        name = names[node_id]
        own = tuple(p for p in policies if not is_shared_name(p.rpartition("/")[2]))
        for shared in set(policies) - set(own):
            members.setdefault(shared, set()).add(name)
        units.append(
            RolloutUnit(
                name=name,
                policies=own,
                files=tuple(files[p] for p in own if p in files),
                clients=frozenset(clients.get(name, ())),
            )
        )
    ties = [
        SharedTie(policy, files.get(policy, ""), frozenset(found))
        for policy, found in sorted(members.items())
    ]
    waiting = waiting_reasons([u.name for u in units], plan.readiness, plan.would_break)
    return rollout_order(units, ties, waiting, folder=folder, shadow_for=shadow_for)


def waiting_reasons(
    workloads: Sequence[str],
    readiness: Sequence[WorkloadProfile],
    would_break: Sequence[WouldBreak] = (),
) -> dict[str, str]:
    """Why each of ``workloads`` may not be enforced yet (the others are not named): traffic
    that works today would break, its evidence says keep learning, or there is none."""
    profiles = {p.name: p for p in readiness}
    breaking: dict[str, int] = {}
    for item in would_break:
        breaking[item.endpoint] = breaking.get(item.endpoint, 0) + max(item.traffic.flows, 1)
    waiting = {}
    for name in workloads:
        profile = profiles.get(name)
        if name in breaking:
            flows = breaking[name]
            waiting[name] = (
                f"would break {flows} flow{'s' if flows != 1 else ''} that work today (or a "
                "dependency the cluster declares): fix first (cpg plan's write-fixes option)"
            )
        elif profile is None:
            waiting[name] = NO_EVIDENCE
        elif not profile.ready:
            waiting[name] = KEEP_LEARNING + "; ".join(profile.reasons)
    return waiting
