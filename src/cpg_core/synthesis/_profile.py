"""How long and how wide a capture is (ARCHITECTURE §D59): its span, what became of its
flows, the protocols, directions and namespaces of the traffic its rules were made of, and
the nodes its samples name; and the times and durations a review prints, to the second."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

import attrs

from cpg_core.base import ZERO_TIME, Atom, EndpointPeer, Flow
from cpg_core.flows import Decision, PolicyTarget, RuleStats


def seconds_of(text: str) -> float | None:
    """An RFC 3339 time (Hubble's nanoseconds included) as seconds since the epoch; None for
    an absent or unreadable one, and for Go's zero time."""
    if not text or text == ZERO_TIME:
        return None
    base, _, rest = text.rstrip("Z").partition(".")
    digits = "".join(c for c in rest if c.isdigit())
    try:
        moment = datetime.fromisoformat(base).replace(tzinfo=UTC)
    except ValueError:
        return None
    return moment.timestamp() + (int(digits[:9].ljust(9, "0")) / 1e9 if digits else 0.0)


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
    learned: bool = False
    """Its rules were learned from traffic that works (``--learn forwarded``): their protocols
    and directions are the traffic's own, not only what was denied."""

    @property
    def one_protocol(self) -> str:
        """The protocol when the capture holds only one ("" otherwise)."""
        seen = [p for p, n in self.protocols.items() if n]
        return seen[0] if len(seen) == 1 else ""

    def text(self) -> str:
        span = duration_text(self.span_seconds)
        protocols = ", ".join(f"{p} {n:,}" for p, n in self.protocols.items()) or "none"
        return (
            f"{span} ({self.first or '?'} → {self.last or '?'}), {self.flows:,} flows; "
            f"protocols of its rules: {protocols}; {_count(len(self.namespaces), 'namespace')}"
            + (f", {_count(len(self.nodes), 'node')} in its samples" if self.nodes else "")
        )


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def capture_profile(
    window: tuple[str, str],
    decisions: Mapping[Decision, int],
    attribution: Mapping[PolicyTarget, Mapping[Atom, RuleStats]],
) -> CaptureProfile:
    """The profile of a capture from what the aggregator counted: its time window, its
    decisions and its allow entries (with their samples)."""
    first, last = window
    start, end = seconds_of(first), seconds_of(last)
    protocols: dict[str, int] = {}
    directions: set[str] = set()
    namespaces: set[str] = set()
    nodes: set[str] = set()
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
            nodes.update(f.node_name for f in _samples(stats) if f.node_name)
    return CaptureProfile(
        first=at_second(first),
        last=at_second(last),
        span_seconds=round(end - start, 3) if start is not None and end is not None else 0.0,
        flows=sum(decisions.values()),
        by_decision={str(d): n for d, n in sorted(decisions.items()) if n},
        protocols=dict(sorted(protocols.items())),
        directions=tuple(sorted(directions)),
        namespaces=tuple(sorted(namespaces)),
        nodes=tuple(sorted(nodes)),
        learned=learned,
    )


_LEARNED = frozenset({"forwarded", "redirected"})


def _samples(stats: RuleStats) -> Iterable[Flow]:
    return stats.sample_flows() if stats.samples else ()
