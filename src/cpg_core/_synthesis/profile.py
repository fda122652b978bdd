"""How long and how wide a capture is (ARCHITECTURE §D59): its span, what became of its
flows, the protocols, directions and namespaces of the traffic its rules were made of, and
the nodes its samples name; and the times and durations a review prints, to the second."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

import attrs

from cpg_core._base.documents import ZERO_TIME
from cpg_core._base.rules import Atom, EndpointPeer
from cpg_core._flows.attribution import RuleStats
from cpg_core._flows.decide import Decision
from cpg_core._flows.synthesis import PolicyTarget


def seconds_of(text: str) -> float | None:
    """An RFC 3339 time (Hubble's nanoseconds included) as seconds since the epoch; None for
    an absent or unreadable one, and for Go's zero time."""
    if not text or text == ZERO_TIME:
        return None
    try:  # to the microsecond: readiness is judged in seconds
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def at_second(text: str) -> str:
    """A recorded time to the second, RFC 3339 in UTC ("" for none): what a reviewer reads."""
    seconds = seconds_of(text)
    if seconds is None:
        return ""
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def duration_text(seconds: float) -> str:
    """``0.47 s``, ``42 s``, ``3 m 20 s``, ``5 h 2 m``, ``3 d 4 h``: two units at most."""
    if seconds < 10:
        return f"{seconds:.2f}".rstrip("0").rstrip(".") + " s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    total = int(seconds)
    units = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))
    for index, (name, size) in enumerate(units):
        if total >= size:
            text = f"{total // size} {name}"
            rest_name, rest_size = units[index + 1] if index + 1 < len(units) else ("", 1)
            rest = (total % size) // rest_size
            return f"{text} {rest} {rest_name}" if rest_name and rest else text
    return f"{total} s"


@attrs.frozen(slots=True, kw_only=True)
class CaptureProfile:
    """How long and how wide a capture is."""

    first: str
    last: str
    span_seconds: float
    flows: int
    by_decision: Mapping[str, int] = attrs.field(factory=dict)
    """Flows by what became of them (candidates, forwarded, replies, infrastructure…)."""
    protocols: Mapping[str, int] = attrs.field(factory=dict)
    """The protocols of the traffic rules were made of, with their flows."""
    directions: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    """Nodes the sample flows name (a sample per pair of pods: not every node)."""
    gaps: tuple[tuple[str, str], ...] = ()
    """The longest stretches without a flow (at least ten minutes, and a fiftieth of the
    span): an exporter that stopped, a relay that was down."""
    learned: bool = False
    """Its rules were learned from traffic that works (``--learn forwarded``): their protocols
    and directions are the traffic's own, not only what was denied."""

    @property
    def one_protocol(self) -> str:
        """The protocol when the capture holds only one ("" otherwise)."""
        seen = [p for p, n in self.protocols.items() if n]
        return seen[0] if len(seen) == 1 else ""

    def joined(self, earlier: CaptureProfile | None) -> CaptureProfile:
        """This profile of a live session's newest flush with what ``earlier`` flushes drained:
        the window, flows and gaps are the session's own already; the rules' protocols add up,
        and what was seen is the union of both."""
        if earlier is None:
            return self
        protocols = dict(earlier.protocols)
        for name, flows in self.protocols.items():
            protocols[name] = protocols.get(name, 0) + flows
        return attrs.evolve(
            self,
            protocols=dict(sorted(protocols.items())),
            directions=tuple(sorted({*earlier.directions, *self.directions})),
            namespaces=tuple(sorted({*earlier.namespaces, *self.namespaces})),
            nodes=tuple(sorted({*earlier.nodes, *self.nodes})),
            learned=self.learned or earlier.learned,
        )

    def text(self) -> str:
        span = duration_text(self.span_seconds)
        protocols = ", ".join(f"{p} {n:,}" for p, n in self.protocols.items()) or "none"
        return (
            f"{span} ({self.first or '?'} → {self.last or '?'}), {self.flows:,} flows; "
            f"protocols of its rules: {protocols}; {_count(len(self.namespaces), 'namespace')}"
            + (f", {_count(len(self.nodes), 'node')} in its samples" if self.nodes else "")
            + self._gaps_text()
        )

    def _gaps_text(self) -> str:
        if not self.gaps:
            return ""
        longest = max(self.gaps, key=lambda g: (seconds_of(g[1]) or 0) - (seconds_of(g[0]) or 0))
        length = (seconds_of(longest[1]) or 0) - (seconds_of(longest[0]) or 0)
        return (
            f"; {_count(len(self.gaps), 'gap')} without a flow (longest "
            f"{duration_text(length)} from {longest[0]})"
        )


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


