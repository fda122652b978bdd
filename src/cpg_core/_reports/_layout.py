"""Where the HTML report draws things. Groups (namespaces, and peers outside the cluster) are
boxes in columns, ordered so that traffic mostly runs left to right (a longest-path layering of
the group graph, squeezed into a few columns so text stays readable); the boxes of a column
and the nodes of a box are ordered by the mean position of what they talk to, which
untangles most edges. Edges are curves between box sides, labelled at their middle.
Deterministic: the same graph, the same drawing."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

COLUMN_GAP = 100
ROW_GAP = 12
BOX_PAD, BOX_HEAD = 10, 24
BOX_GAP = 22


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """``bookinfo-2`` before ``bookinfo-10``."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part
    )


@attrs.frozen(slots=True)
class Box:
    name: str
    x: float
    y: float
    w: float
    h: float


@attrs.frozen(slots=True)
class Drawing:
    centres: dict[str, tuple[float, float]]
    boxes: tuple[Box, ...]
    width: float
    height: float
    node_w: float
    node_h: float


def _layers(groups: Sequence[str], links: Mapping[tuple[str, str], int], last: str) -> list[int]:
    """A column per group: longest path over the group graph with the back edges of a
    depth-first walk (in natural order) left out; ``last`` (peers outside) goes right."""
    order = {g: i for i, g in enumerate(groups)}
    succ: dict[str, list[str]] = {g: [] for g in groups}
    for (a, b), _ in sorted(links.items(), key=lambda kv: (order[kv[0][0]], order[kv[0][1]])):
        if a != b and a != last and b != last:
            succ[a].append(b)
    state: dict[str, int] = {}
    forward: dict[str, list[str]] = {g: [] for g in groups}

    def walk(g: str) -> None:
        stack = [(g, iter(succ[g]))]
        state[g] = 1
        while stack:
            node, children = stack[-1]
            for child in children:
                if state.get(child) is None:
                    forward[node].append(child)
                    state[child] = 1
                    stack.append((child, iter(succ[child])))
                    break
                if state[child] == 2:
                    forward[node].append(child)
            else:
                state[node] = 2
                stack.pop()

    for g in groups:
        if g not in state:
            walk(g)
    rank = {g: 0 for g in groups}
    for _ in groups:  # relax: at most len(groups) rounds on a DAG
        changed = False
        for a in groups:
            for b in forward[a]:
                if rank[b] < rank[a] + 1:
                    rank[b], changed = rank[a] + 1, True
        if not changed:
            break
    return [rank[g] for g in groups]


def layout(
    groups: Mapping[str, Sequence[str]],
    edges: Sequence[tuple[str, str]],
    *,
    node_w: float,
    node_h: float,
    max_columns: int = 4,
    outside: str = "",
    boxed: bool = True,
    column_gap: float = COLUMN_GAP,
) -> Drawing:
    """Place the nodes of ``groups`` (group name -> node ids). ``outside`` names the group
    drawn in the last column whatever the traffic; ``boxed=False`` leaves no room for group
    boxes (each group one node, as namespaces are in the overview)."""
    head, pad, gap = (BOX_HEAD, BOX_PAD, BOX_GAP) if boxed else (0, 0, 2 * ROW_GAP)
    names = sorted(groups, key=lambda g: (g == outside, natural_key(g)))
    group_of = {node: g for g in names for node in groups[g]}
    links: dict[tuple[str, str], int] = {}
    for a, b in edges:
        key = (group_of[a], group_of[b])
        links[key] = links.get(key, 0) + 1
    ranks = _layers(names, links, outside)
    top = max([r for g, r in zip(names, ranks, strict=True) if g != outside] or [0])
    squeeze = max(1.0, (top + 1) / max(1, max_columns - (outside in groups)))
    column = {
        g: (int(r / squeeze) if g != outside else int(top / squeeze) + 1)
        for g, r in zip(names, ranks, strict=True)
    }
    columns = sorted(set(column.values()))
    column = {g: columns.index(c) for g, c in column.items()}
    neighbours: dict[str, list[str]] = {}
    for a, b in edges:
        neighbours.setdefault(a, []).append(b)
        neighbours.setdefault(b, []).append(a)
    # A first placement in natural order, then two sweeps ordering by the neighbours' mean
    # height (boxes within a column, nodes within a box).
    order = {g: [*sorted(groups[g], key=natural_key)] for g in names}
    stacks = {c: [g for g in names if column[g] == c] for c in range(len(columns))}
    centres: dict[str, tuple[float, float]] = {}
    boxes: list[Box] = []
    width = height = 0.0
    for sweep in range(3):
        if sweep:
            for g in names:
                order[g].sort(key=lambda n: (_mean(n, neighbours, centres), natural_key(n)))
            for stack in stacks.values():
                stack.sort(
                    key=lambda g: (
                        g == outside,
                        sum(_mean(n, neighbours, centres) for n in order[g]) / len(order[g]),
                        natural_key(g),
                    )
                )
        centres, boxes = {}, []
        width = height = 0.0
        for c in range(len(columns)):
            x = c * (node_w + 2 * pad + column_gap)
            y = 0.0
            for g in stacks[c]:
                h = head + 2 * pad + len(order[g]) * (node_h + ROW_GAP) - ROW_GAP
                for i, node in enumerate(order[g]):
                    centres[node] = (
                        x + pad + node_w / 2,
                        y + head + pad + i * (node_h + ROW_GAP) + node_h / 2,
                    )
                boxes.append(Box(g, x, y, node_w + 2 * pad, h))
                y += h + gap
            width = max(width, x + node_w + 2 * pad)
            height = max(height, y - gap)
    return Drawing(centres, tuple(boxes), max(width, 200.0), max(height, 100.0), node_w, node_h)


