"""A rollout order (ARCHITECTURE §D59): the ready workloads' policies in batches a team
applies one after another.

A policy that is wrong breaks the workload it selects and everything that depends on it. So
the batches start with the workloads nothing else depends on (a wrong policy there breaks
one workload) and end with the ones many depend on (a database, a cluster's DNS), once the
earlier batches have shown the policies hold. A workload is placed after every workload
whose traffic to it its policies allow (its clients); workloads that depend on each other
share a layer. Workloads a shared policy serves are applied together, with it: the shared
file alone would put the others into default-deny with the shared rule only, and their own
files alone would lack it. Only ready workloads, with nothing the plan says would break,
are placed; the others wait, each with why.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence

import attrs

BATCH_SIZE = 20
"""Workloads in one batch at most (a tie of a shared policy is never split)."""


@attrs.frozen(slots=True)
class RolloutUnit:
    """One workload of the proposal: its own policies and files, and its clients."""

    name: str
    """``namespace/workload``."""
    policies: tuple[str, ...]
    """Its own policies, ``namespace/name``."""
    files: tuple[str, ...]
    clients: frozenset[str] = frozenset()
    """The workloads whose traffic to it the policies allow: they depend on it."""


@attrs.frozen(slots=True)
class SharedTie:
    """A shared policy and the workloads it serves: applied together."""

    policy: str
    file: str
    members: frozenset[str]


@attrs.frozen(slots=True)
class RolloutBatch:
    number: int
    workloads: tuple[str, ...]
    policies: tuple[str, ...]
    """Their own policies and the shared ones that serve only them."""
    files: tuple[str, ...]
    apply: str
    """The command that applies the batch (cpg applies nothing)."""
    shadow: str
    """The shadow run that checks the batch on live traffic before it is applied."""
    depended_on_by: int = 0
    """Workloads that depend on the batch's (what a wrong policy here would break too)."""


@attrs.frozen(slots=True)
class RolloutWait:
    workload: str
    why: str


@attrs.frozen(slots=True)
class Rollout:
    batches: tuple[RolloutBatch, ...] = ()
    waiting: tuple[RolloutWait, ...] = ()
    """Workloads left out of the batches, each with why (keep learning, would break, tied to
    one that waits)."""
    tied: int = 0
    """Workloads shared policies tie to others: rolled out together, never one by one."""

    @property
    def workloads(self) -> int:
        return sum(len(b.workloads) for b in self.batches)