MIN_GAP = 600.0
GAPS_SHOWN = 5


def time_gaps(minutes: Mapping[str, int], span: float) -> tuple[tuple[str, str], ...]:
    """The longest stretches between flows, from flows per minute (or hour), each at least
    ten minutes and a fiftieth of ``span`` long, in time order."""
    spans = []
    for key in minutes:
        start = seconds_of(key + (":00Z" if len(key) == 16 else ":00:00Z"))
        if start is not None:
            spans.append((start, start + (60.0 if len(key) == 16 else 3600.0)))
    spans.sort()
    least = max(MIN_GAP, span / 50)
    found = []
    reach = spans[0][1] if spans else 0.0
    for start, end in spans[1:]:
        if start - reach >= least:
            found.append((reach, start))
        reach = max(reach, end)
    longest = sorted(found, key=lambda g: g[0] - g[1])[:GAPS_SHOWN]
    return tuple((_text(a), _text(b)) for a, b in sorted(longest))


def _text(seconds: float) -> str:
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def capture_profile(
    window: tuple[str, str],
    decisions: Mapping[Decision, int],
    attribution: Mapping[PolicyTarget, Mapping[Atom, RuleStats]],
    minutes: Mapping[str, int] | None = None,
    nodes: Iterable[str] = (),
) -> CaptureProfile:
    """The profile of a capture from what the aggregator counted: its time window, its
    decisions, its allow entries, its flows per minute and the ``nodes`` its samples name
    (read where the samples are parsed anyway: see :func:`sample_nodes`)."""
    first, last = window
    start, end = seconds_of(first), seconds_of(last)
    protocols: dict[str, int] = {}
    directions: set[str] = set()
    namespaces: set[str] = set()
    learned = False
    for target, atoms in attribution.items():
        namespaces.add(target.namespace)
        for atom, stats in atoms.items():
            if not stats.count:
                continue
            family = "ICMP" if atom.protocol.startswith("ICMP") else atom.protocol
            protocols[family] = protocols.get(family, 0) + stats.count
            directions.add(atom.direction)
            learned = learned or bool(_LEARNED & stats.classes.keys())
            if isinstance(atom.peer, EndpointPeer):
                namespaces.add(atom.peer.namespace)
    span = round(end - start, 3) if start is not None and end is not None else 0.0
    return CaptureProfile(
        first=at_second(first),
        last=at_second(last),
        span_seconds=span,
        gaps=time_gaps(minutes or {}, span),
        flows=sum(decisions.values()),
        by_decision={str(d): n for d, n in sorted(decisions.items()) if n},
        protocols=dict(sorted(protocols.items())),
        directions=tuple(sorted(directions)),
        namespaces=tuple(sorted(namespaces)),
        nodes=tuple(sorted(set(nodes))),
        learned=learned,
    )


_LEARNED = frozenset({"forwarded", "redirected"})


def sample_nodes(attribution: Mapping[Atom, RuleStats]) -> frozenset[str]:
    """The nodes one workload's sample flows name (parsing its pending samples: a writer that
    keeps evidence parses them anyway)."""
    return frozenset(
        flow.node_name
        for stats in attribution.values()
        if stats.samples
        for flow in stats.sample_flows()
        if flow.node_name
    )