def _mean(
    node: str, neighbours: Mapping[str, list[str]], centres: Mapping[str, tuple[float, float]]
) -> float:
    ys = [centres[n][1] for n in neighbours.get(node, ()) if n in centres]
    return sum(ys) / len(ys) if ys else centres.get(node, (0.0, 0.0))[1]


Point = tuple[float, float]
Bezier = tuple[Point, Point, Point, Point]


def bezier(drawing: Drawing, source: str, target: str) -> Bezier:
    """The cubic curve from ``source`` to ``target``, leaving and entering box sides: its end
    points and control points."""
    (x1, y1), (x2, y2) = drawing.centres[source], drawing.centres[target]
    half = drawing.node_w / 2
    if abs(x1 - x2) < 1:  # same column: an arc out to the right and back
        a, b = (x1 + half, y1), (x2 + half, y2)
        bulge = 40 + min(120.0, abs(y2 - y1) / 3)
        c1, c2 = (a[0] + bulge, a[1]), (b[0] + bulge, b[1])
    elif x2 > x1:
        a, b = (x1 + half, y1), (x2 - half, y2)
        pull = (b[0] - a[0]) / 2
        c1, c2 = (a[0] + pull, a[1]), (b[0] - pull, b[1])
    else:  # right to left: leave on the left side, enter on the right
        a, b = (x1 - half, y1), (x2 + half, y2)
        pull = max(60.0, (a[0] - b[0]) / 2)
        c1, c2 = (a[0] - pull, a[1]), (b[0] + pull, b[1])
    return a, c1, c2, b


def point_on(curve: Bezier, t: float) -> Point:
    a, c1, c2, b = curve
    u = 1 - t
    return (
        u**3 * a[0] + 3 * u * u * t * c1[0] + 3 * u * t * t * c2[0] + t**3 * b[0],
        u**3 * a[1] + 3 * u * u * t * c1[1] + 3 * u * t * t * c2[1] + t**3 * b[1],
    )


def svg_path(curve: Bezier) -> str:
    a, c1, c2, b = curve
    return (
        f"M{a[0]:.0f},{a[1]:.0f} C{c1[0]:.0f},{c1[1]:.0f} {c2[0]:.0f},{c2[1]:.0f} "
        f"{b[0]:.0f},{b[1]:.0f}"
    )


Rect = tuple[float, float, float, float]
"""left, top, right, bottom."""

LABEL_CHAR_W = 7.0
"""A generous width of one character of an 11 px edge label (measured: 5.5–6.8 px in
Chromium's sans-serif), so that a label judged clear is clear on screen."""
LABEL_HEIGHT = 15.0
_ALONG = (0.5, 0.42, 0.58, 0.34, 0.66, 0.26, 0.74, 0.18, 0.82)
"""Where along its edge a label may sit, the middle first."""
_NUDGE = (0.0, -8.0, 8.0)


def label_box(x: float, y: float, text: str) -> Rect:
    """The box an edge label centred at ``x`` with its baseline 3 px above ``y`` covers."""
    half = len(text) * LABEL_CHAR_W / 2 + 2
    return (x - half, y - 3 - 12, x + half, y - 3 + 4)


def _overlaps(a: Rect, b: Rect) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


class _Taken:
    """The rectangles already on the drawing, in a grid of 64-unit cells, so that a label
    is checked against its neighbours only (a namespace view has hundreds of edges)."""

    CELL = 64.0

    def __init__(self, rects: Sequence[Rect]) -> None:
        self._cells: dict[tuple[int, int], list[Rect]] = {}
        for rect in rects:
            self.add(rect)

    def _keys(self, rect: Rect) -> list[tuple[int, int]]:
        c = self.CELL
        return [
            (i, j)
            for i in range(int(rect[0] // c), int(rect[2] // c) + 1)
            for j in range(int(rect[1] // c), int(rect[3] // c) + 1)
        ]

    def add(self, rect: Rect) -> None:
        for key in self._keys(rect):
            self._cells.setdefault(key, []).append(rect)

    def clear(self, rect: Rect) -> bool:
        cells = self._cells
        return not any(
            _overlaps(rect, other) for key in self._keys(rect) for other in cells.get(key, ())
        )


def place_labels(
    curves: Sequence[Bezier],
    texts: Sequence[str],
    obstacles: Sequence[Rect] = (),
    groups: Sequence[object] | None = None,
) -> list[Point | None]:
    """A place for each edge's label on its edge, clear of ``obstacles`` (the nodes and the
    boxes' titles) and of the labels placed before it; None where the edge has no free
    place left (its ports stay in its tooltip, and show when the edge is highlighted). The
    labels are placed in the order given: put the ones that matter most first. Edges of one
    of ``groups`` (None: an edge of its own) share one label: the first that finds a place."""
    taken = _Taken(obstacles)
    placed: set[object] = set()
    out: list[Point | None] = []
    for index, (curve, text) in enumerate(zip(curves, texts, strict=True)):
        group = groups[index] if groups is not None else None
        spot: Point | None = None
        if group is not None and group in placed:
            out.append(None)
            continue
        for t in _ALONG:
            x, y = point_on(curve, t)
            for nudge in _NUDGE:
                box = label_box(x, y + nudge, text)
                if taken.clear(box):
                    spot = (x, y + nudge)
                    taken.add(box)
                    break
            if spot is not None:
                break
        if spot is not None and group is not None:
            placed.add(group)
        out.append(spot)
    return out