def duration_flag(seconds: float) -> str:
    """A duration as a flag takes it: ``6h``, ``90m``, ``1d``, ``45s``."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def rollout_order(
    units: Sequence[RolloutUnit],
    ties: Sequence[SharedTie],
    waiting: Mapping[str, str],
    *,
    folder: str,
    shadow_for: float,
    batch_size: int = BATCH_SIZE,
) -> Rollout:
    """The batches of the units not ``waiting`` (name → why), those nothing depends on
    first; each with its ``kubectl apply`` and its ``cpg shadow`` over ``shadow_for``
    seconds."""
    by_name = {unit.name: unit for unit in units}
    groups = _tied_groups(by_name, ties)
    held = dict(waiting)
    for group in groups:
        blocked = sorted(name for name in group if name in held)
        if blocked:
            for name in sorted(group - set(blocked)):
                held[name] = f"tied by shared policies to {blocked[0]}, which waits"
    layer = _layers(units, groups)
    placed = [name for name in by_name if name not in held]
    placed.sort(key=lambda name: (layer[name], name))
    group_of = {name: group for group in groups for name in group}
    batches: list[list[str]] = []
    current_layer = -1
    seen: set[str] = set()
    for name in placed:
        if name in seen:
            continue
        members = sorted(group_of.get(name, frozenset({name})))
        seen.update(members)
        fresh = layer[name] != current_layer
        if fresh or not batches or len(batches[-1]) + len(members) > batch_size:
            batches.append([])
        batches[-1].extend(members)
        current_layer = layer[name]
    dependents = _dependents(units)
    made = [
        _batch(number, names, by_name, ties, dependents, folder, shadow_for)
        for number, names in enumerate(batches, 1)
    ]
    return Rollout(
        batches=tuple(made),
        waiting=tuple(RolloutWait(name, why) for name, why in sorted(held.items())),
        tied=sum(len(group) for group in groups),
    )


def _tied_groups(
    by_name: Mapping[str, RolloutUnit], ties: Iterable[SharedTie]
) -> list[frozenset[str]]:
    """The workloads shared policies tie together (transitively), each group once."""
    parent = {name: name for name in by_name}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for tie in ties:
        members = sorted(m for m in tie.members if m in parent)
        for other in members[1:]:
            parent[root(other)] = root(members[0])
    found: dict[str, set[str]] = {}
    for name in parent:
        found.setdefault(root(name), set()).add(name)
    return [frozenset(group) for group in found.values() if len(group) > 1]


def _layers(units: Sequence[RolloutUnit], groups: Sequence[frozenset[str]]) -> dict[str, int]:
    """Each workload's layer: 0 when nothing depends on it, else one past its clients'
    (clients without a policy of their own count too). Workloads that depend on each other,
    or that a shared policy ties, share a layer."""
    edges: dict[str, set[str]] = {}
    for unit in units:
        edges.setdefault(unit.name, set())
        for client in unit.clients:
            if client != unit.name:
                edges.setdefault(client, set()).add(unit.name)
    for group in groups:
        for name in group:
            edges[name] |= group - {name}
    components = _strongly_connected(edges)
    component_of = {name: index for index, names in enumerate(components) for name in names}
    layer = [0] * len(components)
    # in topological order: each component's clients are done before it
    for index in range(len(components)):
        for name in components[index]:
            for server in edges[name]:
                target = component_of[server]
                if target != index:
                    layer[target] = max(layer[target], layer[index] + 1)
    return {name: layer[component_of[name]] for name in edges}


def _strongly_connected(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (a long chain of dependencies
    must not reach Python's recursion limit), in topological order: a component comes
    before those it reaches."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    found.reverse()  # Tarjan finds a component after every one it reaches
    return found


def _dependents(units: Sequence[RolloutUnit]) -> dict[str, frozenset[str]]:
    return {unit.name: frozenset(unit.clients - {unit.name}) for unit in units}


def _batch(
    number: int,
    names: Sequence[str],
    by_name: Mapping[str, RolloutUnit],
    ties: Sequence[SharedTie],
    dependents: Mapping[str, frozenset[str]],
    folder: str,
    shadow_for: float,
) -> RolloutBatch:
    inside = set(names)
    policies = [p for name in names for p in by_name[name].policies]
    files = [f for name in names for f in by_name[name].files]
    for tie in ties:
        if tie.members and tie.members <= inside:
            policies.append(tie.policy)
            files.append(tie.file)
    files = sorted(dict.fromkeys(files))
    policies = sorted(dict.fromkeys(policies))
    namespaces = sorted({name.split("/", 1)[0] for name in names})
    apply = "kubectl apply " + " ".join(f"-f {shlex.quote(f)}" for f in files)
    during = duration_flag(shadow_for) if shadow_for > 0 else "1h"
    shadow = " ".join(
        [
            "cpg shadow -d",
            shlex.quote(folder),
            *(f"-n {shlex.quote(ns)}" for ns in namespaces),
            *(f"--only {shlex.quote(p)}" for p in policies),
            f"--duration {during}",
        ]
    )
    outside = {d for name in names for d in dependents.get(name, ())} - inside
    return RolloutBatch(
        number=number,
        workloads=tuple(names),
        policies=tuple(policies),
        files=tuple(files),
        apply=apply,
        shadow=shadow,
        depended_on_by=len(outside),
    )
