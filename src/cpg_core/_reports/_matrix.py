"""Who talks to whom as an adjacency matrix: a row per source namespace, a column per
destination namespace (and one for the peers outside the cluster), a cell per pair with
traffic. A node-link drawing of 500 workloads is a bundle of curves whose labels sit on one
another; a matrix shows every pair at any size, and opening a cell shows the workloads of
that pair the same way."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import attrs

from cpg_core._reports._layout import natural_key
from cpg_core._reports.graph import OUTSIDE, Link, Node, group_of
from cpg_core._review.plan_documents import Plan

STATUSES = ("breaks", "newly", "allowed")
"""A cell's colour, the most urgent of its links': traffic that works today and would break,
traffic to or from pods the proposal newly enforces, and traffic the policies allow."""


@attrs.frozen(slots=True)
class PairLink:
    """One connection between two workloads (or a workload and an outside peer)."""

    source: str
    target: str
    ports: tuple[str, ...]
    status: str


@attrs.frozen(slots=True)
class MatrixCell:
    source: str
    """The source namespace (or ``outside the cluster``)."""
    target: str
    connections: int
    ports: tuple[str, ...]
    status: str
    links: tuple[PairLink, ...] = attrs.field(default=(), eq=False)


@attrs.frozen(slots=True)
class Matrix:
    groups: tuple[str, ...]
    """Rows and columns, in natural order, the peers outside the cluster last."""
    cells: tuple[MatrixCell, ...]


def _status(link: Link, newly: Collection[tuple[str, str]]) -> str:
    if link.breaks:
        return "breaks"
    if (link.target, "ingress") in newly or (link.source, "egress") in newly:
        return "newly"
    return "allowed"


def namespace_matrix(
    nodes: Sequence[Node], links: Sequence[Link], newly: Collection[tuple[str, str]] = ()
) -> Matrix:
    """The matrix of ``links`` between the groups of ``nodes``; ``newly`` holds the workloads
    (id, direction) a plan says the proposal newly enforces: the traffic into them
    (ingress) or out of them (egress) is marked."""
    by_id = {n.id: n for n in nodes}
    pairs: dict[tuple[str, str], list[PairLink]] = {}
    for link in links:
        a, b = group_of(by_id[link.source]), group_of(by_id[link.target])
        pairs.setdefault((a, b), []).append(
            PairLink(link.source, link.target, link.ports, _status(link, newly))
        )
    groups = sorted({group_of(n) for n in nodes}, key=lambda g: (g == OUTSIDE, natural_key(g)))
    rank = {status: i for i, status in enumerate(STATUSES)}
    cells = []
    for (a, b), found in sorted(
        pairs.items(), key=lambda kv: (groups.index(kv[0][0]), groups.index(kv[0][1]))
    ):
        found.sort(key=lambda p: (rank[p.status], natural_key(p.source), natural_key(p.target)))
        cells.append(
            MatrixCell(
                source=a,
                target=b,
                connections=len(found),
                ports=tuple(sorted({port for p in found for port in p.ports}, key=natural_key)),
                status=min((p.status for p in found), key=rank.__getitem__),
                links=tuple(found),
            )
        )
    return Matrix(groups=tuple(groups), cells=tuple(cells))


def newly_enforced(plan: Plan | None) -> set[tuple[str, str]]:
    """The graph ids of the workloads a plan says the proposal newly enforces, with the
    direction it enforces."""
    if plan is None:
        return set()
    return {(f"wl:{n.namespace}/{n.workload}", n.direction) for n in plan.newly_enforced}
